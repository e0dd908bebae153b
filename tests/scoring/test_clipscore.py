"""CLIP-S / RefCLIP-S against a direct implementation of the formulas on the tiny CLIP."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mmsum.scoring import ClipFeatureMismatch, ClipScorer, split_sentences
from mmsum.scoring.clipscore import ClipSOptions
from mmsum.scoring.encoders import load_clip

SUMMARIES = [
    "A dog runs on the beach. The sun is setting!",
    "An astronaut floats in space.",
    "",
    "Coffee in a white cup.\nIt is hot.",
]


@pytest.fixture(scope="module")
def scorer(tiny_clip_path) -> ClipScorer:
    return ClipScorer("mmsum-tiny-rn", str(tiny_clip_path), device="cpu")


@pytest.fixture(scope="module")
def images(scorer):
    torch.manual_seed(0)
    feats = torch.randn(4, 3, scorer.feature_dim)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]], dtype=torch.bool)
    return feats, mask


def _direct(scorer, feats, mask, summaries, split=True, prefix="", w=1.0, clamp=False):
    model, tok = scorer.clip.model, scorer.clip.tokenizer
    out = []
    for b, s in enumerate(summaries):
        sents = split_sentences(s) if split else [s.strip()]
        with torch.no_grad():
            t = F.normalize(model.encode_text(tok([prefix + x for x in sents])), dim=-1)
        vals = []
        for m in range(feats.shape[1]):
            if not mask[b, m]:
                continue
            img = F.normalize(feats[b, m], dim=-1)
            for j in range(len(sents)):
                c = float(img @ t[j])
                vals.append(w * max(c, 0.0) if clamp else w * c)
        out.append(sum(vals) / len(vals) if vals else math.nan)
    return torch.tensor(out)


@pytest.mark.parametrize(
    "opts",
    [ClipSOptions.paper(), ClipSOptions.released_script(), ClipSOptions.clipscore()],
    ids=["paper", "script", "clipscore"],
)
def test_clip_s_matches_formula(scorer, images, opts) -> None:
    feats, mask = images
    ours = scorer.clip_s(feats, mask, SUMMARIES, **vars(opts))
    expected = _direct(scorer, feats, mask, SUMMARIES, opts.split_sentences, opts.prefix, opts.w, opts.clamp)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0, equal_nan=True)
    assert math.isnan(ours[3])  # no real image: not applicable


def test_padding_does_not_change_clip_s(scorer, images) -> None:
    feats, mask = images
    base = scorer.clip_s(feats, mask, SUMMARIES)
    padded = torch.cat([feats, torch.zeros(4, 5, feats.shape[-1])], dim=1)
    pmask = torch.cat([mask, torch.zeros(4, 5, dtype=torch.bool)], dim=1)
    torch.testing.assert_close(scorer.clip_s(padded, pmask, SUMMARIES), base, equal_nan=True)
    garbage = padded.clone()
    garbage[:, 3:] = torch.randn_like(garbage[:, 3:]) * 100
    torch.testing.assert_close(scorer.clip_s(garbage, pmask, SUMMARIES), base, equal_nan=True)


def test_long_text_keeps_end_of_text_token(scorer) -> None:
    tokens = scorer.clip.tokenizer(["word " * 200])
    assert tokens.shape[1] == 77 and int(tokens[0, -1]) == int(tokens.max())  # EOT last (argmax pooling)
    emb = scorer.encode_texts(["word " * 200, "word " * 300])
    torch.testing.assert_close(emb[0], emb[1])  # both truncated to the same 77 tokens


def test_ref_clip_s(scorer, images) -> None:
    feats, mask = images
    refs = ["A dog on a beach at sunset.", ["An astronaut.", "Space walk."], "Nothing.", "A cup of coffee."]
    opts = ClipSOptions.clipscore()
    ours = scorer.ref_clip_s(feats, mask, SUMMARIES, refs, **vars(opts))
    clip = _direct(scorer, feats, mask, SUMMARIES, False, opts.prefix, opts.w, opts.clamp)
    model, tok = scorer.clip.model, scorer.clip.tokenizer
    with torch.no_grad():
        for b, s in enumerate(SUMMARIES):
            group = [refs[b]] if isinstance(refs[b], str) else refs[b]
            c = F.normalize(model.encode_text(tok([opts.prefix + s])), dim=-1)[0]
            r = F.normalize(model.encode_text(tok([opts.prefix + x for x in group])), dim=-1)
            text = max(float((r @ c).max()), 0.0)
            img = max(float(clip[b]), 0.0) if not math.isnan(clip[b]) else math.nan
            expected = 2 * img * text / (img + text) if (img + text) else 0.0
            if math.isnan(img):
                assert math.isnan(ours[b])
            else:
                assert abs(float(ours[b]) - expected) < 1e-5


def test_check_features(scorer) -> None:
    scorer.check_features({"clip_model": scorer.name, "feature_dim": scorer.feature_dim})
    with pytest.raises(ClipFeatureMismatch):
        scorer.check_features({"clip_model": "RN50x64/openai", "feature_dim": scorer.feature_dim})
    with pytest.raises(ClipFeatureMismatch):
        scorer.check_features({"clip_model": scorer.name, "feature_dim": 1024})
    with pytest.raises(ClipFeatureMismatch):
        scorer.clip_s(torch.zeros(1, 1, 1024), None, ["x"])


def test_loaded_clip_reuse_and_split(tiny_clip_path) -> None:
    clip = load_clip("mmsum-tiny-rn", str(tiny_clip_path))
    s = ClipScorer(clip)
    assert s.name == clip.name and not isinstance(s, torch.nn.Module)
    assert split_sentences("One. Two!  Three?\nFour") == ["One.", "Two!", "Three?", "Four"]
    assert split_sentences("   ") == [""]
