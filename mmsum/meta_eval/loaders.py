"""Readers for the meta-evaluation benchmarks, all into one shape: `Pair`s to score.

A correlation benchmark (MuFaME, FRANK) is a list of `Item`s, one summary with human labels
each; a ranking benchmark (WikiHowFact, FOIL, BISON) is a list of `Group`s, candidates of which
exactly one (`gold`) is right. Image paths are resolved against `image_dir` (default: the
folder of the annotation file).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mmsum.meta_eval.stats import majority

SPLIT_ALIASES = {"val": "validation", "valid": "validation", "dev": "validation", "validation": "validation"}


@dataclass(frozen=True)
class Pair:
    """What a metric scores: a candidate text against its document and/or images/references."""

    document: str
    summary: str
    images: tuple[str, ...] = ()
    references: tuple[str, ...] = ()


@dataclass
class Item:
    id: str
    pair: Pair
    labels: dict[str, float]
    split: str = "test"
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Group:
    id: str
    candidates: list[Pair]
    gold: int
    split: str = "test"
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Benchmark:
    name: str
    kind: Literal["correlation", "ranking"]
    items: list[Item] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    labels: tuple[str, ...] = ()

    def splits(self) -> list[str]:
        rows = self.items if self.kind == "correlation" else self.groups
        return sorted({r.split for r in rows})


def _norm_split(name: str | None, default: str = "test") -> str:
    if not name:
        return default
    return SPLIT_ALIASES.get(name.lower(), name.lower())


def parse_label(value: Any) -> float:
    """1/0, yes/no, true/false, factual/non-factual (any case) or a number -> float; '' -> NaN."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip().lower()
    words = {"yes": 1.0, "y": 1.0, "true": 1.0, "factual": 1.0, "no": 0.0, "n": 0.0, "false": 0.0}
    words.update({"non-factual": 0.0, "nonfactual": 0.0, "not factual": 0.0})
    if s in words:
        return words[s]
    if s == "":
        return float("nan")
    return float(s)


def _split_images(value: str) -> tuple[str, ...]:
    # Several images of one example are written "a.jpg;b.jpg" (or with "|").
    return tuple(p.strip() for p in str(value).replace("|", ";").split(";") if p.strip())


def _resolve(images: Iterable[str], image_dir: Path) -> tuple[str, ...]:
    return tuple(str(Path(p) if Path(p).is_absolute() else image_dir / p) for p in images)


def _files(path: Path, suffixes: tuple[str, ...]) -> list[tuple[Path, str | None]]:
    """A file -> [(file, None)]; a folder -> its files named after splits: [(file, split)]."""
    if path.is_file():
        return [(path, None)]
    out = [(p, _norm_split(p.stem)) for p in sorted(path.iterdir()) if p.suffix in suffixes]
    if not out:
        raise FileNotFoundError(f"no {'/'.join(suffixes)} files in {path}")
    return out


# -- MuFaME -------------------------------------------------------------------------------------
MUFAME_LABELS = ("doc_factuality", "img_factuality", "comb_factuality")


def load_mufame(path: str | Path, image_dir: str | Path | None = None) -> Benchmark:
    """MuFaME CSVs: `doc_id, model, document, summary, image, doc_factuality, img_factuality,
    comb_factuality, wid` — one row per worker; the workers of one (doc_id, model) summary are
    aggregated by majority per label. `path` is a CSV (with an optional `split` column; else all
    test) or a folder of `<split>.csv` (validation/val/dev, test)."""
    path = Path(path)
    rows: dict[tuple[str, str, str], list[dict[str, str]]] = defaultdict(list)
    for file, split in _files(path, (".csv",)):
        with file.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                s = _norm_split(r.get("split") or split)
                rows[(s, r["doc_id"], r["model"])].append(r)
    base = Path(image_dir) if image_dir else (path if path.is_dir() else path.parent)
    items = []
    for (split, doc_id, model), workers in rows.items():
        first = workers[0]
        labels = {
            k: majority([parse_label(w[k]) for w in workers if w.get(k, "") != ""]) for k in MUFAME_LABELS
        }
        pair = Pair(
            first["document"], first["summary"], _resolve(_split_images(first.get("image", "")), base)
        )
        meta = {"doc_id": doc_id, "model": model, "workers": sorted({w.get("wid", "") for w in workers})}
        items.append(Item(f"{doc_id}:{model}", pair, labels, split, meta))
    return Benchmark("mufame", "correlation", items=items, labels=MUFAME_LABELS)


