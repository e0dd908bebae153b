"""Batching: tokenise text, pad images to `max_images` with a mask, -100 on label padding."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class ClipBartCollator:
    """Turns a list of prepared-split records into a model batch.

    Text is padded to the longest example in the batch (not to `max_source_len`); image slots are
    padded to `max_images` and marked in `image_mask`; label padding is -100 so the loss skips it.
    """

    def __init__(self, tokenizer, max_source_len: int, max_target_len: int, max_images: int):
        self.tokenizer = tokenizer
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len
        self.max_images = max_images

    def __call__(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        documents = [r["document"] for r in records]
        summaries = [r["summary"] for r in records]
        source = self.tokenizer(
            documents, max_length=self.max_source_len, truncation=True, padding="longest", return_tensors="pt"
        )
        target = self.tokenizer(
            summaries, max_length=self.max_target_len, truncation=True, padding="longest", return_tensors="pt"
        )
        labels = target["input_ids"].masked_fill(target["attention_mask"] == 0, -100)

        batch_size = len(records)
        feature_dim = records[0]["image_features"].shape[-1] if records else 0
        image_features = torch.zeros(batch_size, self.max_images, feature_dim)
        image_mask = torch.zeros(batch_size, self.max_images, dtype=torch.bool)
        guidance_labels = torch.zeros(batch_size, self.max_images, dtype=torch.long)
        for i, record in enumerate(records):
            feats = np.asarray(record["image_features"], dtype=np.float32)[: self.max_images]
            n = feats.shape[0]
            image_features[i, :n] = torch.from_numpy(feats)
            image_mask[i, :n] = True
            guidance_labels[i, :n] = torch.as_tensor(list(record.get("guidance_labels", []))[:n] or [0] * n)
        return {
            "input_ids": source["input_ids"],
            "attention_mask": source["attention_mask"],
            "image_features": image_features,
            "image_mask": image_mask,
            "labels": labels,
            "guidance_labels": guidance_labels,
            "doc_text": documents,
            "ref_text": summaries,
            "ids": [r["id"] for r in records],
            "image_ids": [list(r.get("image_ids", []))[: self.max_images] for r in records],
            "relevant_images": [list(r.get("relevant_images", [])) for r in records],
        }
