"""Multimodal WikiHow (Yang et al. 2021, VGSI) raw release -> Example records, one per step.

Layout: `WikihowText_data.json` is JSON Lines, one article per line with `file_id`, `goal`,
`goal_description`, `category_hierarchy` and `methods[{name, steps[{headline, description, img,
img_license, step_id}]}]` (`step_id = <file_id>_<method>_<step>`); images are
`wiki_images/{train,test}/<step_id>.png`. Example: document = the step's description, summary =
its headline, image = the step's picture.

Splits are by (file_id, method) group, so steps of one method never straddle splits:
`n_valid_groups` / `n_test_groups` groups (default 6,000 each) drawn deterministically — group
ids are sorted before a seeded shuffle (the authors' code depended on Python set order) — or
taken from user-supplied id lists (`split_files={"validation": PATH, "test": PATH}`, one group id
`<file_id>_<method index>` or whole `file_id` per line). Malformed JSON lines are skipped and
reported with their line numbers (they cannot be assigned to a split).
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from data_prep.common import Dropped, ParseStats, ParseStream, RawDataError, admit_id, empty_text_drop
from mmsum.data.schema import Example

log = logging.getLogger(__name__)
SOURCE = "wikihow"
TEXT_FILE = "WikihowText_data.json"
IMAGE_DIRS = ("train", "test")


@dataclass
class _Scan:
    articles: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (line number, record)
    skipped: list[str] = field(default_factory=list)
    group_split: dict[str, str] = field(default_factory=dict)


def _group_id(file_id: str, method_index: int) -> str:
    return f"{file_id}_{method_index}"


def _read_id_list(path: str | Path) -> set[str]:
    return {line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()}


@lru_cache(maxsize=4)
def _scan(
    text_path: str, stamp: tuple[int, int], n_valid: int, n_test: int, seed: int, split_files: tuple | None
) -> _Scan:
    """Read the JSONL once per run (all splits share it) and assign every group to a split."""
    scan = _Scan()
    with open(text_path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8", errors="replace"))
                if (
                    not isinstance(rec, dict)
                    or not isinstance(rec.get("methods"), list)
                    or "file_id" not in rec
                ):
                    raise ValueError("not an article object with file_id and a methods list")
            except (json.JSONDecodeError, ValueError) as e:
                scan.skipped.append(f"{Path(text_path).name}:{line_no}: {str(e)[:120]}")
                continue
            scan.articles.append((line_no, rec))
    groups = sorted(
        {_group_id(str(rec["file_id"]), m) for _, rec in scan.articles for m in range(len(rec["methods"]))}
    )
    if split_files:
        lists = {split: _read_id_list(p) for split, p in split_files}
        for g in groups:
            file_id = g.rsplit("_", 1)[0]
            scan.group_split[g] = next(
                (s for s in ("test", "validation") if g in lists.get(s, ()) or file_id in lists.get(s, ())),
                "train",
            )
    else:
        shuffled = list(groups)
        random.Random(seed).shuffle(shuffled)
        if n_valid + n_test > len(shuffled):
            log.warning(
                "wikihow: %d groups, fewer than %d validation + %d test", len(shuffled), n_valid, n_test
            )
        for i, g in enumerate(shuffled):
            scan.group_split[g] = "test" if i < n_test else "validation" if i < n_test + n_valid else "train"
    return scan


def _scan_for(
    raw_dir: Path, text_file: str, n_valid_groups: int, n_test_groups: int, seed: int, split_files
) -> _Scan:
    path = raw_dir / text_file
    if not path.is_file():
        raise RawDataError(f"WikiHow: {path} not found (expected the JSON Lines text release)")
    st = path.stat()
    files = tuple(sorted((k, str(v)) for k, v in split_files.items())) if split_files else None
    return _scan(str(path), (st.st_mtime_ns, st.st_size), n_valid_groups, n_test_groups, seed, files)


def iter_wikihow(
    raw_dir: str | Path,
    split: str,
    stats: ParseStats,
    text_file: str = TEXT_FILE,
    n_valid_groups: int = 6000,
    n_test_groups: int = 6000,
    seed: int = 0,
    split_files: dict[str, str] | None = None,
    source: str = SOURCE,
) -> ParseStream:
    raw_dir = Path(raw_dir)
    scan = _scan_for(raw_dir, text_file, n_valid_groups, n_test_groups, seed, split_files)
    if split == "train":  # reported once, with the split that would have held most of them
        stats.skipped_lines.extend(scan.skipped)
    image_dirs = [raw_dir / "wiki_images" / d for d in IMAGE_DIRS]
    if not any(d.is_dir() for d in image_dirs):
        stats.notes["missing_image_dir"] += 1
    seen: set[str] = set()
    n = 0
    for line_no, rec in scan.articles:
        file_id = str(rec["file_id"])
        for m, method in enumerate(rec["methods"]):
            if scan.group_split[_group_id(file_id, m)] != split:
                continue
            steps = method.get("steps") if isinstance(method, dict) else None
            if not isinstance(steps, list):
                stats.skipped_lines.append(f"{text_file}:{line_no}: method {m} has no steps list")
                continue
            for s, step in enumerate(steps):
                n += 1
                sid = (
                    str(step.get("step_id", f"{file_id}_{m}_{s}"))
                    if isinstance(step, dict)
                    else f"{file_id}_{m}_{s}"
                )
                if not isinstance(step, dict):
                    yield Dropped(sid, "malformed_step", f"{text_file}:{line_no}: step {s} is not an object")
                    continue
                if dropped := admit_id(sid, f"{text_file}:{line_no}", seen):
                    yield dropped
                    continue
                desc = " ".join(str(step.get("description") or "").split())
                head = " ".join(str(step.get("headline") or "").split())
                if dropped := empty_text_drop(sid, desc, head, f"{text_file}:{line_no}"):
                    yield dropped
                    continue
                image = next((d / f"{sid}.png" for d in image_dirs if (d / f"{sid}.png").exists()), None)
                image = (
                    image or image_dirs[0] / f"{sid}.png"
                )  # absent: counted as missing by the feature step
                yield Example(
                    id=sid,
                    document=desc,
                    summary=head,
                    split=split,
                    source=source,
                    image_ids=[sid],
                    image_paths=[str(image)],
                    captions=[""],
                    title=str(rec.get("goal") or ""),
                    extra={
                        "summary_sentences": [head],
                        "group": _group_id(file_id, m),
                        "method": str(method.get("name") or ""),
                        "category_hierarchy": rec.get("category_hierarchy") or [],
                    },
                )
    stats.split_sizes[split] = n
    log.info("wikihow %s: %d steps", split, n)


def dataset_level_report(raw_dir: str | Path, **options: Any) -> dict[str, Any]:
    """What belongs to no split: malformed lines, and the group counts per split."""
    keys = ("text_file", "n_valid_groups", "n_test_groups", "seed", "split_files")
    opts = {k: v for k, v in options.items() if k in keys}
    scan = _scan_for(
        Path(raw_dir), opts.get("text_file", TEXT_FILE), opts.get("n_valid_groups", 6000),
        opts.get("n_test_groups", 6000), opts.get("seed", 0), opts.get("split_files"),
    )  # fmt: skip
    counts: dict[str, int] = {}
    for s in scan.group_split.values():
        counts[s] = counts.get(s, 0) + 1
    return {
        "malformed_lines": list(scan.skipped),
        "articles": len(scan.articles),
        "groups": dict(sorted(counts.items())),
    }
