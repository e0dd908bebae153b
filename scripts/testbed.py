"""The factuality testbed: does CLIPBERTScore-SCST cut image hallucinations? Exact answer, on CPU.

    python scripts/testbed.py --out outputs/testbed --jobs 1   # full: 3 seeds, 24.4 min measured on 2 cores
    python scripts/testbed.py --out /tmp/tb --quick --seeds 0  # checks the machinery in ~2 min

Steps (each skipped when its output exists, so a killed run continues):
  1. train a CLIP on the demo world (`data_prep.demo_clip`), report its FOIL accuracy;
  2. generate the demo world and prepare it with that CLIP (the records carry their `scene`);
  3. per seed: `testbed_xe`, then from its checkpoint `testbed_scst` (CLIPBERTScore x2 / ROUGE-2
     alternating, alpha = 0.998) and the control `testbed_scst_rouge` (ROUGE-2 only);
  4. score every run's test predictions: ROUGE-2, CLIPBERTScore (the demo CLIP + MiniLM) and the
     exact metrics of `mmsum.scoring.exact_facts`; write results.json, table.md, table.csv, plot.png,
     and the Pearson correlations of CLIPBERTScore (and its parts) with the exact labels.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

EXPERIMENTS = ("testbed_xe", "testbed_scst", "testbed_scst_rouge")
LABELS = {
    "testbed_xe": "XE",
    "testbed_scst": "SCST CLIPBERTScore+R2",
    "testbed_scst_rouge": "SCST ROUGE-2 only",
}
COLUMNS = (  # (key in the aggregates, header, scale)
    ("rouge2", "ROUGE-2", 100),
    ("clipbertscore", "CLIPBERTScore", 100),
    ("image_fact_precision", "image-fact prec.", 100),
    ("document_fact_precision", "doc-fact prec.", 100),
    ("image_hallucination_rate", "image-halluc. rate", 100),
    ("entity_hallucination_rate", "entity-halluc. rate", 100),
    ("object_coverage", "object coverage", 100),
)


@dataclass
class Settings:
    seeds: list[int]
    # 2,000 training articles: the world-vocabulary model copies facts from them in 1,000 XE steps
    # (with 240 it never did; docs/testbed.md).
    demo_sizes: tuple[int, int, int] = (2000, 40, 100)
    clip_seconds: float = 420.0  # measured: 548 steps -> FOIL 0.87 on a contended core (docs/testbed.md)
    clip_lr: float = 3e-3
    clip_steps: int | None = None
    clip_pool: int = 3000
    clip_batch: int = 64
    n_foil: int = 300
    xe_overrides: tuple[str, ...] = ()
    scst_overrides: tuple[str, ...] = ()
    jobs: int = 1

    @classmethod
    def quick(cls, seeds: list[int]) -> Settings:
        """The machinery, not the outcome: tiny world, a few steps of everything."""
        short = (
            "data.limit_eval_examples=4",
            "trainer.val_check_interval=2",
            "validate_before_training=false",
        )
        return cls(
            seeds=seeds, demo_sizes=(16, 4, 6), clip_steps=3, clip_pool=64, clip_batch=16, n_foil=12,
            xe_overrides=("trainer.max_steps=4", *short),
            scst_overrides=("trainer.max_steps=2", "scst.completions_every_n_steps=1", *short),
        )  # fmt: skip


def _env(out: Path) -> dict[str, str]:
    env = dict(os.environ)
    # One thread per process: on a shared 2-core machine oversubscribed torch threads are ~10x slower.
    env.update(
        MMSUM_CACHE=str(out / "cache"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1"
    )
    env.setdefault("WANDB_MODE", "offline")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _log(msg: str) -> None:
    print(f"[testbed {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------- steps 1-2


def clip_path(out: Path) -> Path:
    from data_prep.demo_clip import DEMO_CLIP_FILE

    return out / "cache" / "demo-clip" / DEMO_CLIP_FILE


def build_clip(out: Path, s: Settings) -> dict[str, Any]:
    from data_prep.demo_clip import REPORT_SUFFIX

    path = clip_path(out)
    report = path.with_name(path.name + REPORT_SUFFIX)
    if not report.is_file():
        cmd = [sys.executable, "-m", "data_prep", "demo_clip", f"out={path}", f"seconds={s.clip_seconds}",
               f"pool_size={s.clip_pool}", f"batch_size={s.clip_batch}", f"lr={s.clip_lr}", f"n_foil={s.n_foil}", "threads=1"]  # fmt: skip
        if s.clip_steps is not None:
            cmd.append(f"steps={s.clip_steps}")
        _run(cmd, out, out / "logs" / "demo_clip.log")
    return json.loads(report.read_text())


def prepare_data(out: Path, s: Settings) -> Path:
    from data_prep.pipeline import prepare
    from mmsum.models.tiny import TINY_CLIP_NAME

    prepared = out / "data" / "testbed" / "prepared"
    if not (prepared / "test" / "manifest.json").is_file():
        prepare("demo", out / "data" / "testbed" / "raw", prepared, clip_model_name=TINY_CLIP_NAME,
                clip_pretrained=str(clip_path(out)), demo_sizes=s.demo_sizes, progress=False)  # fmt: skip
    return prepared


# --------------------------------------------------------------------------------------- step 3


def _run(cmd: list[str], out: Path, log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        done = subprocess.run(cmd, cwd=REPO, env=_env(out), stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({done.returncode}); log {log}:\n{tail}")


def train(out: Path, experiment: str, seed: int, extra: tuple[str, ...]) -> Path:
    run_dir = out / "runs" / f"{experiment}_seed{seed}"
    if (run_dir / "predictions.jsonl").is_file() and (run_dir / "report.json").is_file():
        return run_dir
    cmd = [sys.executable, "train.py", f"+experiment={experiment}", f"seed={seed}", f"paths.data_dir={out / 'data'}",
           f"paths.root_dir={out}", f"paths.cache_dir={out / 'cache'}", f"hydra.run.dir={run_dir}",
           "callbacks.rich_progress_bar=null", *extra]  # fmt: skip
    t = time.perf_counter()
    _run(cmd, out, out / "logs" / f"{experiment}_seed{seed}.log")
    _log(f"{experiment} seed {seed}: {time.perf_counter() - t:.0f}s")
    return run_dir


def train_seed_runs(out: Path, s: Settings) -> dict[tuple[str, int], Path]:
    from omegaconf import OmegaConf

    from mmsum.models.tiny import build_configured_bart

    # Once, before parallel runs race to build it: the summarizer conf/model/clip_bart_testbed.yaml
    # names, with this run's cache dir (keeps the build out of the timed runs).
    model = OmegaConf.merge(
        {"paths": {"cache_dir": str(out / "cache")}},
        OmegaConf.load(REPO / "conf" / "model" / "clip_bart_testbed.yaml"),
    )
    build_configured_bart(model.bart_name_or_path, model.build_tiny_bart)
    runs: dict[tuple[str, int], Path] = {}
    with ThreadPoolExecutor(max_workers=s.jobs) as pool:
        xe = {seed: pool.submit(train, out, "testbed_xe", seed, s.xe_overrides) for seed in s.seeds}
        for seed, fut in xe.items():
            runs["testbed_xe", seed] = fut.result()
        futures = {}
        for seed in s.seeds:
            init = f"scst.init_from={runs['testbed_xe', seed] / 'checkpoints' / 'last.ckpt'}"
            for exp in EXPERIMENTS[1:]:
                futures[exp, seed] = pool.submit(train, out, exp, seed, (init, *s.scst_overrides))
        for key, fut in futures.items():
            runs[key] = fut.result()
    return runs


# --------------------------------------------------------------------------------------- step 4


class Evaluator:
    """ROUGE-2, CLIPBERTScore (+ parts) and the exact metrics of predictions on the test split."""

    def __init__(self, out: Path) -> None:
        from mmsum.data.prepared import load_prepared
        from mmsum.models.tiny import TINY_CLIP_NAME
        from mmsum.scoring.bertscore import BertScorer
        from mmsum.scoring.clipbert import ClipBertScore
        from mmsum.scoring.clipscore import ClipScorer

        split = load_prepared(out / "data" / "testbed" / "prepared" / "test")
        self.records = {r["id"]: r for r in split}
        clip = ClipScorer(TINY_CLIP_NAME, str(clip_path(out)), device="cpu")
        self.scorer = ClipBertScore(clip, BertScorer("minilm", 6, device="cpu"), alpha=0.25)

    def score(self, predictions: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, float]]:
        import torch

        from mmsum.scoring.exact_facts import score_predictions
        from mmsum.scoring.rougescore import rouge

        rows, agg = score_predictions(predictions, self.records)
        recs = [self.records[r["id"]] for r in rows]
        summaries = [r["summary"] for r in rows]
        r2 = rouge(summaries, [rec["summary"] for rec in recs], keys=("rouge2",))["rouge2"].tolist()
        m = max(len(rec["image_features"]) for rec in recs)
        feats = torch.zeros(len(recs), m, recs[0]["image_features"].shape[-1])
        mask = torch.zeros(len(recs), m, dtype=torch.bool)
        for i, rec in enumerate(recs):
            n = len(rec["image_features"])
            feats[i, :n] = torch.as_tensor(rec["image_features"])
            mask[i, :n] = True
        res = self.scorer(feats, mask, summaries, [rec["document"] for rec in recs])
        for i, row in enumerate(rows):
            row.update(rouge2=r2[i], clipbertscore=float(res.score[i]), clip_s=float(res.clip_s[i]),
                       bert_s=float(res.bert_s[i]))  # fmt: skip
        for key in ("rouge2", "clipbertscore", "clip_s", "bert_s"):
            agg[key] = statistics.fmean(row[key] for row in rows)
        return rows, agg


def _mean_std(xs: list[float]) -> tuple[float, float]:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return math.nan, math.nan
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def pearson(xs: list[float], ys: list[float]) -> float:
    pairs = [(x, y) for x, y in zip(xs, ys) if not (math.isnan(x) or math.isnan(y))]
    if len(pairs) < 3:
        return math.nan
    mx, my = statistics.fmean(p[0] for p in pairs), statistics.fmean(p[1] for p in pairs)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sx = math.sqrt(sum((x - mx) ** 2 for x, _ in pairs))
    sy = math.sqrt(sum((y - my) ** 2 for _, y in pairs))
    return sxy / (sx * sy) if sx and sy else math.nan


def correlations(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Summary-level Pearson r of each learned score with each exact label, over the generated
    summaries that state at least one object fact (empty or object-free ones would pair "no
    hallucination" with a low BERT-S and swamp the signal)."""
    rows = [r for r in rows if r["n_object_facts"] > 0]
    labels = ("image_fact_precision", "document_fact_precision", "image_hallucinated")
    out: dict[str, dict[str, float]] = {
        score: {label: pearson([r[score] for r in rows], [r[label] for r in rows]) for label in labels}
        for score in ("clipbertscore", "clip_s", "bert_s", "rouge2")
    }
    out["n"] = {"summaries": float(len(rows))}
    return out


