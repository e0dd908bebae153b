"""SCST throughput on one GPU at paper sizes: BART-base + RN50x64 text tower + roberta-large-mnli sizes.

Random weights of the real sizes (see scripts/bench/paper_scale.py for the stand-ins), bf16
autocast, MSMO lengths (512 source, 128 summary tokens), batch 32, K=1 + greedy baseline,
alternating CLIPBERTScore/ROUGE-2 steps. Prints SCST examples/s and peak GPU memory as JSON.
Goal: >= 100 examples/s on one H200.

    python scripts/bench/gpu_scst.py [--batch 32] [--steps 6] [--warmup 2]

NOTE: written to be ready to run; it has NOT been run in this project yet (no GPU was lent to the
session that wrote it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from scripts.bench.common import offline_env  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=128)
    args = p.parse_args(argv)
    offline_env()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_scst.py needs a CUDA GPU")
    from mmsum.rewards import ClipBertScoreReward, RougeReward
    from mmsum.rewards.schedule import RewardSchedule, WeightedReward
    from mmsum.scoring import ClipBertScore
    from mmsum.training.scst import ScstSettings, scst_step
    from scripts.bench.bench_scst import build_batch
    from scripts.bench.paper_scale import build_paper_models

    device = torch.device("cuda")
    with tempfile.TemporaryDirectory() as tmp:
        module, clip, bert = build_paper_models(Path(tmp))
    module.to(device).train()
    clip.clip.model.to(device)
    bert.encoder.model.to(device)
    batch = build_batch(module.tokenizer, args.batch, 512, tgt_len=128)
    batch["image_features"] = torch.randn(args.batch, 10, 1024)
    batch["image_mask"] = torch.arange(10)[None] < torch.randint(1, 11, (args.batch, 1))
    batch["guidance_labels"] = torch.zeros(args.batch, 10, dtype=torch.long)
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    schedule = RewardSchedule(
        {
            "clipbertscore": WeightedReward(ClipBertScoreReward(scorer=ClipBertScore(clip, bert)), 2.0),
            "rouge2": WeightedReward(RougeReward("rouge2"), 1.0),
        }
    )
    settings = ScstSettings(num_samples=1, baseline="greedy", max_new_tokens=args.max_new_tokens)
    optim = torch.optim.AdamW(module.parameters(), lr=1e-6)
    timings: dict[str, float] = {}

    def step(i: int) -> None:
        optim.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = scst_step(module, batch, schedule, i, settings, timings=timings)
        out.loss.backward()
        optim.step()

    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    timings.clear()
    start = time.perf_counter()
    for i in range(args.steps):
        step(i)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    result = {
        "name": "gpu_scst_paper_scale",
        "examples_per_s": round(args.batch * args.steps / seconds, 1),
        "s_per_step": round(seconds / args.steps, 3),
        "target": ">= 100 examples/s on one H200",
        "met": args.batch * args.steps / seconds >= 100,
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "breakdown_s_per_step": {k: round(v / args.steps, 4) for k, v in timings.items()},
        "device": torch.cuda.get_device_name(),
        "batch": args.batch,
        "max_new_tokens": args.max_new_tokens,
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
