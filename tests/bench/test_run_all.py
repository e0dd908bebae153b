"""`scripts/bench/run_all.py --quick`: the report's shape and parity (never the speed: the machine is shared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
KEYS = {"name", "ours", "baseline", "unit", "ratio", "target", "met"}
PARITY = {
    "1_clipbertscore_reward",
    "2_rouge2_reward",
    "3_fused_sample_greedy_decode",
    "5_entity_filter",
    "6_clip_image_features",
    "6b_clip_image_features_jpeg_draft",
}


@pytest.mark.slow
def test_quick_run_writes_a_complete_report_with_parity(tmp_path, model_cache) -> None:
    env = dict(os.environ, MMSUM_CACHE=str(model_cache), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "scripts/bench/run_all.py", "--quick", "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    rows = {r["name"]: r for r in report["benchmarks"]}
    assert set(rows) >= PARITY | {"4_scst_step", "7_demo_end_to_end"}
    for row in rows.values():
        assert KEYS <= set(row), row["name"]
        assert "status" not in row or row["status"].startswith("pending"), row
        if row["ours"] is not None and row["baseline"] is not None:
            assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=0.02)
            assert len(row["ours_all"]) == len(row["baseline_all"]) == row["reps"] >= 3
            assert row["load_average"]
    for name in PARITY:
        if rows[name]["ours"] is not None:  # 3 may be pending while its code is missing
            assert rows[name]["equal_outputs"] is True, rows[name]
    assert rows["7_demo_end_to_end"]["status"] == "pending: measured by make demo"
    assert rows["1_clipbertscore_reward"]["max_abs_diff"] <= 1e-5
    assert "ours_peak_rss_mib" in rows["1_clipbertscore_reward"]
    scst = rows["4_scst_step"]
    if scst["ours"] is not None:
        assert {"decode", "rewards", "backward"} <= set(scst["breakdown_s_per_step"]["ours"])
        assert scst["scst_over_xe"] > 0 and "ours_peak_rss_mib" in scst
    table = (tmp_path / "latest.md").read_text()
    assert all(name in table for name in rows)


def test_alternate_interleaves_and_reports_medians() -> None:
    from scripts.bench.common import alternate, speed_result

    calls: list[str] = []
    t_ours, t_base = alternate(lambda: calls.append("o"), lambda: calls.append("b"), reps=4, warmup=1)
    assert calls == ["o", "b", "o", "b", "b", "o", "o", "b", "b", "o"]  # warm-up, then ABBA
    result = speed_result("x", [1.0, 2.0, 3.0], [4.0, 6.0, 8.0], 2.0, ">= 2x", equal_outputs=True)
    assert (result.ours, result.baseline, result.ratio, result.met) == (2.0, 6.0, 3.0, True)
    assert speed_result("x", [1.0], [9.0], 2.0, "", equal_outputs=False).met is False


def test_peak_rss_sees_an_allocation() -> None:
    import numpy as np

    from scripts.bench.common import peak_rss

    out: dict[str, float] = {}
    with peak_rss(out, "before"):
        pass
    with peak_rss(out, "during"):
        block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
        del block
    assert out["during"] >= out["before"] + 32