# -- FRANK ---------------------------------------------------------------------------------------
def load_frank(path: str | Path) -> Benchmark:
    """FRANK `human_annotations.json`: records with `hash, model_name, Factuality` (+ `article`,
    `summary`). Where a record lacks the texts they are looked up by (hash, model_name) in
    `benchmark_data.json` next to it. `split` (valid/test) is kept when present."""
    path = Path(path)
    file = path / "human_annotations.json" if path.is_dir() else path
    records = json.loads(file.read_text(encoding="utf-8"))
    texts: dict[tuple[str, str], dict[str, Any]] = {}
    bench = file.parent / "benchmark_data.json"
    if bench.is_file():
        texts = {(r["hash"], r["model_name"]): r for r in json.loads(bench.read_text(encoding="utf-8"))}
    items = []
    for r in records:
        src = r if "summary" in r and "article" in r else texts.get((r["hash"], r["model_name"]))
        if src is None:
            raise KeyError(f"FRANK record {r['hash']}/{r['model_name']} has no article/summary")
        refs = (src["reference"],) if src.get("reference") else ()
        pair = Pair(src["article"], src["summary"], (), refs)
        items.append(
            Item(
                f"{r['hash']}:{r['model_name']}",
                pair,
                {"Factuality": float(r["Factuality"])},
                _norm_split(r.get("split")),
                {"model": r["model_name"]},
            )
        )
    return Benchmark("frank", "correlation", items=items, labels=("Factuality",))


# -- WikiHowFact ---------------------------------------------------------------------------------
WIKIHOWFACT_SPLITS = ("random", "category", "similarity")


def load_wikihowfact(
    path: str | Path, setting: str = "random", image_dir: str | Path | None = None
) -> Benchmark:
    """WikiHowFact: groups of 4 candidate summaries sharing a document and an image, exactly one
    labelled 1. `path` is a JSONL file or a folder holding `<setting>.jsonl` (setting = random /
    category / similarity, how the negatives were drawn). A line is either a group
    `{id, document, image, candidates: [...], label: <index>}` (or `labels: [0,1,0,0]`) or one
    candidate `{group_id, document, image, candidate, label}`; an optional `split` is kept."""
    path = Path(path)
    if setting not in WIKIHOWFACT_SPLITS:
        raise ValueError(f"WikiHowFact setting must be one of {WIKIHOWFACT_SPLITS}, got {setting!r}")
    file = path / f"{setting}.jsonl" if path.is_dir() else path
    base = Path(image_dir) if image_dir else file.parent
    lines = [json.loads(x) for x in file.read_text(encoding="utf-8").splitlines() if x.strip()]
    flat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    groups = []
    for i, r in enumerate(lines):
        if "candidates" in r:
            labels = r.get("labels") or [int(k == int(r["label"])) for k in range(len(r["candidates"]))]
            groups.append(_wh_group(str(r.get("id", i)), r, r["candidates"], labels, base))
        else:
            flat[str(r["group_id"])].append(r)
    for gid, rows in flat.items():
        groups.append(
            _wh_group(gid, rows[0], [r["candidate"] for r in rows], [int(r["label"]) for r in rows], base)
        )
    return Benchmark(f"wikihowfact-{setting}", "ranking", groups=groups)


def _wh_group(gid: str, r: dict[str, Any], cands: list[str], labels: list[int], base: Path) -> Group:
    if sum(int(v) for v in labels) != 1:
        raise ValueError(f"WikiHowFact group {gid}: exactly one candidate must be labelled 1, got {labels}")
    images = _resolve(_split_images(r.get("image", "")), base)
    pairs = [Pair(r.get("document", ""), c, images) for c in cands]
    return Group(gid, pairs, [int(v) for v in labels].index(1), _norm_split(r.get("split")))


