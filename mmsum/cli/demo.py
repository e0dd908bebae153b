"""`make demo`: generate the demo world, prepare it, train, evaluate, and say where the results are.

Each stage is the command a user would type, run as a subprocess, so the demo exercises exactly
the user's path:
  python -m data_prep dataset=demo raw_dir=data/demo/raw out_dir=data/demo/prepared clip=tiny
  python train.py +experiment=demo
  python -m mmsum.cli.evaluate ckpt_path=<best checkpoint> data=demo
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], env: dict[str, str]) -> None:
    print(f"\n$ {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True, cwd=REPO_ROOT, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", default="data", help="root of data/demo/{raw,prepared} (default: data)")
    parser.add_argument("--out-dir", default="outputs/demo", help="where the train and eval run dirs go")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for train.py")
    args = parser.parse_args(argv)

    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    data_dir = Path(args.data_dir).resolve()
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    train_dir = Path(args.out_dir).resolve() / f"{stamp}_train"
    eval_dir = Path(args.out_dir).resolve() / f"{stamp}_eval"
    python = sys.executable
    started = time.time()

    _run(
        [python, "-m", "data_prep", "dataset=demo", f"raw_dir={data_dir}/demo/raw",
         f"out_dir={data_dir}/demo/prepared", "clip=tiny"],
        env,
    )  # fmt: skip
    _run([python, "train.py", "+experiment=demo", f"paths.data_dir={data_dir}", f"hydra.run.dir={train_dir}",
          "test_after_training=false", *args.overrides], env)  # fmt: skip
    train_report = json.loads((train_dir / "report.json").read_text())
    best = train_report.get("best_checkpoint") or str(train_dir / "checkpoints" / "last.ckpt")
    _run([python, "-m", "mmsum.cli.evaluate", f"ckpt_path={best}", "data=demo", f"paths.data_dir={data_dir}",
          f"hydra.run.dir={eval_dir}"], env)  # fmt: skip
    eval_report = json.loads((eval_dir / "report.json").read_text())

    untrained = train_report.get("initial_val", {}).get("val/rouge2")
    final = train_report.get("final_val", {}).get("val/rouge2")
    print("\n=== mmsum demo finished in %.0f s ===" % (time.time() - started))
    if untrained is not None and final is not None:
        print(f"val ROUGE-2 (F, 0-1): untrained {untrained:.4f} -> trained {final:.4f}")
    for key, value in sorted(eval_report["test"].items()):
        print(f"{key:28s} {value:.4f}")
    print(f"train report : {train_dir / 'report.json'}")
    print(f"plot         : {train_report.get('plot')}")
    print(f"eval report  : {eval_dir / 'report.json'}")
    print(f"predictions  : {eval_report['predictions']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