def table(aggs: dict[tuple[str, int], dict[str, float]]) -> tuple[str, list[list[str]]]:
    head = ["experiment", *[c[1] for c in COLUMNS], "seeds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    csv = [head]
    for exp in EXPERIMENTS:
        seeds = [a for (e, _), a in sorted(aggs.items()) if e == exp]
        cells = []
        for key, _, scale in COLUMNS:
            mean, std = _mean_std([a[key] * scale for a in seeds])
            cells.append(f"{mean:.1f} ± {std:.1f}")
        lines.append("| " + " | ".join([LABELS[exp], *cells, str(len(seeds))]) + " |")
        csv.append([exp, *cells, str(len(seeds))])
    return "\n".join(lines), csv


def plot(aggs: dict[tuple[str, int], dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("rouge2", "image_fact_precision", "image_hallucination_rate")
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.4))
    for ax, key in zip(axes, keys):
        stats = [_mean_std([a[key] * 100 for (e, _), a in aggs.items() if e == exp]) for exp in EXPERIMENTS]
        ax.bar(range(len(EXPERIMENTS)), [m for m, _ in stats], yerr=[sd for _, sd in stats], capsize=4,
               color=["#888888", "#2a7ab9", "#d9822b"])  # fmt: skip
        ax.set_xticks(range(len(EXPERIMENTS)), ["XE", "SCST\nCLIPBERT", "SCST\nROUGE"])
        ax.set_title(dict((c[0], c[1]) for c in COLUMNS)[key] + " (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def evaluate(out: Path, runs: dict[tuple[str, int], Path]) -> dict[str, Any]:
    ev = Evaluator(out)
    aggs: dict[tuple[str, int], dict[str, float]] = {}
    all_rows: list[dict[str, Any]] = []
    for (exp, seed), run_dir in sorted(runs.items()):
        preds = [
            json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines() if line
        ]
        rows, agg = ev.score(preds)
        aggs[exp, seed] = agg
        all_rows += [{**r, "experiment": exp, "seed": seed} for r in rows]
    refs = [{"id": i, "summary": r["summary"]} for i, r in ev.records.items()]
    _, ref_agg = ev.score(refs)  # the references themselves: a sanity line (image-faithful by construction)
    md, csv = table(aggs)
    (out / "table.md").write_text(md + "\n")
    (out / "table.csv").write_text("\n".join(",".join(f'"{c}"' for c in row) for row in csv) + "\n")
    with open(out / "summaries.jsonl", "w") as f:
        for r in all_rows:
            f.write(json.dumps(r) + "\n")
    plot(aggs, out / "plot.png")
    return {
        "per_run": {f"{e}/seed{s}": a for (e, s), a in sorted(aggs.items())},
        "references": ref_agg,
        "correlations": correlations(all_rows),
        "table_md": md,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "testbed")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the machinery, not the outcome")
    ap.add_argument("--jobs", type=int, default=1, help="training runs at once (one thread each)")
    ap.add_argument("--clip-seconds", type=float, default=None)
    args = ap.parse_args(argv)
    s = Settings.quick(args.seeds) if args.quick else Settings(seeds=args.seeds)
    s.jobs = args.jobs
    if args.clip_seconds is not None:
        s.clip_seconds = args.clip_seconds
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(_env(out))
    t0 = time.perf_counter()
    clip = build_clip(out, s)
    _log(
        f"demo CLIP: FOIL accuracy {clip['foil_accuracy']:.3f} (untrained {clip['foil_accuracy_untrained']:.3f})"
    )
    prepare_data(out, s)
    _log("prepared the testbed world")
    runs = train_seed_runs(out, s)
    result = evaluate(out, runs)
    result.update(settings=asdict(s), demo_clip=clip, minutes=round((time.perf_counter() - t0) / 60, 2))
    (out / "results.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(result["table_md"])
    print(json.dumps(result["correlations"], indent=2))
    _log(f"done in {result['minutes']} min: {out}")
    return result


if __name__ == "__main__":
    main()
