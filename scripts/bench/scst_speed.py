"""SCST speed on the tiny models, side by side in one process.

1. fused sample+greedy decode (one encoder pass, one loop over B·(K+1) rows) vs two generate() calls
   (do_sample=True, then greedy);
2. an SCST step vs an XE step on the same batch, with the SCST time split into decode, rewards,
   log-prob forward (+XE) and backward.

python scripts/bench/scst_speed.py [--batch 16] [--max-new-tokens 32] [--repeats 5]
Uses ROUGE-2 as the reward (CPU-cheap) so the numbers measure the training machinery.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # for tests.helpers' synthetic data


def _timed(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from mmsum.models.tiny import ensure_tiny_bart
    from mmsum.rewards import RougeReward
    from mmsum.rewards.schedule import RewardSchedule, WeightedReward
    from mmsum.training.decoding import fused_sample_and_greedy
    from mmsum.training.module import ClipBartModule
    from mmsum.training.scst import ScstSettings, scst_step
    from tests.helpers import write_synthetic_dataset

    cache = Path(os.environ.get("MMSUM_CACHE", Path.home() / ".cache" / "mmsum"))
    bart = ensure_tiny_bart(cache / "tiny-bart")
    torch.manual_seed(0)
    module = ClipBartModule(str(bart), visual_feat_dim=16, max_images=3, predictions_path=None)
    with torch.no_grad():  # untrained tiny BART stops at once; perturb so decodes run to length
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    from mmsum.data.datamodule import PreparedDataModule

    with tempfile.TemporaryDirectory() as tmp:
        root = write_synthetic_dataset(Path(tmp), n_train=args.batch, n_eval=2, feature_dim=16)
        dm = PreparedDataModule(str(root), str(bart), batch_size=args.batch, max_source_len=64,
                                max_target_len=args.max_new_tokens, max_images=3)  # fmt: skip
        dm.setup()
        batch = next(iter(dm.train_dataloader()))
    module.tokenizer = dm.tokenizer
    model = module.model.eval()
    inputs = module.model_inputs(batch)
    T = args.max_new_tokens
    gen = torch.Generator().manual_seed(0)

    fused = _timed(lambda: fused_sample_and_greedy(model, **inputs, num_samples=1, max_new_tokens=T, generator=gen),
                   args.repeats)  # fmt: skip

    def two_generates():
        model.generate(**inputs, do_sample=True, num_beams=1, max_new_tokens=T, top_k=0)
        model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=T)

    separate = _timed(two_generates, args.repeats)
    print(f"decode B={args.batch} K=1 T={T}: fused {fused * 1e3:.1f} ms | two generate() {separate * 1e3:.1f} ms "
          f"| ratio separate/fused = {separate / fused:.2f}x")  # fmt: skip

    module.train()
    schedule = RewardSchedule({"rouge2": WeightedReward(RougeReward("rouge2"), 1.0)})
    settings = ScstSettings(max_new_tokens=T)

    def xe_step():
        module.zero_grad(set_to_none=True)
        module.xe_loss(batch)["loss"].backward()

    xe = _timed(xe_step, args.repeats)
    parts: dict[str, float] = {}

    def rl_step():
        module.zero_grad(set_to_none=True)
        out = scst_step(module, batch, schedule, 0, settings, gen, timings=parts)
        start = time.perf_counter()
        out.loss.backward()
        parts["backward"] = parts.get("backward", 0.0) + time.perf_counter() - start

    rl_step()
    parts.clear()
    starts = time.perf_counter()
    for _ in range(args.repeats):
        rl_step()
    rl = (time.perf_counter() - starts) / args.repeats
    print(
        f"step B={args.batch}: XE {xe * 1e3:.1f} ms | SCST {rl * 1e3:.1f} ms | ratio SCST/XE = {rl / xe:.2f}x"
    )
    for name, total in parts.items():
        print(f"  {name:16s} {total / args.repeats * 1e3:8.1f} ms  ({total / args.repeats / rl:5.1%})")


if __name__ == "__main__":
    main()
