"""Shared pieces of the scale-out tests: tiny demo settings and the subprocess environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# A few optimizer steps, a validation pass mid-way, an odd number of eval examples so that a
# padding DistributedSampler (2 ranks) would count one example twice and shift the means.
TINY = [
    "+experiment=demo",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.log_every_n_steps=1",
    "data.limit_train_examples=32",
    "data.limit_eval_examples=5",
    "callbacks.rich_progress_bar=null",
]


def env(cache: Path) -> dict[str, str]:
    # One thread per process: the DDP and SLURM tests run two processes on two cores.
    return {
        **os.environ,
        "MMSUM_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
    }


def train_py(args: list[str], cache: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    command = [sys.executable, "train.py", *args]
    return subprocess.run(command, cwd=REPO, env=env(cache), capture_output=True, text=True, timeout=timeout)


def report(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "report.json").read_text())
