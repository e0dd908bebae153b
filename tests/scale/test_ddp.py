"""`trainer=ddp_cpu`: two gloo processes give the single-process metrics, in one run dir."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from tests.helpers import report, train_py
from tests.scale.common import TINY

ROUGE = ("val/rouge1", "val/rouge2", "val/rougeL")


@pytest.mark.slow
def test_ddp_cpu_matches_single_process_with_one_run_dir(demo_data_root, model_cache, tmp_path):
    base = [*TINY, f"paths.data_dir={demo_data_root}", f"paths.log_dir={tmp_path / 'logs'}"]
    single_dir, ddp_dir = tmp_path / "single", tmp_path / "ddp"
    single = train_py([*base, f"hydra.run.dir={single_dir}"], model_cache)
    assert single.returncode == 0, single.stderr[-3000:]
    # The run dir comes from hydra's default timestamped pattern: ranks must not make their own.
    ddp = train_py([*base, "trainer=ddp_cpu"], model_cache)
    assert ddp.returncode == 0, ddp.stderr[-3000:]

    run_dirs = [p for p in (tmp_path / "logs").rglob("runs/*") if p.is_dir()]
    assert len(run_dirs) == 1, run_dirs
    ddp_dir = run_dirs[0]
    one, two = report(single_dir), report(ddp_dir)

    # Same seed, same initial weights: validation before training sees the same model, so the
    # torchmetrics ROUGE (sum/count states synced over ranks, no padded duplicates) must agree.
    for key in ROUGE:
        assert two["initial_val"][key] == pytest.approx(one["initial_val"][key], abs=1e-6), key
    assert two["global_step"] == 4 and set(ROUGE) <= set(two["final_val"])
    assert OmegaConf.load(ddp_dir / "config_resolved.yaml").trainer.devices == 2

    # Rank 0 alone writes: one hydra dir, one report, one prediction per test example.
    assert sorted(p.name for p in ddp_dir.iterdir() if p.name.startswith(".")) == [".hydra"]
    predictions = (ddp_dir / "predictions.jsonl").read_text().splitlines()
    ids = [json.loads(line)["id"] for line in predictions]
    assert len(ids) == len(set(ids)) == 5
    for name in ("report.json", "metrics.csv", "training_curves.png", "checkpoints/last.ckpt"):
        assert (ddp_dir / name).is_file(), name
