"""The prepared-split format: what data prep writes and training, evaluation and scoring read.

A split directory holds
  examples.jsonl       one JSON object per example (id, document, summary, image_ids, captions,
                       relevant_images, guidance_labels, feature_rows, ...)
  image_features.f16   raw little-endian float16 matrix [num_feature_rows, feature_dim]
  manifest.json        counts, drop reasons, CLIP model name and feature dim, config hash, versions

It is written into a temporary sibling directory and renamed into place, so a split directory
either exists whole or not at all.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

EXAMPLES_FILE = "examples.jsonl"
FEATURES_FILE = "image_features.f16"
MANIFEST_FILE = "manifest.json"
FEATURE_DTYPE = np.dtype("<f2")


class PreparedSplitError(ValueError):
    """A prepared split is missing, incomplete or does not fit what reads it."""


class PreparedSplitWriter:
    """Streams examples and their image features into a split directory, atomically.

    Use as a context manager: on a clean exit the temp directory is renamed to `split_dir`;
    on an exception it is removed and `split_dir` is left untouched.
    """

    def __init__(self, split_dir: str | os.PathLike, feature_dim: int):
        self.split_dir = Path(split_dir)
        self.feature_dim = int(feature_dim)
        self.num_examples = 0
        self.num_feature_rows = 0
        self._tmp: Path | None = None

    def __enter__(self) -> PreparedSplitWriter:
        self.split_dir.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(prefix=f".{self.split_dir.name}.tmp-", dir=self.split_dir.parent))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self._tmp, 0o777 & ~umask)  # mkdtemp makes it 0700; a split is shared data
        self._examples = open(self._tmp / EXAMPLES_FILE, "w", encoding="utf-8")
        self._features = open(self._tmp / FEATURES_FILE, "wb")
        return self

    def add(self, example: dict[str, Any], image_features: np.ndarray | None = None) -> None:
        """Append one example; `image_features` is [n_images, feature_dim], one row per image id."""
        n_images = len(example.get("image_ids", []))
        feats = np.zeros((0, self.feature_dim), FEATURE_DTYPE) if image_features is None else image_features
        feats = np.asarray(feats)
        if feats.ndim != 2 or feats.shape != (n_images, self.feature_dim):
            raise PreparedSplitError(
                f"example {example.get('id')!r}: image_features has shape {feats.shape}, "
                f"expected ({n_images}, {self.feature_dim})"
            )
        record = dict(example)
        record["feature_rows"] = list(range(self.num_feature_rows, self.num_feature_rows + n_images))
        self._examples.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._features.write(feats.astype(FEATURE_DTYPE).tobytes())
        self.num_feature_rows += n_images
        self.num_examples += 1

    def add_file(self, name: str, text: str) -> None:
        """Write a side file (e.g. a long list of dropped ids) into the split, moved in with it."""
        assert self._tmp is not None, "use PreparedSplitWriter as a context manager"
        if Path(name).name != name or name in (EXAMPLES_FILE, FEATURES_FILE, MANIFEST_FILE):
            raise PreparedSplitError(f"side file name must be a plain, unreserved file name: {name!r}")
        (self._tmp / name).write_text(text, encoding="utf-8")

    def finish(self, manifest: dict[str, Any]) -> Path:
        """Write the manifest and move the split into place (replacing an older one)."""
        assert self._tmp is not None, "use PreparedSplitWriter as a context manager"
        self._examples.close()
        self._features.close()
        manifest = dict(manifest)
        manifest.update(
            num_examples=self.num_examples,
            num_feature_rows=self.num_feature_rows,
            feature_dim=self.feature_dim,
        )
        (self._tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if self.split_dir.exists():
            old = self.split_dir.with_name(f".{self.split_dir.name}.old-{os.getpid()}")
            os.replace(self.split_dir, old)
            os.replace(self._tmp, self.split_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self._tmp, self.split_dir)
        self._tmp = None
        return self.split_dir

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._tmp is not None:
            self._examples.close()
            self._features.close()
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
            if exc_type is None:
                raise PreparedSplitError(f"{self.split_dir}: writer closed without finish(manifest)")


class PreparedSplit:
    """Random-access reader of a prepared split; image features are memory-mapped."""

    def __init__(self, split_dir: str | os.PathLike):
        self.split_dir = Path(split_dir)
        manifest_path = self.split_dir / MANIFEST_FILE
        if not manifest_path.is_file():
            hint = "run `python -m data_prep dataset=... out_dir=...` first"
            if self.split_dir.exists():
                raise PreparedSplitError(
                    f"{self.split_dir} is not a prepared split: no {MANIFEST_FILE} ({hint})"
                )
            raise PreparedSplitError(f"prepared split not found: {self.split_dir} ({hint})")
        self.manifest: dict[str, Any] = json.loads(manifest_path.read_text())
        self.feature_dim = int(self.manifest["feature_dim"])
        self.examples: list[dict[str, Any]] = []
        with open(self.split_dir / EXAMPLES_FILE, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                try:
                    self.examples.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise PreparedSplitError(f"{self.split_dir / EXAMPLES_FILE}:{line_no}: {e}") from e
        rows = int(self.manifest["num_feature_rows"])
        features_path = self.split_dir / FEATURES_FILE
        expected_bytes = rows * self.feature_dim * FEATURE_DTYPE.itemsize
        if features_path.stat().st_size != expected_bytes:
            raise PreparedSplitError(
                f"{features_path}: {features_path.stat().st_size} bytes, manifest says {rows} rows x "
                f"{self.feature_dim} fp16 = {expected_bytes} bytes"
            )
        self.image_features = (
            np.memmap(features_path, dtype=FEATURE_DTYPE, mode="r", shape=(rows, self.feature_dim))
            if rows
            else np.zeros((0, self.feature_dim), FEATURE_DTYPE)
        )

    @property
    def clip_model(self) -> str | None:
        """The open_clip `model/pretrained` pair that made the image features."""
        return self.manifest.get("clip_model")

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> dict[str, Any]:
        record = dict(self.examples[index])
        rows = record.get("feature_rows", [])
        record["image_features"] = np.asarray(self.image_features[rows], dtype=np.float32).reshape(
            len(rows), self.feature_dim
        )
        record.setdefault("guidance_labels", [0] * len(rows))
        record.setdefault("relevant_images", [])
        return record

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self[i]

    def check_feature_dim(self, expected: int, what: str = "the model") -> None:
        if self.feature_dim != expected:
            raise PreparedSplitError(
                f"{self.split_dir}: image features are {self.feature_dim}-d "
                f"(from CLIP {self.clip_model!r}) but {what} expects {expected}-d; "
                "re-prepare the data with the matching CLIP model or set model.visual_feat_dim"
            )


def load_prepared(split_dir: str | os.PathLike) -> PreparedSplit:
    """Open a prepared split directory (see module docstring for the layout)."""
    return PreparedSplit(split_dir)
