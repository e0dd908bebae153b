"""Fixtures for the seed metrics (BaryScore, FaithScore) and the meta-evaluation harness."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    from mmsum.models.tiny import minilm_dir

    return minilm_dir()


@pytest.fixture(scope="session")
def bary_minilm(minilm_path):
    """One MiniLM BaryScorer for the session (loading is the slow part)."""
    from mmsum.scoring.baryscore import BaryScorer

    return BaryScorer(minilm_path, last_layers=5, device="cpu", batch_size=8)
