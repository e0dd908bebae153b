"""The Hydra front door: `python -m data_prep dataset=demo ...` and `python -m data_prep report ...`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "data_prep", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_cli_demo_and_report(tmp_path, tiny_clip_path, model_cache):
    env = dict(os.environ, MMSUM_CACHE=str(model_cache), HF_HUB_OFFLINE="1")
    out = tmp_path / "out"
    r = run(["dataset=demo", f"raw_dir={tmp_path / 'raw'}", f"out_dir={out}", "clip=tiny", "demo.sizes=[16,4,4]",
             "guidance.k=1", "progress=false", "splits=[train,test]"], env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "train" / "manifest.json").read_text())
    assert m["raw"] == 16 and m["guidance"] == {"method": "rouge", "k": 1, "min_score": 0.0}
    assert m["clip_model"] == "mmsum-tiny-rn/open_clip_model.pt"
    assert not (out / "validation").exists()
    r = run(["report", f"out_dir={out}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Counts" in r.stdout and "Entity filter" in r.stdout and "rouge top-1" in r.stdout
