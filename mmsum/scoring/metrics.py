"""torchmetrics wrappers (sum/count states) so validation numbers are exact under DDP.

All scores are fractions in [0, 1] (not x100); multiply for tables if you like.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torchmetrics import Metric

from mmsum.scoring.rougescore import DEFAULT_KEYS, rouge


class RougeMetric(Metric):
    """Mean per-example ROUGE F-measure (rouge_score-exact, stemmed), one entry per key.

    `update(preds, refs)` takes lists of strings; `compute()` returns {key: mean F in [0, 1]}.
    Sums are float64 so that the mean over a large validation set equals the rouge_score mean.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(
        self, keys: Sequence[str] = ("rouge1", "rouge2", "rougeL"), use_stemmer: bool = True, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.keys = tuple(keys)
        self.use_stemmer = use_stemmer
        for k in self.keys:
            self.add_state(f"{k}_sum", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, preds: Sequence[str], refs: Sequence[str]) -> None:
        scores = rouge(list(preds), list(refs), self.keys, self.use_stemmer)
        for k in self.keys:
            state = getattr(self, f"{k}_sum")
            setattr(self, f"{k}_sum", state + scores[k].sum().to(state.device))
        # Not in place: states reset under trainer.validate() are inference tensors.
        self.count = self.count + len(preds)

    def compute(self) -> dict[str, torch.Tensor]:
        n = self.count.clamp(min=1).to(torch.float64)
        return {k: (getattr(self, f"{k}_sum") / n).float() for k in self.keys}


class MeanScoreMetric(Metric):
    """Mean of a per-example score function `fn(preds, refs, **extra) -> Tensor[B]`, NaNs skipped.

    Used for CLIPBERTScore / CLIP-S / BERT-S on validation: the scorer is held in a plain
    attribute (not a submodule), so its encoders never enter a checkpoint.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, fn: Callable[..., torch.Tensor], **kwargs) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "_fn", fn)  # plain attribute: never an nn.Module child
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, *args, **kwargs) -> None:
        values = self._fn(*args, **kwargs).detach().to(torch.float64).flatten()
        ok = ~torch.isnan(values)
        self.total += values[ok].sum().to(self.total.device)
        self.count += int(ok.sum())

    def compute(self) -> torch.Tensor:
        if int(self.count) == 0:
            return torch.tensor(float("nan"))
        return (self.total / self.count).float()


__all__ = ["RougeMetric", "MeanScoreMetric", "DEFAULT_KEYS"]
