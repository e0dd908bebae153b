"""The prepared-split contract and batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from mmsum.data import PreparedSplitError, PreparedSplitWriter, load_prepared
from mmsum.data.collate import ClipBartCollator
from tests.helpers import write_synthetic_split


def test_round_trip_and_fp16_features(tmp_path):
    split = write_synthetic_split(tmp_path / "train", n=10, feature_dim=8, max_images=3)
    ds = load_prepared(split)
    assert len(ds) == 10 and ds.feature_dim == 8 and ds.clip_model == "synthetic/none"
    total_rows = sum(len(r["image_ids"]) for r in ds)
    assert ds.manifest["num_feature_rows"] == total_rows
    record = ds[3]
    assert record["image_features"].shape == (len(record["image_ids"]), 8)
    assert record["image_features"].dtype == np.float32


def test_writer_is_atomic_on_error(tmp_path):
    target = tmp_path / "train"
    with pytest.raises(RuntimeError):
        with PreparedSplitWriter(target, feature_dim=4) as writer:
            writer.add({"id": "a", "image_ids": ["0"]}, np.zeros((1, 4)))
            raise RuntimeError("killed")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_writer_rejects_wrong_feature_shape_naming_the_example(tmp_path):
    with PreparedSplitWriter(tmp_path / "s", feature_dim=4) as writer:
        with pytest.raises(PreparedSplitError, match="'bad'.*expected \\(2, 4\\)"):
            writer.add({"id": "bad", "image_ids": ["0", "1"]}, np.zeros((1, 4)))
        writer.finish({})


def test_missing_and_truncated_splits_are_clear_errors(tmp_path):
    with pytest.raises(PreparedSplitError, match="prepared split not found: .*nowhere"):
        load_prepared(tmp_path / "nowhere")
    split = write_synthetic_split(tmp_path / "train", n=4, feature_dim=8, max_images=2)
    features = split / "image_features.f16"
    features.write_bytes(features.read_bytes()[:-2])
    with pytest.raises(PreparedSplitError, match="image_features.f16"):
        load_prepared(split)


def test_feature_dim_check_names_path_and_dims(tmp_path):
    ds = load_prepared(write_synthetic_split(tmp_path / "train", n=2, feature_dim=8))
    with pytest.raises(PreparedSplitError, match=r"train: image features are 8-d .* expects 1024-d"):
        ds.check_feature_dim(1024)


def test_collate_pads_text_images_and_labels(tmp_path, tiny_bart_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_bart_path)
    ds = load_prepared(write_synthetic_split(tmp_path / "train", n=6, feature_dim=8, max_images=3, seed=3))
    records = [ds[i] for i in range(6)]
    batch = ClipBartCollator(tokenizer, max_source_len=12, max_target_len=6, max_images=4)(records)
    assert batch["input_ids"].shape[1] <= 12 and batch["labels"].shape[1] <= 6
    assert batch["image_features"].shape == (6, 4, 8)
    for i, record in enumerate(records):
        n = len(record["image_ids"])
        assert batch["image_mask"][i].tolist() == [True] * n + [False] * (4 - n)
        assert torch.equal(batch["image_features"][i, :n], torch.from_numpy(record["image_features"]))
        assert torch.count_nonzero(batch["image_features"][i, n:]) == 0
    # Label padding is -100, so the loss skips it; real tokens are kept.
    target = tokenizer([r["summary"] for r in records], max_length=6, truncation=True, padding="longest")
    for i, mask in enumerate(target["attention_mask"]):
        assert (batch["labels"][i] != -100).tolist() == [bool(m) for m in mask]


def test_test_split_option_evaluates_another_split(tmp_path, tiny_bart_path):
    from mmsum.data.datamodule import PreparedDataModule
    from tests.helpers import write_synthetic_dataset

    root = write_synthetic_dataset(tmp_path, n_train=10, n_eval=4, feature_dim=8)
    dm = PreparedDataModule(
        str(root), str(tiny_bart_path), batch_size=4, eval_batch_size=5, test_split="train"
    )
    dm.setup()
    ids = [i for batch in dm.test_dataloader() for i in batch["ids"]]
    assert ids == [r["id"] for r in load_prepared(root / "train")]
    with pytest.raises(ValueError, match="test_split must be one of"):
        PreparedDataModule(str(root), test_split="dev")
