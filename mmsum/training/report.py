"""Run outputs a person reads: report.json and a PNG of train loss / val metrics over steps."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any


def _to_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def read_metrics_csv(path: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Lightning's metrics.csv as {column: [(step, value), ...]} (empty cells skipped)."""
    series: dict[str, list[tuple[int, float]]] = {}
    path = Path(path)
    if not path.is_file():
        return series
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step = _to_float(row.get("step"))
            if step is None:
                continue
            for key, value in row.items():
                number = _to_float(value)
                if key not in ("step", "epoch") and number is not None:
                    series.setdefault(key, []).append((int(step), number))
    return series


def plot_training_curves(
    metrics_csv: str | Path, out_png: str | Path, val_keys: tuple[str, ...] = ()
) -> Path | None:
    """Train loss (left) and validation metrics (right) over optimizer steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = read_metrics_csv(metrics_csv)
    if not series:
        return None
    val_keys = val_keys or tuple(k for k in sorted(series) if k.startswith("val/rouge"))
    # One curve per named reward (each is only computed on its own schedule steps); else the total.
    reward_keys = tuple(k for k in sorted(series) if k.startswith("train/rewards/") and k.endswith("/mean"))
    reward_keys = reward_keys or tuple(k for k in ("train/reward",) if k in series)
    panels = 2 + bool(reward_keys)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.6))
    for key in ("train/loss", "train/lm_loss"):
        if key in series:
            steps, values = zip(*series[key])
            axes[0].plot(steps, values, label=key)
    axes[0].set(xlabel="optimizer step", ylabel="loss", title="training loss")
    for key in val_keys:
        if key in series:
            steps, values = zip(*series[key])
            axes[1].plot(steps, values, marker="o", label=key)
    axes[1].set(xlabel="optimizer step", ylabel="F-measure", title="validation ROUGE")
    if reward_keys:
        for key in reward_keys:
            steps, values = zip(*series[key])
            axes[2].plot(steps, values, label=key)
        axes[2].set(xlabel="optimizer step", ylabel="reward", title="SCST rewards")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png


def write_report(path: str | Path, report: dict[str, Any]) -> Path:
    path = Path(path)
    path.write_text(json.dumps(report, indent=2, sort_keys=True, default=_jsonable) + "\n")
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
