"""Rewards: values, NaN/no-image policy, B*(K+1) rows, Hydra configs, no grad and no weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mmsum.rewards import ClipBertScoreReward, Reward, RougeReward, build_reward, expand_batch
from mmsum.scoring import BertScorer, ClipBertScore, ClipScorer, rouge

CONF = Path(__file__).resolve().parents[2] / "conf"


def _view(dim: int, n_images=(2, 0)) -> dict:
    torch.manual_seed(0)
    B = len(n_images)
    feats = torch.randn(B, 3, dim)
    mask = torch.zeros(B, 3, dtype=torch.bool)
    for b, n in enumerate(n_images):
        mask[b, :n] = True
    return {
        "doc_text": ["The cat sat on the mat all day. It was warm.", "Paris is the capital of France."][:B],
        "ref_text": ["A cat sat on a mat.", "Paris is France's capital."][:B],
        "image_features": feats,
        "image_mask": mask,
        "ids": ["a", "b"][:B],
    }


def test_rouge_reward_matches_rouge_and_checks_rows() -> None:
    view = _view(8)
    summaries = ["the cat sat", "paris is the capital"]
    reward = build_reward("rouge2")
    assert isinstance(reward, Reward) and reward.name == "rouge2"
    torch.testing.assert_close(
        reward(view, summaries), rouge(summaries, view["ref_text"], ["rouge2"])["rouge2"].float()
    )
    with pytest.raises(ValueError, match="expand_batch"):
        reward(view, summaries * 3)
    out = reward(expand_batch(view, 3), [s for s in summaries for _ in range(3)])
    assert out.shape == (6,) and torch.equal(out[:3], out[0].repeat(3))
    with pytest.raises(ValueError):
        RougeReward("rougeX")


@pytest.fixture(scope="module")
def clipbert_reward(tiny_clip_path) -> ClipBertScoreReward:
    return ClipBertScoreReward("mmsum-tiny-rn", str(tiny_clip_path), "minilm", 6, device="cpu")


def test_clipbert_reward_value_and_missing_images(clipbert_reward) -> None:
    scorer: ClipBertScore = clipbert_reward.scorer
    view = _view(scorer.clip.feature_dim)
    summaries = ["A cat on a mat.", "Paris is a capital."]
    out = clipbert_reward(view, summaries)
    clip_s = scorer.clip.clip_s(view["image_features"], view["image_mask"], summaries)
    bert_s = scorer.bert.score(summaries, view["doc_text"])[0]
    torch.testing.assert_close(out[0], 0.25 * clip_s[0] + 0.75 * bert_s[0])
    torch.testing.assert_close(out[1], bert_s[1])  # no images: BERT-S fallback
    assert clipbert_reward.num_missing_image == 1 and not torch.isnan(out).any()
    # Usable in a loss (not an inference tensor), and carries no grad.
    logp = torch.zeros(2, requires_grad=True)
    (out * logp).sum().backward()
    assert not out.requires_grad


def test_clipbert_reward_scst_rows_hit_document_cache(clipbert_reward) -> None:
    scorer: ClipBertScore = clipbert_reward.scorer
    scorer.bert.cache.clear()
    view = expand_batch(_view(scorer.clip.feature_dim, (1, 2)), 4)
    summaries = [f"sample {i} about a cat" for i in range(8)]
    out = clipbert_reward(view, summaries)
    assert out.shape == (8,) and scorer.bert.cache.misses == 2  # two distinct documents encoded once


def test_clipbert_reward_error_mode(clipbert_reward) -> None:
    strict = ClipBertScoreReward(scorer=clipbert_reward.scorer, no_image="error")
    view = _view(clipbert_reward.scorer.clip.feature_dim)
    with pytest.raises(ValueError, match="no images"):
        strict(view, ["x", "y"])


def test_rewards_own_no_weights(clipbert_reward) -> None:
    for obj in (
        clipbert_reward,
        clipbert_reward.scorer,
        clipbert_reward.scorer.clip,
        clipbert_reward.scorer.bert,
    ):
        assert not isinstance(obj, torch.nn.Module)
    module = torch.nn.Module()
    module.reward = clipbert_reward  # a plain attribute: nothing registered
    assert list(module.parameters()) == [] and module.state_dict() == {}


@pytest.mark.parametrize("name", ["rouge1", "rouge2", "rougeL", "clipbert", "clipbert_tiny"])
def test_hydra_configs_compose(name) -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONF / "reward"), version_base=None):
        cfg = compose(config_name=name)
    cfg = OmegaConf.to_container(cfg)
    assert cfg["_target_"].startswith("mmsum.rewards.")
    if name.startswith("rouge"):
        from hydra.utils import instantiate

        assert instantiate(cfg).name == name
    if name == "clipbert_tiny":
        assert cfg["clip_model"] == "mmsum-tiny-rn" and cfg["bert_model"] == "minilm" and cfg["alpha"] == 0.25


def test_scorers_accept_preloaded(clipbert_reward) -> None:
    s = clipbert_reward.scorer
    again = ClipBertScore(ClipScorer(s.clip.clip), BertScorer(s.bert.encoder), alpha=0.5)
    assert again.alpha == 0.5
