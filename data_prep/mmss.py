"""MMSS (Li et al. 2018) raw release -> Example records.

Layout: `corpus/{train,dev,test}_sent.txt` (source sentence) and `corpus/{split}_title.txt`
(headline), line-aligned; the image of line i (0-based) is `images_{split}/{i+1}.jpg`. `valid` is
accepted for `dev` (file and image-dir names). Ids are `<split>-<i+1>` (the image number).
A line-count mismatch between the two files is a clear, early error: the alignment is the data.
"""

from __future__ import annotations

import logging
from pathlib import Path

from data_prep.common import ParseStats, ParseStream, RawDataError, empty_text_drop
from mmsum.data.schema import Example

log = logging.getLogger(__name__)
SOURCE = "mmss"
_NAMES = {"train": ("train",), "validation": ("dev", "valid"), "test": ("test",)}


def _find(raw_dir: Path, split: str) -> tuple[str, Path, Path, Path]:
    corpus = raw_dir / "corpus"
    for name in _NAMES[split]:
        sent, title = corpus / f"{name}_sent.txt", corpus / f"{name}_title.txt"
        if sent.is_file() or title.is_file():
            if not (sent.is_file() and title.is_file()):
                missing = title if sent.is_file() else sent
                raise RawDataError(f"MMSS {split}: {missing} is missing (its partner file exists)")
            images = raw_dir / f"images_{name}"
            if not images.is_dir():
                alt = [raw_dir / f"images_{n}" for n in _NAMES[split] if (raw_dir / f"images_{n}").is_dir()]
                images = alt[0] if alt else images
            return name, sent, title, images
    raise RawDataError(
        f"MMSS {split}: none of " + ", ".join(f"{corpus}/{n}_sent.txt" for n in _NAMES[split]) + " exists"
    )


def _lines(path: Path, stats: ParseStats) -> list[str]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        stats.decode_replacements[str(path.name)] = text.count("\ufffd")
        stats.notes["files_decoded_with_replacement"] += 1
    lines = text.split("\n")
    if lines and lines[-1] == "":  # the final newline does not start another line
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def iter_mmss(raw_dir: str | Path, split: str, stats: ParseStats, source: str = SOURCE) -> ParseStream:
    raw_dir = Path(raw_dir)
    name, sent_path, title_path, image_dir = _find(raw_dir, split)
    sents, titles = _lines(sent_path, stats), _lines(title_path, stats)
    if len(sents) != len(titles):
        raise RawDataError(
            f"MMSS {split}: {sent_path} has {len(sents)} lines but {title_path} has {len(titles)}; "
            "the files must be line-aligned"
        )
    if not image_dir.is_dir():
        stats.notes["missing_image_dir"] += 1
        log.warning("MMSS %s: no image directory %s; examples are kept without images", split, image_dir)
    stats.split_sizes[split] = len(sents)
    log.info("mmss %s: %d lines (%s)", split, len(sents), name)
    for i, (sent, title) in enumerate(zip(sents, titles)):
        eid = f"{split}-{i + 1}"
        sent, title = " ".join(sent.split()), " ".join(title.split())
        if dropped := empty_text_drop(eid, sent, title, f"{sent_path}:{i + 1} / {title_path}:{i + 1}"):
            yield dropped
            continue
        # Always listed: a missing/corrupt image is found, counted and removed by the feature step.
        image = image_dir / f"{i + 1}.jpg"
        yield Example(
            id=eid,
            document=sent,
            summary=title,
            split=split,
            source=source,
            image_ids=[str(i + 1)],
            image_paths=[str(image)],
            captions=[""],
            extra={"summary_sentences": [title], "line": i + 1},
        )
