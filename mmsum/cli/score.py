"""`mmsum-score`: score a predictions file against a prepared split.

  mmsum-score --split data/msmo/test --predictions runs/x/predictions.jsonl --out runs/x/scores
  mmsum-score --split ... --predictions preds.txt [--ids ids.txt]   # one summary per line
  # offline (tiny CLIP + MiniLM), e.g. on the demo world:
  mmsum-score --split ... --predictions ... --clip-model mmsum-tiny-rn --clip-pretrained tiny \
      --bert-model minilm --bert-num-layers 6

Writes <out>/scores.csv (one row per example) and <out>/summary.json (means, counts, settings).
JSONL predictions need `id` and `summary`; an optional `image_scores` list (one score per image of
the example) adds image precision. A text file without --ids follows the split's example order.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mmsum.scoring.rougescore import DEFAULT_KEYS, rouge

METRICS = ("rouge", "bert", "clip", "clipbert", "entities", "ip")


def read_predictions(path: Path, ids_path: Path | None, split_ids: list[str]) -> list[dict[str, Any]]:
    """[{id, summary, ...}] from JSONL, or from a text file (+ ids file, or the split's order)."""
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for i, r in enumerate(rows):
            if "id" not in r or "summary" not in r:
                raise SystemExit(f"{path}:{i + 1}: a JSONL prediction needs `id` and `summary`")
        return rows
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    ids = ids_path.read_text(encoding="utf-8").split() if ids_path else split_ids[: len(lines)]
    if len(ids) != len(lines):
        raise SystemExit(f"{path}: {len(lines)} summaries but {len(ids)} ids")
    # Summaries in text files write sentence breaks as "<n>" or literal "\n" by convention.
    return [{"id": i, "summary": s.replace("<n>", "\n").replace("\\n", "\n")} for i, s in zip(ids, lines)]


def _relevant_indices(example: dict[str, Any]) -> list[int]:
    ids = list(example.get("image_ids", []))
    out = []
    for r in example.get("relevant_images", []):
        if isinstance(r, int):
            out.append(r)
        elif r in ids:
            out.append(ids.index(r))
    return out


def _batch_images(examples: list[dict[str, Any]], dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    m = max([len(e["image_features"]) for e in examples] + [1])
    feats = torch.zeros(len(examples), m, dim)
    mask = torch.zeros(len(examples), m, dtype=torch.bool)
    for b, e in enumerate(examples):
        n = len(e["image_features"])
        if n:
            feats[b, :n] = torch.from_numpy(np.asarray(e["image_features"], dtype=np.float32))
            mask[b, :n] = True
    return feats, mask


def _mean(values: list[float]) -> float | None:
    ok = [v for v in values if v is not None and not math.isnan(v)]
    return sum(ok) / len(ok) if ok else None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mmsum-score", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--split", required=True, type=Path, help="prepared split directory")
    p.add_argument("--predictions", required=True, type=Path, help="JSONL (id, summary) or text file")
    p.add_argument("--ids", type=Path, help="ids for a text predictions file, one per line")
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument(
        "--metrics", default="rouge,bert,clip,clipbert,ip", help=f"comma list of {','.join(METRICS)}"
    )
    p.add_argument("--clip-model", default="RN50x64")
    p.add_argument(
        "--clip-pretrained",
        default="openai",
        help="open_clip tag or checkpoint file ('tiny' for the tiny CLIP)",
    )
    p.add_argument("--clip-split-sentences", default="true", choices=["true", "false"])
    p.add_argument("--clip-prefix", default="")
    p.add_argument("--clip-w", type=float, default=1.0)
    p.add_argument("--clip-clamp", action="store_true")
    p.add_argument(
        "--bert-model", default="roberta-large-mnli", help="HF name or local dir ('minilm' offline)"
    )
    p.add_argument("--bert-num-layers", type=int, default=10)
    p.add_argument("--bert-idf", action="store_true")
    p.add_argument("--alpha", type=float, default=0.25)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default=None)
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="skip predicted ids that are not in the split instead of failing",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    metrics = {m.strip() for m in args.metrics.split(",") if m.strip()}
    unknown = metrics - set(METRICS)
    if unknown:
        raise SystemExit(f"unknown metrics {sorted(unknown)}; choose from {METRICS}")
    if "clipbert" in metrics:
        metrics |= {"clip", "bert"}

    from rich.progress import Progress

    from mmsum.data.prepared import load_prepared

    split = load_prepared(args.split)
    index = {e["id"]: i for i, e in enumerate(split.examples)}
    preds = read_predictions(args.predictions, args.ids, [e["id"] for e in split.examples])
    missing = [p["id"] for p in preds if p["id"] not in index]
    if missing and not args.allow_missing:
        raise SystemExit(
            f"{len(missing)} predicted ids are not in {args.split} (e.g. {missing[:3]}); --allow-missing skips them"
        )
    preds = [p for p in preds if p["id"] in index]

    clip = bert = None
    if "clip" in metrics:
        from mmsum.scoring.clipscore import ClipScorer, ClipSOptions

        opts = ClipSOptions(
            args.clip_split_sentences == "true", args.clip_prefix, args.clip_w, args.clip_clamp
        )
        clip = ClipScorer(args.clip_model, args.clip_pretrained, device=args.device, options=opts)
        clip.check_features(split)
    if "bert" in metrics:
        from mmsum.scoring.bertscore import BertScorer

        bert = BertScorer(
            args.bert_model,
            args.bert_num_layers,
            idf=args.bert_idf,
            batch_size=args.batch_size,
            device=args.device,
        )

    rows: list[dict[str, Any]] = []
    ip_scores, ip_relevant = [], []
    bs = args.batch_size
    with Progress(transient=not sys.stderr.isatty()) as progress:
        task = progress.add_task("scoring", total=len(preds))
        for start in range(0, len(preds), bs):
            chunk = preds[start : start + bs]
            examples = [split[index[p["id"]]] for p in chunk]
            summaries = [p["summary"] for p in chunk]
            refs = [e["summary"] for e in examples]
            docs = [e["document"] for e in examples]
            cols: dict[str, list[float]] = {}
            if "rouge" in metrics:
                for k, v in rouge(summaries, refs, DEFAULT_KEYS).items():
                    cols[k] = v.tolist()
            if bert is not None:
                P, R, F = bert.score(summaries, docs)
                cols["bert_s"], cols["bert_r"], cols["bert_f"] = P.tolist(), R.tolist(), F.tolist()
            if clip is not None:
                feats, mask = _batch_images(examples, split.feature_dim)
                cols["clip_s"] = clip.clip_s(feats, mask, summaries).tolist()
            if "clipbert" in metrics:
                cols["clipbertscore"] = [
                    args.alpha * c + (1 - args.alpha) * b if not math.isnan(c) else b
                    for c, b in zip(cols["clip_s"], cols["bert_s"])
                ]
            for i, p in enumerate(chunk):
                rows.append({"id": p["id"], **{k: v[i] for k, v in cols.items()}})
                if "ip" in metrics and "image_scores" in p:
                    ip_scores.append(torch.tensor(p["image_scores"], dtype=torch.float32))
                    ip_relevant.append(_relevant_indices(examples[i]))
            progress.advance(task, len(chunk))

    summary: dict[str, Any] = {"n": len(rows), "split": str(args.split), "predictions": str(args.predictions)}
    keys = [k for k in rows[0] if k != "id"] if rows else []
    summary["means"] = {k: _mean([r[k] for r in rows]) for k in keys}
    if "clip_s" in keys:
        summary["n_without_images"] = sum(1 for r in rows if math.isnan(r["clip_s"]))
    if ip_scores:
        from mmsum.scoring.image_precision import image_precision

        summary["image_precision"] = image_precision(ip_scores, ip_relevant)
    if "entities" in metrics:
        from mmsum.scoring.entities import entity_metrics

        ex = [split[index[p["id"]]] for p in preds]
        summary["entities"] = entity_metrics(
            [e["document"] for e in ex], [p["summary"] for p in preds], [e["summary"] for e in ex]
        )
    summary["settings"] = {
        k: getattr(args, k)
        for k in (
            "clip_model",
            "clip_pretrained",
            "clip_split_sentences",
            "clip_prefix",
            "clip_w",
            "clip_clamp",
            "bert_model",
            "bert_num_layers",
            "bert_idf",
            "alpha",
        )
    }
    summary["settings"]["clip_name"] = clip.name if clip else None
    summary["scale"] = "all scores are fractions in [0, 1] (ROUGE not x100)"

    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "scores.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["id", *keys])
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(json.dumps(summary["means"], indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
