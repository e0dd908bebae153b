"""Small generated fixtures and the subprocess runner shared by the tests."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mmsum.data.prepared import PreparedSplitWriter

REPO = Path(__file__).resolve().parents[1]

CITIES = ["Paris", "London", "Berlin", "Madrid", "Rome", "Vienna"]
PEOPLE = ["Anna Smith", "Ben Jones", "Clara Diaz", "David Lee"]
COLORS = ["red", "blue", "green", "yellow"]
SHAPES = ["circle", "square", "triangle"]


def write_synthetic_split(
    split_dir: Path,
    n: int,
    feature_dim: int = 64,
    seed: int = 0,
    max_images: int = 3,
    clip_model: str = "synthetic/none",
) -> Path:
    """A prepared split of templated examples whose summary is recoverable from the document."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    with PreparedSplitWriter(split_dir, feature_dim) as writer:
        for i in range(n):
            person, city = rng.choice(PEOPLE), rng.choice(CITIES)
            color, shape = rng.choice(COLORS), rng.choice(SHAPES)
            n_images = rng.randint(0, max_images)
            document = (
                f"{person} arrived in {city} on monday . the crowd saw a {color} {shape} near the station . "
                f"officials said the visit was planned for weeks ."
            )
            summary = f"{person} saw a {color} {shape} in {city} ."
            example = {
                "id": f"ex{i:04d}",
                "document": document,
                "summary": summary,
                "image_ids": [str(k) for k in range(n_images)],
                "captions": [f"a {color} {shape}"] * n_images,
                "guidance_labels": [1 if k == 0 else 0 for k in range(n_images)],
                "relevant_images": ["0"] if n_images and i % 2 == 0 else [],
                "source": "synthetic",
                "split": split_dir.name,
            }
            writer.add(example, nrng.standard_normal((n_images, feature_dim)).astype(np.float32))
        writer.finish({"raw": n, "kept": n, "dropped": {}, "clip_model": clip_model})
    return split_dir


def write_synthetic_dataset(root: Path, n_train: int = 48, n_eval: int = 12, **kwargs) -> Path:
    for offset, (name, n) in enumerate([("train", n_train), ("validation", n_eval), ("test", n_eval)]):
        write_synthetic_split(root / name, n, seed=offset, **kwargs)
    return root


# ---- running the CLIs as a user would -------------------------------------------------------------
def env(cache: Path) -> dict[str, str]:
    """Offline, the session's tiny-model cache, one thread per process (tests run two processes on
    two cores in the DDP and SLURM cases)."""
    return {
        **os.environ,
        "MMSUM_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
    }


def run_python(args: list[str], cache: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """`python ARGS` in the repo root (`env(cache)`, or this process's environment without a cache)."""
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env(cache) if cache else None,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def train_py(args: list[str], cache: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return run_python(["train.py", *args], cache, timeout)


def report(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "report.json").read_text())
