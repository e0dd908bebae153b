"""Rewards for SCST: batched, no grad, NaN = not applicable, no trainable weights."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mmsum.rewards.base import Reward, RewardBatch, check_rows, expand_batch
from mmsum.rewards.rewards import ClipBertScoreReward, RougeReward

REWARDS: dict[str, Callable[..., Reward]] = {
    "clipbertscore": ClipBertScoreReward,
    "clipbert": ClipBertScoreReward,
    "rouge": RougeReward,
    "rouge1": lambda **kw: RougeReward("rouge1", **kw),
    "rouge2": lambda **kw: RougeReward("rouge2", **kw),
    "rougeL": lambda **kw: RougeReward("rougeL", **kw),
    "rougeLsum": lambda **kw: RougeReward("rougeLsum", **kw),
}


def register_reward(name: str) -> Callable[[Callable[..., Reward]], Callable[..., Reward]]:
    """Decorator: make a reward factory available to `build_reward(name, ...)`."""

    def wrap(factory: Callable[..., Reward]) -> Callable[..., Reward]:
        REWARDS[name] = factory
        return factory

    return wrap


def build_reward(name: str, **kwargs: Any) -> Reward:
    try:
        factory = REWARDS[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; known: {sorted(REWARDS)}") from None
    return factory(**kwargs)


__all__ = [
    "REWARDS",
    "ClipBertScoreReward",
    "Reward",
    "RewardBatch",
    "RougeReward",
    "build_reward",
    "check_rows",
    "expand_batch",
    "register_reward",
]
