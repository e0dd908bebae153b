"""`scripts/testbed.py --quick`: CLIP, world, XE and both SCST runs, scoring, table and plot."""

from __future__ import annotations

import math

import pytest

from scripts.testbed import EXPERIMENTS, main, pearson


def test_pearson():
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))


@pytest.mark.slow
def test_quick_testbed_runs_end_to_end(tmp_path):
    result = main(["--out", str(tmp_path), "--quick", "--seeds", "0", "--jobs", "1"])
    assert set(result["per_run"]) == {f"{e}/seed0" for e in EXPERIMENTS}
    for agg in result["per_run"].values():
        assert {"rouge2", "clipbertscore", "image_fact_precision", "image_hallucination_rate"} <= set(agg)
        assert agg["n"] > 0
    assert result["references"]["image_hallucination_rate"] == 0.0
    assert "summaries" in result["correlations"]["n"]
    assert set(result["correlations"]["clipbertscore"]) == {
        "image_fact_precision", "document_fact_precision", "image_hallucinated",
    }  # fmt: skip
    for name in ("table.md", "table.csv", "plot.png", "results.json", "summaries.jsonl"):
        assert (tmp_path / name).is_file(), name
    assert "SCST ROUGE-2 only" in (tmp_path / "table.md").read_text()
