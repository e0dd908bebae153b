"""A Hydra sweep submitted through the submitit launcher to a real (local) SLURM, with a requeue.

Needs Debian's slurm-wlm and munge (`.ci/run` installs them); the cluster is started through
scripts/slurm_local.sh when it is not up yet. Skipped only when SLURM is not installed at all."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers import REPO, env, report
from tests.scale.common import TINY

SLURM_LOCAL = REPO / "scripts" / "slurm_local.sh"
MAX_STEPS = 40


@pytest.fixture(scope="module")
def local_slurm() -> None:
    missing = [b for b in ("sbatch", "scontrol", "slurmctld", "slurmd", "munged") if shutil.which(b) is None]
    if missing:
        pytest.skip(
            f"SLURM is not installed ({', '.join(missing)} missing): apt-get install -y slurm-wlm munge"
        )
    if subprocess.run([SLURM_LOCAL, "status"], capture_output=True).returncode != 0:
        started = subprocess.run([SLURM_LOCAL, "start"], capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, f"installed SLURM did not start:\n{started.stdout}{started.stderr}"


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            pytest.fail(f"sweep ended (rc={proc.returncode}) while waiting for {what}:\n{_tail(proc)}")
        time.sleep(1.0)
    pytest.fail(f"timed out waiting for {what}")


def _tail(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=30) if proc.poll() is None else proc.communicate()
    return (out or "")[-4000:]


def _job_id(run_dir: Path) -> str:
    return str(OmegaConf.load(run_dir / ".hydra" / "hydra.yaml").hydra.job.id)


def _checkpoint_step(path: Path) -> int:
    try:
        return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])
    except Exception:  # being written right now
        return 0


def _release_if_held(job_id: str) -> None:
    """A requeued job waits out a begin-time delay; on a test cluster we let it start now."""
    subprocess.run(["scontrol", "update", f"jobid={job_id}", "StartTime=now"], capture_output=True)


@pytest.mark.slow
def test_slurm_sweep_collects_both_jobs_and_requeue_resumes(
    local_slurm, demo_data_root, model_cache, tmp_path
):
    sweep = tmp_path / "sweep"
    tiny = [a for a in TINY if not a.startswith(("trainer.max_steps", "trainer.val_check_interval"))]
    command = [sys.executable, "train.py", "-m", "hydra/launcher=slurm", *tiny,
               f"paths.data_dir={demo_data_root}", f"hydra.sweep.dir={sweep}",
               f"trainer.max_steps={MAX_STEPS}", "trainer.val_check_interval=4", "data.limit_eval_examples=2",
               "validate_before_training=false", "ckpt_path=auto",
               "hydra.launcher.cpus_per_task=1", "hydra.launcher.timeout_min=15", "model.lr=1e-3,2e-3"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=REPO, env=env(model_cache), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        last = sweep / "0" / "checkpoints" / "last.ckpt"
        _wait_for(lambda: last.is_file() and _checkpoint_step(last) > 0, 300, "job 0's first last.ckpt", proc)
        job_id = _job_id(sweep / "0")
        requeued = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True)
        assert requeued.returncode == 0, requeued.stderr
        deadline = time.monotonic() + 400
        while proc.poll() is None and time.monotonic() < deadline:
            _release_if_held(job_id)
            time.sleep(2.0)
        output = _tail(proc)
        assert proc.returncode == 0, output
    finally:
        if proc.poll() is None:
            proc.kill()
        for job_dir in (sweep / ".submitit").glob("*_*"):
            subprocess.run(["scancel", job_dir.name], capture_output=True)

    # Both jobs' results came back through the launcher (it returns only when both are collected).
    for job in ("0", "1"):
        run = report(sweep / job)
        assert run["global_step"] == MAX_STEPS, (job, run)
        assert run["output_dir"] == str(sweep / job)
    # The requeued job picked up its own checkpoint: the global step continued instead of restarting.
    resumed = report(sweep / "0")
    assert resumed["resumed_from"] and resumed["first_step_this_run"] > 0, resumed
    assert report(sweep / "1")["first_step_this_run"] == 0
