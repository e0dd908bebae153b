"""A local `-m` sweep over two learning rates: two complete runs, even with DDP ranks per job."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tests.helpers import report, train_py
from tests.scale.common import TINY


@pytest.mark.slow
def test_local_multirun_over_two_learning_rates_with_ddp(demo_data_root, model_cache, tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY, f"paths.data_dir={demo_data_root}", f"hydra.sweep.dir={sweep}", "trainer=ddp_cpu",
            "validate_before_training=false", "model.lr=1e-3,3e-3"]  # fmt: skip
    done = train_py(args, model_cache)
    assert done.returncode == 0, done.stderr[-3000:]

    # Exactly the two jobs' dirs: a rank re-running `-m` would have started further sweeps.
    assert sorted(p.name for p in sweep.iterdir() if not p.name.startswith(".")) == [
        "0",
        "1",
        "multirun.yaml",
    ]
    lrs = []
    for job in ("0", "1"):
        run = report(sweep / job)
        assert run["global_step"] == 4 and "test/rouge2" in run["test"]
        assert run["output_dir"] == str(sweep / job)
        assert len((sweep / job / "predictions.jsonl").read_text().splitlines()) == 5
        lrs.append(OmegaConf.load(sweep / job / "config_resolved.yaml").model.lr)
    assert lrs == [1e-3, 3e-3]
