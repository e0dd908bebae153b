"""Correlations with bootstrap confidence intervals, the Williams test, and ranking accuracy."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

CORRELATIONS = ("pearson", "spearman", "kendall")


def correlation(x: Sequence[float], y: Sequence[float], kind: str = "pearson") -> float:
    """Pearson / Spearman / Kendall (tau-b) over the pairs where both values are finite.

    NaN when fewer than 3 finite pairs remain or either side is constant (undefined, not 0).
    """
    from scipy import stats

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    if kind == "pearson":
        return float(stats.pearsonr(x, y)[0])
    if kind == "spearman":
        return float(stats.spearmanr(x, y)[0])
    if kind == "kendall":
        return float(stats.kendalltau(x, y)[0])
    raise ValueError(f"unknown correlation {kind!r}; expected one of {CORRELATIONS}")


def bootstrap_ci(
    x: Sequence[float],
    y: Sequence[float],
    kind: str = "pearson",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of `correlation(x, y, kind)`, resampling pairs with replacement.

    Resamples where the correlation is undefined (constant side) are skipped; (nan, nan) when
    n_boot is 0 or nothing is defined.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(int(n_boot)):
        idx = rng.integers(0, len(x), len(x))
        v = correlation(x[idx], y[idx], kind)
        if math.isfinite(v):
            vals.append(v)
    if not vals:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2
    return float(np.quantile(vals, alpha)), float(np.quantile(vals, 1 - alpha))


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams (1959) test that r12 > r13 when both share variable 1 (the human scores).

    r12 = corr(human, metric A), r13 = corr(human, metric B), r23 = corr(A, B). Returns
    (t, one-sided p) with n - 3 degrees of freedom, as in Graham & Baldwin (2014), the form used
    for metric meta-evaluation since WMT.
    """
    from scipy import stats

    if n <= 3:
        raise ValueError("the Williams test needs n > 3")
    K = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    denom = 2 * K * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3
    if denom <= 0:
        return float("nan"), float("nan")
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / math.sqrt(denom)
    return float(t), float(stats.t.sf(t, n - 3))


def ranking_accuracy(scores: Sequence[Sequence[float]], gold: Sequence[int]) -> float:
    """Fraction of groups whose gold candidate scores strictly highest; a tie for the top
    between the gold and k others counts 1/(k+1) (chance, not a free win). NaN scores lose."""
    if len(scores) != len(gold):
        raise ValueError(f"{len(scores)} groups but {len(gold)} gold indices")
    if not scores:
        return float("nan")
    total = 0.0
    for s, g in zip(scores, gold):
        s = np.nan_to_num(np.asarray(s, dtype=np.float64), nan=-np.inf)
        best = s.max()
        if s[g] == best:
            total += 1.0 / int(np.sum(s == best))
    return total / len(scores)


def majority(values: Sequence[float]) -> float:
    """The most common value; a tie between values falls back to their mean (e.g. 2 workers
    who disagree -> 0.5)."""
    from collections import Counter

    counts = Counter(values).most_common()
    if not counts:
        return float("nan")
    top = [v for v, c in counts if c == counts[0][1]]
    return float(top[0]) if len(top) == 1 else float(np.mean(top))
