"""MSMO (Zhu et al. 2018, Daily Mail) raw release -> Example records.

Layout: training data in `data1/ ... data20/` (any `data<N>/`), `valid_data/`, `test_data/`; each has
`article/<HASH>.txt`, `img/<HASH>_<k>.jpg`, `caption/<HASH>_<k>.caption`. An article file has marker
lines `@title`, `@body`, `@summary`, each followed by its text lines; every non-empty line after
`@summary` is one highlight sentence. The image id is the integer suffix `k` (kept as a string,
images sorted by its integer value; it need not start at 0/1 nor be contiguous).

Relevant-image labels of the test split come from a pluggable loader (a callable path -> {id: [k]});
the default reads JSON (`{"HASH": [k, ...]}`) or TSV (`HASH<TAB>k1,k2` or `HASH<TAB>k1<TAB>k2`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path

from data_prep.common import (
    Dropped,
    ParseStats,
    ParseStream,
    RawDataError,
    UnsafePathError,
    admit_id,
    check_id,
    empty_text_drop,
    read_text,
    safe_join,
)
from mmsum.data.schema import Example

log = logging.getLogger(__name__)
SOURCE = "msmo"
RELEVANT_CANDIDATES = ("test_relevant_images.json", "test_relevant_images.tsv", "relevant_images.json")
_IMG_RE = re.compile(r"^(?P<hash>.+)_(?P<k>\d+)\.(?P<ext>jpg|jpeg|png)$", re.IGNORECASE)
_CAP_RE = re.compile(r"^(?P<hash>.+)_(?P<k>\d+)\.caption$")

RelevantLoader = Callable[[Path], dict[str, list[str]]]


def split_dirs(raw_dir: Path, split: str) -> list[Path]:
    """The directories that hold a split; training data is spread over data1..data20."""
    if split == "train":

        def num(p: Path) -> int:
            return int(p.name[4:])

        return sorted((p for p in raw_dir.glob("data*") if p.is_dir() and p.name[4:].isdigit()), key=num)
    name = {"validation": "valid_data", "test": "test_data"}[split]
    return [raw_dir / name] if (raw_dir / name).is_dir() else []


def parse_article(text: str) -> dict[str, list[str]]:
    """Sections of an article file: {"title": [...], "body": [...], "summary": [...]} (non-empty lines).

    Marker lines are matched after stripping, so trailing spaces/CR do not hide them; text before the
    first marker is ignored. A section that never appears is absent from the result.
    """
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("@title", "@body", "@summary"):
            current = stripped[1:]
            sections.setdefault(current, [])
        elif current is not None and stripped:
            sections[current].append(stripped)
    return sections


def load_relevant(path: Path) -> dict[str, list[str]]:
    """Default relevant-image loader: JSON object or TSV; ids and image keys are validated."""
    text = path.read_text(encoding="utf-8")
    out: dict[str, list[str]] = {}
    if path.suffix.lower() == ".json":
        data = json.loads(text)
        if not isinstance(data, dict):
            raise RawDataError(f"{path}: expected a JSON object mapping article id -> [image k, ...]")
        items = list(data.items())
    else:
        items = []
        for line_no, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            ks = [k for p in parts[1:] for k in p.replace(",", " ").split()]
            items.append((parts[0].strip(), ks, line_no))  # type: ignore[arg-type]
    for item in items:
        key, ks = item[0], item[1]
        where = f"{path}:{item[2]}" if len(item) > 2 else f"{path}[{key!r}]"
        check_id(key, where)  # raises UnsafePathError for "../x"
        if not isinstance(ks, list):
            raise RawDataError(f"{where}: expected a list of image numbers, got {ks!r}")
        keys = []
        for k in ks:
            if isinstance(k, bool) or not str(k).strip().isdigit():
                raise UnsafePathError(f"{where}: image key {k!r} is not a non-negative integer")
            keys.append(str(int(k)))
        out[key] = keys
    return out


def find_relevant_file(raw_dir: Path) -> Path | None:
    for name in RELEVANT_CANDIDATES:
        for base in (raw_dir, raw_dir / "test_data"):
            if (base / name).is_file():
                return base / name
    return None


def _index_files(
    directory: Path, pattern: re.Pattern, stats: ParseStats, what: str
) -> dict[str, dict[int, Path]]:
    """{hash: {k: path}} for the files of one kind; names that do not parse are counted, not fatal."""
    index: dict[str, dict[int, Path]] = {}
    if not directory.is_dir():
        stats.notes[f"missing_{what}_dir"] += 1
        log.warning("%s: no %s directory; examples there get no %ss", directory, what, what)
        return index
    for path in sorted(directory.iterdir()):
        m = pattern.match(path.name)
        if not m:
            stats.notes[f"unrecognised_{what}_files"] += 1
            continue
        index.setdefault(m["hash"], {})[int(m["k"])] = path
    return index


def iter_msmo(
    raw_dir: str | Path,
    split: str,
    stats: ParseStats,
    relevant_file: str | Path | None = None,
    relevant_loader: RelevantLoader = load_relevant,
    source: str = SOURCE,
) -> ParseStream:
    """Yield an Example (or a Dropped record) per article file of `split`, in a deterministic order."""
    raw_dir = Path(raw_dir)
    dirs = split_dirs(raw_dir, split)
    if not dirs:
        log.warning("%s: no directory for split %r", raw_dir, split)
    relevant: dict[str, list[str]] = {}
    if split == "test":
        path = Path(relevant_file) if relevant_file else find_relevant_file(raw_dir)
        if path is not None:
            if not path.is_absolute() and not path.exists():
                path = safe_join(raw_dir, str(path))
            relevant = relevant_loader(path)
            stats.notes["relevant_annotations"] = len(relevant)
    seen: set[str] = set()
    n = 0
    for d in dirs:
        images = _index_files(d / "img", _IMG_RE, stats, "image")
        captions = _index_files(d / "caption", _CAP_RE, stats, "caption")
        article_dir = d / "article"
        if not article_dir.is_dir():
            raise RawDataError(
                f"{article_dir}: missing article directory (MSMO layout: <split>/article/<HASH>.txt)"
            )
        for path in sorted(article_dir.glob("*.txt")):
            n += 1
            aid = path.stem
            if dropped := admit_id(aid, str(path), seen):
                yield dropped
                continue
            sections = parse_article(read_text(path, stats, aid))
            if "summary" not in sections:
                yield Dropped(aid, "missing_summary", f"{path}: no @summary marker")
                continue
            body, highlights = sections.get("body", []), sections["summary"]
            if dropped := empty_text_drop(aid, body, highlights, str(path)):
                yield dropped
                continue
            img, cap = images.get(aid, {}), captions.get(aid, {})
            if set(img) != set(cap):
                stats.notes["image_caption_mismatch"] += 1
            ks = sorted(img)  # features need the image; a caption without its image is counted above
            caps = []
            for k in ks:
                cap_path = cap.get(k)
                caps.append(" ".join(read_text(cap_path, stats, f"{aid}_{k}").split()) if cap_path else "")
            yield Example(
                id=aid,
                document=" ".join(body),
                summary=" ".join(highlights),
                split=split,
                source=source,
                image_ids=[str(k) for k in ks],
                image_paths=[str(img[k]) for k in ks],
                captions=caps,
                relevant_images=relevant.get(aid, []),
                title=" ".join(sections.get("title", [])),
                extra={"summary_sentences": highlights},
            )
    stats.split_sizes[split] = n
    log.info("msmo %s: %d article files in %s", split, n, ", ".join(d.name for d in dirs) or "(none)")
