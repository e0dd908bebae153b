"""Reward schedules for SCST: which weighted rewards score the summaries at a given optimizer step.

`alternate` cycles through its rewards one per optimizer step (Wan & Bansal 2022: CLIPBERTScore x2
on even steps, ROUGE-2 x1 on odd steps). It is keyed on the optimizer step, not the micro-batch, so
every micro-batch of one gradient-accumulation window uses the same reward. `weighted_sum` adds all
of its rewards at every step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch

from mmsum.rewards.base import Reward


@dataclass
class WeightedReward:
    reward: Reward
    weight: float = 1.0

    @property
    def name(self) -> str:
        return self.reward.name


@dataclass
class ScheduledScores:
    """Total reward per row plus each active reward's raw (unweighted) scores, by name."""

    total: torch.Tensor  # [N]
    parts: dict[str, torch.Tensor]


class RewardSchedule:
    """Named rewards with weights, combined per optimizer step as `kind` says."""

    def __init__(
        self, rewards: Mapping[str, WeightedReward], kind: Literal["alternate", "weighted_sum"] = "alternate"
    ) -> None:
        if kind not in ("alternate", "weighted_sum"):
            raise ValueError(f"reward schedule kind must be 'alternate' or 'weighted_sum', got {kind!r}")
        if not rewards:
            raise ValueError("a reward schedule needs at least one reward")
        self.rewards = dict(rewards)
        self.kind = kind

    @property
    def names(self) -> list[str]:
        return list(self.rewards)

    def active(self, step: int) -> dict[str, WeightedReward]:
        """The rewards used at SCST optimizer step `step` (0-based)."""
        if self.kind == "weighted_sum":
            return dict(self.rewards)
        name = self.names[step % len(self.rewards)]
        return {name: self.rewards[name]}

    @torch.no_grad()
    def score(self, step: int, batch_view: Mapping[str, Any], summaries: list[str]) -> ScheduledScores:
        """Score all rows in one batched call per active reward; NaN rows stay NaN (caller masks)."""
        parts: dict[str, torch.Tensor] = {}
        total = torch.zeros(len(summaries), dtype=torch.float32)
        for name, item in self.active(step).items():
            values = item.reward(batch_view, summaries).detach().float().cpu().reshape(-1)
            if values.shape[0] != len(summaries):
                raise ValueError(
                    f"reward {name!r} returned {values.shape[0]} values for {len(summaries)} rows"
                )
            parts[name] = values
            total = total + item.weight * values
        return ScheduledScores(total, parts)


def build_schedule(kind: str, rewards: Mapping[str, Any]) -> RewardSchedule:
    """From config: `rewards` maps a name to `{reward: Reward | {_target_...}, weight: float}`."""
    built: dict[str, WeightedReward] = {}
    for name, spec in rewards.items():
        if spec is None:
            continue  # a reward switched off from the command line (`...rewards.rouge2=null`)
        reward = spec["reward"]
        if isinstance(reward, Mapping):
            from hydra.utils import instantiate

            reward = instantiate(reward, _convert_="object")
        built[name] = WeightedReward(reward, float(spec.get("weight", 1.0)))
    return RewardSchedule(built, kind)  # type: ignore[arg-type]