# -- FOIL ----------------------------------------------------------------------------------------
def coco_image_path(image_id: int | str, image_dir: Path, file_names: dict[Any, str]) -> str:
    name = file_names.get(image_id) or file_names.get(str(image_id))
    return str(image_dir / (name or f"COCO_val2014_{int(image_id):012d}.jpg"))


def load_foil(
    path: str | Path, image_dir: str | Path | None = None, num_refs: Literal[0, 1, 4] = 0
) -> Benchmark:
    """FOIL-COCO (COCO-style json; annotations `id, foil_id, image_id, caption, target_word,
    foil_word, foil`). A foil and the true caption it was made from share `id`; each becomes a
    2-candidate group (gold = the true caption). `num_refs` other true captions of the same image
    (never the paired one) go along as references, for reference-based metrics (the 1-ref and
    4-ref settings of Hessel et al. 2021); groups with too few are skipped in those settings."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    base = Path(image_dir) if image_dir else path.parent
    names = {im["id"]: im["file_name"] for im in data.get("images", []) if "file_name" in im}
    anns = data["annotations"]
    true_by_id: dict[Any, dict[str, Any]] = {}
    true_by_image: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for a in anns:
        if not _truthy(a["foil"]):
            true_by_id[a["id"]] = a
            true_by_image[a["image_id"]].append(a)
    groups = []
    for a in anns:
        if not _truthy(a["foil"]) or a["id"] not in true_by_id:
            continue
        orig = true_by_id[a["id"]]
        others = [o["caption"].strip() for o in true_by_image[a["image_id"]] if o["id"] != orig["id"]]
        if len(others) < num_refs:
            continue
        refs = tuple(others[:num_refs])
        image = (coco_image_path(a["image_id"], base, names),)
        cands = [Pair("", orig["caption"].strip(), image, refs), Pair("", a["caption"].strip(), image, refs)]
        meta = {"target_word": a.get("target_word"), "foil_word": a.get("foil_word")}
        groups.append(Group(str(a.get("foil_id", a["id"])), cands, 0, "test", meta))
    return Benchmark(f"foil-{num_refs}ref", "ranking", groups=groups)


def _truthy(v: Any) -> bool:
    return v if isinstance(v, bool) else str(v).strip().lower() in ("1", "true", "yes")


# -- BISON ---------------------------------------------------------------------------------------
def load_bison(path: str | Path, captions: str | Path, image_dir: str | Path | None = None) -> Benchmark:
    """BISON (`bison_id, caption_id, image_candidates: [{image_id, image_filename}], true_image_id`,
    as a json list or `{"data": [...]}`): pick the image a COCO caption describes. Captions come
    from a COCO captions file (`annotations: [{id, caption}]`). Each candidate is the caption
    paired with one image; gold is the true image."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    data = data["data"] if isinstance(data, dict) else data
    caps = {
        a["id"]: a["caption"].strip()
        for a in json.loads(Path(captions).read_text(encoding="utf-8"))["annotations"]
    }
    base = Path(image_dir) if image_dir else path.parent
    groups = []
    for r in data:
        text = caps[r["caption_id"]]
        cands = [Pair("", text, (str(base / c["image_filename"]),)) for c in r["image_candidates"]]
        ids = [c["image_id"] for c in r["image_candidates"]]
        groups.append(Group(str(r["bison_id"]), cands, ids.index(r["true_image_id"])))
    return Benchmark("bison", "ranking", groups=groups)


def load_benchmark(name: str, path: str | Path, **options: Any) -> Benchmark:
    """Dispatch by name; options are the loader's keyword arguments (unknown ones are dropped)."""
    import inspect

    loader = {
        "mufame": load_mufame,
        "frank": load_frank,
        "wikihowfact": load_wikihowfact,
        "foil": load_foil,
        "bison": load_bison,
    }.get(name)
    if loader is None:
        raise ValueError(f"unknown benchmark {name!r}; expected mufame, wikihowfact, foil, bison or frank")
    accepted = inspect.signature(loader).parameters
    return loader(path, **{k: v for k, v in options.items() if k in accepted and v is not None})
