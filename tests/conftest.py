"""Shared fixtures: every model is tiny and built locally; nothing is downloaded."""

from __future__ import annotations

import os

# No hub access on these machines: fail fast instead of retrying for a minute.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    """A per-session cache dir for the tiny models (built once, loaded many times)."""
    path = tmp_path_factory.mktemp("mmsum-cache")
    os.environ["MMSUM_CACHE"] = str(path)
    return path


@pytest.fixture(scope="session")
def tiny_clip_path(model_cache) -> Path:
    from mmsum.models.tiny import ensure_tiny_clip

    return ensure_tiny_clip(model_cache / "tiny-clip" / "open_clip_model.pt")


@pytest.fixture(scope="session")
def tiny_bart_path(model_cache) -> Path:
    from mmsum.models.tiny import ensure_tiny_bart

    return ensure_tiny_bart(model_cache / "tiny-bart")


@pytest.fixture(scope="session")
def demo_data_root(tmp_path_factory, tiny_clip_path) -> Path:
    """A small demo world, prepared through the real data-prep path: `<root>/demo/prepared/<split>`."""
    from data_prep.pipeline import prepare
    from mmsum.models.tiny import TINY_CLIP_NAME

    root = tmp_path_factory.mktemp("data")
    prepare(
        "demo",
        root / "demo" / "raw",
        root / "demo" / "prepared",
        clip_model_name=TINY_CLIP_NAME,
        clip_pretrained=str(tiny_clip_path),
        demo_sizes=(48, 12, 12),
        progress=False,
    )
    return root
