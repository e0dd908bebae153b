"""LightningDataModule over prepared split directories `<data_dir>/{train,validation,test}`."""

from __future__ import annotations

from pathlib import Path

import lightning as L
from torch.utils.data import DataLoader, Dataset

from mmsum.data.collate import ClipBartCollator
from mmsum.data.prepared import PreparedSplit, PreparedSplitError, load_prepared

SPLITS = ("train", "validation", "test")


class _Subset(Dataset):
    def __init__(self, split: PreparedSplit, limit: int | None):
        self.split = split
        self.length = len(split) if not limit else min(limit, len(split))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        return self.split[index]


class PreparedDataModule(L.LightningDataModule):
    def __init__(
        self,
        data_dir: str,
        tokenizer_name_or_path: str | None = None,
        batch_size: int = 8,
        eval_batch_size: int | None = None,
        num_workers: int = 0,
        max_source_len: int = 512,
        max_target_len: int = 128,
        max_images: int = 10,
        limit_train_examples: int | None = None,
        limit_eval_examples: int | None = None,
        test_split: str = "test",
    ):
        super().__init__()
        self.data_dir = Path(data_dir)
        self.tokenizer_name_or_path = tokenizer_name_or_path
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.num_workers = num_workers
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len
        self.max_images = max_images
        if test_split not in SPLITS:
            raise ValueError(f"test_split must be one of {SPLITS}, got {test_split!r}")
        # What `trainer.test` evaluates: the test split, or e.g. train to measure rewards there.
        self.test_split = test_split
        self.limits = {
            "train": limit_train_examples,
            "validation": limit_eval_examples,
            "test": limit_eval_examples,
        }
        self.tokenizer = None
        self._splits: dict[str, PreparedSplit] = {}

    def split(self, name: str) -> PreparedSplit:
        """Open one split (cached); a missing split is a `PreparedSplitError` naming its path."""
        if name not in self._splits:
            self._splits[name] = load_prepared(self.data_dir / name)
        return self._splits[name]

    @property
    def feature_dim(self) -> int:
        return self.split("train").feature_dim

    @property
    def clip_model(self) -> str | None:
        return self.split("train").clip_model

    def check_features(self, visual_feat_dim: int, clip_model: str | None = None) -> None:
        """Refuse features from another CLIP than the model was built for."""
        for name in SPLITS:
            path = self.data_dir / name
            if not path.exists():
                continue
            split = self.split(name)
            split.check_feature_dim(visual_feat_dim)
            if clip_model and split.clip_model and split.clip_model != clip_model:
                raise PreparedSplitError(
                    f"{path}: features come from CLIP {split.clip_model!r} but the model was trained on "
                    f"{clip_model!r} features"
                )

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is None:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_name_or_path)
        self.collator = ClipBartCollator(
            self.tokenizer, self.max_source_len, self.max_target_len, self.max_images
        )

    def _loader(self, name: str, shuffle: bool, limit: int | None, batch_size: int) -> DataLoader:
        return DataLoader(
            _Subset(self.split(name), limit),
            batch_size=batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=self.collator,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True, self.limits["train"], self.batch_size)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", False, self.limits["validation"], self.eval_batch_size)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_split, False, self.limits["test"], self.eval_batch_size)
