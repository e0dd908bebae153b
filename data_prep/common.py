"""What every parser shares: drop records, per-split parse statistics, safe paths, tolerant reads."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mmsum.data.schema import Example

SPLITS = ("train", "validation", "test")


class RawDataError(ValueError):
    """The raw release is unusable as a whole (wrong layout, misaligned files): a clear, early error."""


class UnsafePathError(ValueError):
    """An id or annotation entry would reach outside the raw directory."""


@dataclass
class Dropped:
    """A raw example that does not make it into the prepared split, and why."""

    id: str
    reason: str
    detail: str = ""


@dataclass
class ParseStats:
    """Counts of non-fatal problems met while parsing one split (they go into the manifest)."""

    decode_replacements: dict[str, int] = field(default_factory=dict)  # id -> files decoded with U+FFFD
    skipped_lines: list[str] = field(default_factory=list)  # "file:line: why" for malformed records
    notes: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # named counters
    split_sizes: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "decode_replacements": dict(sorted(self.decode_replacements.items())),
            "skipped_lines": list(self.skipped_lines),
            "notes": dict(sorted(self.notes.items())),
        }


ParseItem = Example | Dropped
ParseStream = Iterator[ParseItem]

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def check_id(value: str, what: str) -> str:
    """Ids become file names: refuse separators, `..` and anything else that could leave the raw dir."""
    if not isinstance(value, str) or not _SAFE_ID.match(value) or ".." in value:
        raise UnsafePathError(
            f"{what}: unsafe id {value!r} (ids must be plain file-name tokens, no '/' or '..')"
        )
    return value


def admit_id(example_id: str, where: str, seen: set[str]) -> Dropped | None:
    """The drop record for an id that is unsafe or already seen in this split; else remember it."""
    try:
        check_id(example_id, where)
    except UnsafePathError as e:
        return Dropped(example_id, "unsafe_id", str(e))
    if example_id in seen:
        return Dropped(
            example_id, "duplicate_id", f"{where}: id {example_id!r} was already seen in this split"
        )
    seen.add(example_id)
    return None


def empty_text_drop(example_id: str, document: str | list, summary: str | list, where: str) -> Dropped | None:
    """The drop record for an example whose document or summary is empty."""
    if not document:
        return Dropped(example_id, "empty_body", f"{where}: example {example_id!r} has an empty document")
    if not summary:
        return Dropped(example_id, "empty_summary", f"{where}: example {example_id!r} has an empty summary")
    return None


def safe_join(root: Path, *parts: str) -> Path:
    """root/parts, guaranteed (after resolving `..` and symlinks) to stay inside root."""
    path = root.joinpath(*parts)
    resolved, base = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([resolved, base]) != base:
        raise UnsafePathError(f"{path} resolves outside the raw directory {root}")
    return path


def read_text(path: Path, stats: ParseStats | None = None, example_id: str = "") -> str:
    """UTF-8 with replacement for bad bytes (MSMO has a few); replacements are counted, never silent."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        if stats is not None:
            stats.decode_replacements[example_id or str(path)] = text.count("\ufffd")
            stats.notes["files_decoded_with_replacement"] += 1
        return text
