"""Self-critical sequence training: baselines, the masked REINFORCE loss, and one SCST step.

L = α·L_RL + (1−α)·L_XE, L_RL = −Σ_t (r(yˢ) − b)·log p(yˢ_t)·m_t / Σ m_t (token mean over the
batch; m counts EOS and excludes the padding after it). Rows whose reward or baseline is not
finite are dropped from L_RL and counted, so a scorer's NaN never reaches the weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from mmsum.rewards.base import expand_batch
from mmsum.rewards.schedule import RewardSchedule
from mmsum.training.decoding import fused_sample_and_greedy, sequence_log_probs

Baseline = Literal["greedy", "loo", "beam"]
REWARD_VIEW_KEYS = ("doc_text", "ref_text", "image_features", "image_mask", "ids")


@dataclass
class ScstSettings:
    """`scst.*` in the Hydra config (conf/scst/default.yaml documents each field)."""

    num_samples: int = 1
    baseline: Baseline = "greedy"
    rl_weight: float = 0.998
    reduction: Literal["token", "sequence"] = "token"
    max_new_tokens: int = 32
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    empty_reward: float = 0.0
    beam_kwargs: dict[str, Any] = field(default_factory=dict)
    decode_in_eval_mode: bool = True

    def __post_init__(self) -> None:
        if self.baseline not in ("greedy", "loo", "beam"):
            raise ValueError(f"scst.baseline must be greedy, loo or beam, got {self.baseline!r}")
        if self.baseline == "loo" and self.num_samples < 2:
            raise ValueError(
                "scst.baseline=loo needs scst.num_samples >= 2 (the other samples are the baseline)"
            )
        if self.num_samples < 1:
            raise ValueError("scst.num_samples must be >= 1")
        if not 0.0 <= self.rl_weight <= 1.0:
            raise ValueError(f"scst.rl_weight must be in [0, 1], got {self.rl_weight}")
        if self.reduction not in ("token", "sequence"):
            raise ValueError(f"scst.reduction must be token or sequence, got {self.reduction!r}")


def compute_baseline(
    sample_rewards: torch.Tensor, kind: Baseline, baseline_rewards: torch.Tensor | None = None
) -> torch.Tensor:
    """Baseline per sample [B, K] from the samples' rewards [B, K] (and greedy/beam rewards [B]).

    loo: mean of the other K−1 finite sample rewards (NaN where there is none).
    """
    if kind in ("greedy", "beam"):
        if baseline_rewards is None:
            raise ValueError(f"baseline={kind!r} needs the {kind} summaries' rewards")
        return baseline_rewards.reshape(-1, 1).expand_as(sample_rewards)
    if kind == "loo":
        finite = torch.isfinite(sample_rewards)
        values = torch.where(finite, sample_rewards, torch.zeros_like(sample_rewards))
        total, count = values.sum(1, keepdim=True), finite.sum(1, keepdim=True)
        others_sum = total - values
        others_count = count - finite.long()
        return torch.where(
            others_count > 0, others_sum / others_count.clamp(min=1), torch.full_like(values, float("nan"))
        )
    raise ValueError(f"unknown baseline {kind!r}")


def rl_loss(
    token_log_probs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    valid: torch.Tensor | None = None,
    reduction: Literal["token", "sequence"] = "token",
) -> torch.Tensor:
    """−Σ (advantage · log p · m) / Σ m over valid rows; `token`: one mean over all tokens of the batch,
    `sequence`: the mean over rows of each row's token mean. Zero (with a graph) if nothing is valid."""
    mask = mask.to(token_log_probs.dtype)
    if valid is not None:
        mask = mask * valid.to(mask.dtype).unsqueeze(-1)
        # 0·NaN is NaN: zero the excluded rows' advantages before they touch the graph.
        advantages = torch.where(valid, advantages, torch.zeros_like(advantages))
    weighted = -(advantages.detach().unsqueeze(-1) * token_log_probs * mask)
    if reduction == "token":
        return weighted.sum() / mask.sum().clamp(min=1.0)
    per_row = weighted.sum(-1) / mask.sum(-1).clamp(min=1.0)
    rows = (mask.sum(-1) > 0).to(per_row.dtype)
    return (per_row * rows).sum() / rows.sum().clamp(min=1.0)


@dataclass
class ScstStepOutput:
    loss: torch.Tensor
    metrics: dict[str, float]
    completions: list[dict[str, Any]]


def _decode_texts(tokenizer, sequences: torch.Tensor) -> list[str]:
    return tokenizer.batch_decode(sequences, skip_special_tokens=True, clean_up_tokenization_spaces=True)


