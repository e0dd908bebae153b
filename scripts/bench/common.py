"""Shared benchmark harness: alternate ours/baseline, medians, ratios, peak RSS, load average.

The machine is shared with other jobs, so absolute times drift. Every benchmark therefore runs
ours and its baseline *alternately* (ABBA order, so a slow phase of the machine hits both sides
equally) on identical inputs after a warm-up, and reports medians and their ratio.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def offline_env() -> None:
    """No hub access here: fail fast instead of retrying."""
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        os.environ.setdefault(key, value)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@dataclass
class Result:
    """One row of bench_results/latest.json."""

    name: str
    ours: float | None
    baseline: float | None
    unit: str
    ratio: float | None  # speed-up: baseline time / our time (> 1 means we are faster)
    target: str
    met: bool | None
    equal_outputs: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(d.pop("extra"))
        return d


def pending(name: str, target: str, reason: str, unit: str = "s") -> Result:
    return Result(name, None, None, unit, None, target, None, extra={"status": f"pending: {reason}"})


def alternate(
    ours: Callable[[], Any],
    baseline: Callable[[], Any],
    reps: int,
    warmup: int = 1,
    before_each: Callable[[], None] | None = None,
    memory: dict[str, float] | None = None,
) -> tuple[list[float], list[float]]:
    """Seconds per call of each side: `warmup` untimed calls each, then `reps` timed calls each,
    interleaved ABBA (ours, base, base, ours, ...) so drifting load hits both sides alike.

    With `memory`, the peak RSS (MiB) over each side's timed calls is written into it
    (`ours_peak_rss_mib`, `baseline_peak_rss_mib`); the sampler thread runs for both sides alike.
    """
    for _ in range(warmup):
        ours()
        baseline()
    t_ours: list[float] = []
    t_base: list[float] = []
    peaks: dict[str, float] = {}
    for i in range(reps):
        pair = ((ours, t_ours, "ours"), (baseline, t_base, "baseline"))
        for fn, sink, side in pair if i % 2 == 0 else pair[::-1]:
            if before_each is not None:
                before_each()
            sample: dict[str, float] = {}
            with peak_rss(sample, "peak") if memory is not None else nullcontext():
                start = time.perf_counter()
                fn()
                sink.append(time.perf_counter() - start)
            if sample:
                peaks[side] = max(peaks.get(side, 0.0), sample["peak"])
    if memory is not None:
        memory.update({f"{side}_peak_rss_mib": v for side, v in peaks.items()})
    return t_ours, t_base


def speed_result(
    name: str,
    t_ours: list[float],
    t_base: list[float],
    target_ratio: float,
    target: str,
    unit: str = "s/call",
    per: float = 1.0,
    equal_outputs: bool | None = None,
    **extra: Any,
) -> Result:
    """Medians (divided by `per`, e.g. steps per call) and the speed-up; met = ratio >= target
    and outputs equal (a fast wrong answer does not meet a target)."""
    m_ours = statistics.median(t_ours) / per
    m_base = statistics.median(t_base) / per
    ratio = m_base / m_ours
    met = ratio >= target_ratio and equal_outputs is not False
    extra = {
        "reps": len(t_ours),
        "ours_all": [round(t / per, 5) for t in t_ours],
        "baseline_all": [round(t / per, 5) for t in t_base],
        "load_average": load_average(),
        **extra,
    }
    return Result(
        name, round(m_ours, 5), round(m_base, 5), unit, round(ratio, 2), target, met, equal_outputs, extra
    )


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@contextmanager
def peak_rss(sink: dict[str, float], key: str, interval: float = 0.005):
    """Peak resident memory (MiB) of this process while the block runs, sampled by a thread.

    ru_maxrss is a lifetime peak, useless for comparing two phases of one process; sampling
    /proc/self/statm can miss a spike shorter than `interval`, which is fine for MB-scale peaks.
    """
    peak = [_rss_bytes()]
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            stop.wait(interval)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        peak[0] = max(peak[0], _rss_bytes())
        sink[key] = round(peak[0] / 2**20, 1)
