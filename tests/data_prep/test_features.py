"""CLIP image features: batched encoding equals one-at-a-time, and opt-in JPEG draft decoding stays close."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from data_prep.features import CORRUPT, MISSING, OK, encode_image_files
from mmsum.models.tiny import TINY_CLIP_NAME
from mmsum.scoring.encoders import load_clip
from scripts.bench.bench_prep import reference_features, write_photos


@pytest.fixture(scope="module")
def clip(tiny_clip_path):
    return load_clip(TINY_CLIP_NAME, str(tiny_clip_path), "cpu")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_batched_features_equal_one_image_at_a_time_and_draft_stays_close(clip, tmp_path):
    paths = write_photos(tmp_path, 12)  # real photos, 300x451 to 872x1000, saved as JPEG
    reference = reference_features(clip, paths)
    exact, status = encode_image_files(clip, paths, batch_size=5)
    assert status == [OK] * 12
    np.testing.assert_allclose(exact, reference, atol=1e-5)
    drafted, _ = encode_image_files(clip, paths, batch_size=5, jpeg_draft=True)
    assert not np.array_equal(drafted, exact)  # the photos are big enough for draft decoding to act
    assert _cosines(drafted, exact).min() >= 0.99999


def test_draft_is_a_no_op_for_small_jpegs_and_other_formats(clip, tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (100, 120, 3), dtype=np.uint8)  # < 2x the 64-px CLIP input
    Image.fromarray(pixels).save(tmp_path / "small.jpg", quality=90)
    Image.fromarray(np.tile(pixels, (4, 4, 1))).save(tmp_path / "big.png")
    paths = [str(tmp_path / "small.jpg"), str(tmp_path / "big.png"), str(tmp_path / "gone.jpg")]
    (tmp_path / "empty.jpg").write_bytes(b"")
    paths.append(str(tmp_path / "empty.jpg"))
    exact, status = encode_image_files(clip, paths)
    drafted, status_draft = encode_image_files(clip, paths, jpeg_draft=True)
    assert status == status_draft == [OK, OK, MISSING, CORRUPT]
    assert np.array_equal(exact, drafted)


def test_prep_records_the_draft_setting(tmp_path):
    from data_prep.pipeline import PrepConfig

    exact = PrepConfig("demo", str(tmp_path), str(tmp_path))
    drafted = PrepConfig("demo", str(tmp_path), str(tmp_path), jpeg_draft=True)
    assert exact.output_config()["jpeg_draft"] is False and drafted.output_config()["jpeg_draft"] is True
    assert exact.config_hash() != drafted.config_hash()  # cached chunks never mix the two
