"""The LightningModule: CLIP-BART trained with label-smoothed cross-entropy + image guidance.

SCST plugs in through `mmsum.training.callbacks.SCSTCallback`: once it switches the module into
SCST mode (`self.scst_step_fn`), `training_step` delegates to it; the loss math lives in
`mmsum.training.scst` and the decoding in `mmsum.training.decoding`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torchmetrics import MeanMetric

from mmsum.models.clip_bart import ClipBartForConditionalGeneration, shift_tokens_right
from mmsum.scoring.metrics import RougeMetric

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")


def label_smoothed_nll(logits: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Token-mean cross-entropy with label smoothing, ignoring -100 labels."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=-100,
        label_smoothing=epsilon,
    )


def linear_warmup_decay(warmup_steps: int, total_steps: int):
    """LR multiplier: linear 0→1 over `warmup_steps`, then linear 1→0 at `total_steps`."""

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        if total_steps <= warmup_steps:
            return 1.0
        return max(0.0, (total_steps - step) / (total_steps - warmup_steps))

    return factor


class ClipBartModule(L.LightningModule):
    def __init__(
        self,
        bart_name_or_path: str,
        visual_feat_dim: int,
        max_images: int = 10,
        guidance_loss_weight: float = 6.0,
        label_smoothing: float = 0.1,
        lr: float = 3e-5,
        weight_decay: float = 0.01,
        betas: tuple[float, float] = (0.9, 0.999),
        warmup_steps: int = 0,
        total_steps: int = 1000,
        clip_model: str | None = None,
        generation: dict[str, Any] | None = None,
        predictions_path: str | None = None,
        build_tiny_bart: bool | dict[str, Any] = False,
    ):
        super().__init__()
        self.save_hyperparameters()
        if build_tiny_bart:
            from mmsum.models.tiny import build_configured_bart

            build_configured_bart(bart_name_or_path, build_tiny_bart)
        self.model = ClipBartForConditionalGeneration.from_bart(
            bart_name_or_path,
            visual_feat_dim=visual_feat_dim,
            max_images=max_images,
            guidance_loss_weight=guidance_loss_weight,
            clip_model=clip_model,
        )
        self.generation = dict(generation or {"num_beams": 1, "max_new_tokens": 32})
        self.tokenizer = None  # set by the training entry point (needed to decode)
        self.val_rouge = RougeMetric(ROUGE_KEYS)
        # A sum/count metric, so the DDP mean equals the single-process mean (uneven shards too).
        self.val_loss = MeanMetric()
        self.test_rouge = RougeMetric(ROUGE_KEYS)
        self._test_records: list[dict[str, Any]] = []
        # Set by SCSTCallback: (module, batch, batch_idx) -> loss. A plain callable attribute, so the
        # callback's reward encoders never become parameters or checkpoint entries of this module.
        self.scst_step_fn = None

    # ---- forward / losses -------------------------------------------------------------------
    def model_inputs(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {k: batch[k] for k in ("input_ids", "attention_mask", "image_features", "image_mask")}

    def xe_loss(self, batch: dict[str, Any], encoded: tuple | None = None) -> dict[str, torch.Tensor]:
        """Label-smoothed XE + weighted guidance loss (the XE part of every phase, SCST included).

        `encoded`: `model.encode(...)`'s output for this batch, when the caller (SCST) reuses the
        encoder pass for other decoder passes; computed here otherwise.
        """
        model, config = self.model, self.model.config
        if encoded is None:
            encoded = model.encode(**self.model_inputs(batch))
        encoder_outputs, joint_mask, guidance_logits = encoded
        # Decoder inputs rather than `labels`, so the model does not also compute an unsmoothed LM loss.
        decoder_input_ids = shift_tokens_right(
            batch["labels"], config.pad_token_id, config.decoder_start_token_id
        )
        out = model(
            encoder_outputs=encoder_outputs, attention_mask=joint_mask, decoder_input_ids=decoder_input_ids
        )
        lm = label_smoothed_nll(out.logits, batch["labels"], self.hparams.label_smoothing)
        guidance = model.guidance_loss(guidance_logits, batch["guidance_labels"], joint_mask)
        loss = lm + self.hparams.guidance_loss_weight * guidance
        return {"loss": loss, "lm_loss": lm, "guidance_loss": guidance}

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        if self.scst_step_fn is not None:
            return self.scst_step_fn(self, batch, batch_idx)
        losses = self.xe_loss(batch)
        bs = batch["input_ids"].shape[0]
        self.log("train/loss", losses["loss"], prog_bar=True, batch_size=bs)
        self.log("train/lm_loss", losses["lm_loss"], batch_size=bs)
        self.log("train/guidance_loss", losses["guidance_loss"], batch_size=bs)
        return losses["loss"]

    # ---- generation -------------------------------------------------------------------------
    @torch.no_grad()
    def generate_summaries(self, batch: dict[str, Any], **overrides) -> list[str]:
        kwargs = {**self.generation, **overrides}
        tokens = self.model.generate(**self.model_inputs(batch), **kwargs)
        return self.tokenizer.batch_decode(
            tokens, skip_special_tokens=True, clean_up_tokenization_spaces=True
        )

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        losses = self.xe_loss(batch)
        bs = batch["input_ids"].shape[0]
        self.val_loss.update(losses["loss"].detach(), weight=bs)
        summaries = self.generate_summaries(batch)
        self.last_val_summaries = summaries  # read by SCSTCallback to score validation rewards
        self.val_rouge.update(summaries, batch["ref_text"])

    def on_validation_epoch_end(self) -> None:
        self.log("val/loss", self.val_loss.compute())
        self.val_loss.reset()
        for key, value in self.val_rouge.compute().items():
            self.log(f"val/{key}", value, prog_bar=key == "rouge2", sync_dist=False)
        self.val_rouge.reset()

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        summaries = self.generate_summaries(batch)
        self.test_rouge.update(summaries, batch["ref_text"])
        probs = self.model.image_guidance(**self.model_inputs(batch)).cpu()
        for i, example_id in enumerate(batch["ids"]):
            image_ids = batch["image_ids"][i]
            image_probs = [round(float(p), 6) for p in probs[i, : len(image_ids)]]
            ranked = sorted(range(len(image_ids)), key=lambda k: -image_probs[k])[:3]
            self._test_records.append(
                {
                    "id": example_id,
                    "summary": summaries[i],
                    "reference": batch["ref_text"][i],
                    "top_images": [{"image_id": image_ids[k], "prob": image_probs[k]} for k in ranked],
                    "image_probs": image_probs,
                    "relevant_positions": [
                        k for k, image_id in enumerate(image_ids) if image_id in batch["relevant_images"][i]
                    ],
                }
            )

    def on_test_epoch_end(self) -> None:
        for key, value in self.test_rouge.compute().items():
            self.log(f"test/{key}", value)
        self.test_rouge.reset()
        records = sorted(gather_objects(self._test_records), key=lambda r: r["id"])
        self._test_records = []
        if any(r["relevant_positions"] for r in records):
            from mmsum.scoring.image_precision import image_precision

            ip = image_precision(
                [r["image_probs"] for r in records], [r["relevant_positions"] for r in records]
            )
            # Identical on every rank (records are gathered), so no further sync is needed.
            self.log("test/image_precision", ip["ip"])
            self.log("test/image_precision_all", ip["ip_all"])
        if self.trainer.is_global_zero and self.hparams.predictions_path:
            path = Path(self.hparams.predictions_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                for record in records:
                    record = {
                        k: v for k, v in record.items() if k not in ("image_probs", "relevant_positions")
                    }
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")

    # ---- optimisation -----------------------------------------------------------------------
    def configure_optimizers(self):
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if param.ndim < 2 or "norm" in name.lower() else decay).append(param)
        optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": self.hparams.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=self.hparams.lr,
            betas=tuple(self.hparams.betas),
        )
        schedule = LambdaLR(
            optimizer, linear_warmup_decay(self.hparams.warmup_steps, self.hparams.total_steps)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def gather_objects(records: list[Any]) -> list[Any]:
    """All ranks' records on every rank (a no-op without torch.distributed)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return list(records)
    gathered: list[list[Any]] = [None] * torch.distributed.get_world_size()  # type: ignore[list-item]
    torch.distributed.all_gather_object(gathered, records)
    seen, merged = set(), []
    for part in gathered:
        for record in part:
            # DistributedSampler pads the last batch with repeats; keep one copy of each example.
            key = record["id"] if isinstance(record, dict) else id(record)
            if key not in seen:
                seen.add(key)
                merged.append(record)
    return merged