def scst_step(
    module,
    batch: dict[str, Any],
    schedule: RewardSchedule,
    schedule_step: int,
    settings: ScstSettings,
    generator: torch.Generator | None = None,
    timings: dict[str, float] | None = None,
) -> ScstStepOutput:
    """One SCST micro-batch on `module` (a ClipBartModule): decode, score, REINFORCE + XE loss."""
    import time

    def tick(name: str, start: float) -> float:
        now = time.perf_counter()
        if timings is not None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
                now = time.perf_counter()
            timings[name] = timings.get(name, 0.0) + now - start
        return now

    model = module.model
    inputs = module.model_inputs(batch)
    k = settings.num_samples
    t0 = time.perf_counter()
    was_training = model.training
    if settings.decode_in_eval_mode:
        model.eval()  # sample the policy itself (no dropout); greedy matches generate()
    try:
        decoded = fused_sample_and_greedy(
            model,
            **inputs,
            num_samples=k,
            include_greedy=settings.baseline == "greedy",
            max_new_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            top_k=settings.top_k,
            top_p=settings.top_p,
            generator=generator,
        )
        beam_tokens = None
        if settings.baseline == "beam":
            beam_tokens = model.generate(**inputs, **settings.beam_kwargs)
    finally:
        model.train(was_training)
    t0 = tick("decode", t0)

    sample_tokens = decoded.sequences[decoded.sample_rows()]
    sample_texts = _decode_texts(module.tokenizer, sample_tokens)
    n_examples = inputs["input_ids"].shape[0]
    if settings.baseline == "greedy":
        all_texts = _decode_texts(module.tokenizer, decoded.sequences)
        group = k + 1
    elif settings.baseline == "beam":
        base_texts = _decode_texts(module.tokenizer, beam_tokens)
        all_texts = []
        for i in range(n_examples):
            all_texts += sample_texts[i * k : (i + 1) * k] + [base_texts[i]]
        group = k + 1
    else:
        all_texts, group = sample_texts, k

    # One batched call per reward over samples and baselines together.
    view = expand_batch({key: batch[key] for key in REWARD_VIEW_KEYS if key in batch}, group)
    scores = schedule.score(schedule_step, view, all_texts)
    rewards = scores.total.clone()
    empty = torch.tensor([not t.strip() for t in all_texts])
    rewards[empty] = settings.empty_reward  # an immediate EOS gets a defined reward, whatever the scorer says
    grid = rewards.view(n_examples, group)
    sample_rewards = grid[:, :k]
    baseline_rewards = grid[:, k] if group == k + 1 else None
    baseline = compute_baseline(sample_rewards, settings.baseline, baseline_rewards)
    advantages = (sample_rewards - baseline).reshape(-1)
    valid = torch.isfinite(advantages)
    t0 = tick("rewards", t0)

    # XE (+ guidance) and the sampled sequences' log-probs, both with gradients, from one encoder
    # pass (so its forward and backward run once).
    encoded = model.encode(**inputs)
    xe = module.xe_loss(batch, encoded=encoded)
    encoder_outputs, joint_mask, _ = encoded
    states = encoder_outputs.last_hidden_state.repeat_interleave(k, dim=0)
    enc_mask = joint_mask.repeat_interleave(k, dim=0)
    token_log_probs = sequence_log_probs(model, states, enc_mask, sample_tokens)
    sample_mask = decoded.mask[decoded.sample_rows()]
    device = token_log_probs.device
    loss_rl = rl_loss(
        token_log_probs, sample_mask, advantages.to(device), valid.to(device), settings.reduction
    )
    alpha = settings.rl_weight
    loss = alpha * loss_rl + (1.0 - alpha) * xe["loss"]
    tick("logprob_forward", t0)

    finite_samples = sample_rewards[torch.isfinite(sample_rewards)]
    metrics: dict[str, float] = {
        "train/loss": float(loss.detach()),
        "train/rl_loss": float(loss_rl.detach()),
        "train/xe_loss": float(xe["loss"].detach()),
        "train/lm_loss": float(xe["lm_loss"].detach()),
        "train/guidance_loss": float(xe["guidance_loss"].detach()),
        "train/reward": _mean(finite_samples),
        "train/reward_std": _std(finite_samples),
        "train/advantage_mean": _mean(advantages[valid]),
        "train/frac_zero_advantage": float((advantages[valid] == 0).float().mean()) if valid.any() else 0.0,
        "train/sample_len": float(sample_mask.sum(-1).float().mean()),
        "train/nonfinite_rewards": float((~valid).sum()),
        "train/empty_samples": float(empty.view(n_examples, group)[:, :k].sum()),
    }
    if baseline_rewards is not None:
        metrics["train/baseline_reward"] = _mean(baseline_rewards[torch.isfinite(baseline_rewards)])
    else:
        metrics["train/baseline_reward"] = _mean(baseline[torch.isfinite(baseline)])
    for name, values in scores.parts.items():
        finite = values[torch.isfinite(values)]
        metrics[f"train/rewards/{name}/mean"] = _mean(finite)
        metrics[f"train/rewards/{name}/std"] = _std(finite)

    completions = []
    for i in range(n_examples):
        row = {
            "id": batch["ids"][i] if "ids" in batch else str(i),
            "document": batch["doc_text"][i][:300],
            "reference": batch["ref_text"][i],
            "sample": all_texts[i * group],
            "baseline": all_texts[i * group + k] if group == k + 1 else "",
            "reward_sample": float(grid[i, 0]),
            "reward_baseline": float(baseline.reshape(n_examples, k)[i, 0]),
        }
        for name, values in scores.parts.items():
            row[f"{name}_sample"] = float(values[i * group])
            if group == k + 1:
                row[f"{name}_baseline"] = float(values[i * group + k])
        completions.append(row)
    return ScstStepOutput(loss, metrics, completions)


def _mean(values: torch.Tensor) -> float:
    return float(values.float().mean()) if values.numel() else float("nan")


def _std(values: torch.Tensor) -> float:
    return float(values.float().std(unbiased=False)) if values.numel() else float("nan")


def as_settings(config: Any, max_new_tokens: int | None = None) -> ScstSettings:
    """ScstSettings from a DictConfig / dict (unknown keys ignored: they belong to the callback)."""
    names = set(ScstSettings.__dataclass_fields__)
    values = {k: v for k, v in dict(config).items() if k in names}
    if "beam_kwargs" in values:
        values["beam_kwargs"] = dict(values["beam_kwargs"] or {})
    if values.get("max_new_tokens") is None and max_new_tokens is not None:
        values["max_new_tokens"] = max_new_tokens
    return ScstSettings(**values)
