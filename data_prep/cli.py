"""Hydra entry point of `python -m data_prep` (config: conf/prep.yaml) and the manifest report."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from data_prep.pipeline import prepare

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def options_from_config(cfg: DictConfig) -> dict[str, Any]:
    """Map the Hydra config onto `prepare()`'s keyword arguments."""
    return dict(
        splits=list(cfg.splits),
        filter_train=bool(cfg.entity_filter.train),
        filter_eval=bool(cfg.entity_filter.eval),
        entity_match=str(cfg.entity_filter.match),
        guidance_method=str(cfg.guidance.method),
        guidance_k=int(cfg.guidance.k),
        guidance_min_score=float(cfg.guidance.min_score),
        chunk_size=int(cfg.chunk_size),
        batch_size=int(cfg.features.batch_size),
        num_workers=int(cfg.features.num_workers),
        jpeg_draft=bool(cfg.features.jpeg_draft),
        device=str(cfg.features.device),
        spacy_batch_size=int(cfg.spacy.batch_size),
        spacy_n_process=int(cfg.spacy.n_process),
        dataset_options=OmegaConf.to_container(cfg.dataset_options, resolve=True),
        keep_cache=bool(cfg.keep_cache),
        progress=bool(cfg.progress),
        demo_seed=int(cfg.demo.seed),
        demo_sizes=list(cfg.demo.sizes),
    )


def report(out_dir: str | os.PathLike) -> str:
    """The manifest tables of a prepared dataset, as printed text (rich tables)."""
    from rich.console import Console
    from rich.table import Table

    out_dir = Path(out_dir)
    split_dirs = [
        out_dir / s for s in ("train", "validation", "test") if (out_dir / s / "manifest.json").is_file()
    ]
    if not split_dirs:
        raise SystemExit(f"{out_dir}: no prepared splits (expected {out_dir}/<split>/manifest.json)")
    console = Console(record=True, width=120)
    manifests = {d.name: json.loads((d / "manifest.json").read_text()) for d in split_dirs}
    first = next(iter(manifests.values()))
    console.print(f"[bold]{out_dir}[/]  dataset={first.get('dataset')}  clip={first.get('clip_model')}  "
                  f"feature_dim={first.get('feature_dim')}  config_hash={first.get('config_hash')}")  # fmt: skip
    t = Table("split", "raw", "kept", "dropped", "images", "missing", "corrupt", "guidance", title="Counts")
    for split, m in manifests.items():
        drops = ", ".join(f"{k}={v}" for k, v in m["dropped"].items()) or "-"
        im = m.get("images", {})
        g = m.get("guidance", {})
        t.add_row(split, str(m["raw"]), str(m["kept"]), drops, str(im.get("total")), str(im.get("missing")),
                  str(im.get("corrupt")), f"{g.get('method')} top-{g.get('k')}")  # fmt: skip
    console.print(t)
    t = Table("split", "applied", "match", "sent. removed", "ex. changed", "ex. dropped", "ent. prec before",
              "ent. prec after", title="Entity filter (Nan et al. 2021)")  # fmt: skip
    for split, m in manifests.items():
        f = m.get("entity_filter", {})

        def fmt(x: Any) -> str:
            return "-" if x is None else f"{x:.4f}"

        t.add_row(split, str(f.get("applied")), str(f.get("match")), f"{f.get('sentences_removed')}/{f.get('sentences_seen')}",
                  str(f.get("examples_changed")), str(f.get("examples_dropped")),
                  fmt(f.get("entity_precision_source_before")), fmt(f.get("entity_precision_source_after")))  # fmt: skip
    console.print(t)
    for split, m in manifests.items():
        p = m.get("parse", {})
        if p.get("skipped_lines") or p.get("decode_replacements") or p.get("notes"):
            console.print(f"[bold]{split}[/] parse notes: {p.get('notes')}; "
                          f"decoded with replacement: {len(p.get('decode_replacements', {}))}; "
                          f"skipped lines: {len(p.get('skipped_lines', []))}")  # fmt: skip
    return console.export_text()


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="prep")
def main(cfg: DictConfig) -> None:
    logging.getLogger("data_prep").setLevel(logging.INFO)
    logging.getLogger().setLevel(logging.WARNING)  # open_clip logs every step to the root logger
    if cfg.command == "report":
        report(cfg.out_dir)
        return
    if cfg.command != "prep":
        raise SystemExit(f"unknown command {cfg.command!r} (use prep or report)")
    out = prepare(cfg.dataset, cfg.raw_dir, cfg.out_dir, cfg.clip.model_name, cfg.clip.pretrained,
                  **options_from_config(cfg))  # fmt: skip
    report(cfg.out_dir)
    for split, path in out.items():
        logging.getLogger("data_prep").info("%s -> %s", split, path)
