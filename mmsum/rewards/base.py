"""The Reward protocol and the batch view rewards read.

A reward maps (batch view, generated summaries) to one float per summary. It is computed under
no_grad, owns no trainable weights and returns NaN where it does not apply (e.g. CLIP-S for an
example without images), so SCST can mask those rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypedDict, runtime_checkable

import torch


class RewardBatch(TypedDict, total=False):
    """What a reward may read from a training batch (a plain dict with these keys works)."""

    doc_text: list[str]
    ref_text: list[str]
    image_features: torch.Tensor  # [B, M, D] raw CLIP image embeddings
    image_mask: torch.Tensor  # [B, M] bool, True = real image
    ids: list[str]


@runtime_checkable
class Reward(Protocol):
    name: str

    def __call__(self, batch_view: Mapping[str, Any], summaries: list[str]) -> torch.Tensor: ...


def expand_batch(batch_view: Mapping[str, Any], repeats: int) -> dict[str, Any]:
    """Repeat every example `repeats` times, consecutively (row i -> example i // repeats).

    For SCST with K samples + 1 baseline per example: order the summaries as
    [ex0_s1..ex0_sK, ex0_base, ex1_s1, ...] and call the reward with expand_batch(view, K + 1).
    Repeated documents are encoded once (rewards de-duplicate and cache them).
    """
    out: dict[str, Any] = {}
    for key, value in batch_view.items():
        if isinstance(value, torch.Tensor):
            out[key] = value.repeat_interleave(repeats, dim=0)
        elif isinstance(value, (list, tuple)):
            out[key] = [v for v in value for _ in range(repeats)]
        else:
            out[key] = value
    return out


def check_rows(batch_view: Mapping[str, Any], summaries: Sequence[str], key: str = "doc_text") -> int:
    n = len(batch_view[key])
    if n != len(summaries):
        raise ValueError(
            f"batch view has {n} rows but {len(summaries)} summaries; for K samples per example "
            "pass mmsum.rewards.expand_batch(batch_view, K + 1)"
        )
    return n
