"""Concrete rewards: CLIPBERTScore and ROUGE."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

import torch

from mmsum.rewards.base import check_rows
from mmsum.scoring.rougescore import rouge

log = logging.getLogger(__name__)


class RougeReward:
    """Per-summary ROUGE F-measure (rouge_score-exact, stemmed) against the reference summary."""

    def __init__(self, key: str = "rouge2", use_stemmer: bool = True) -> None:
        self.key = key
        self.use_stemmer = use_stemmer
        self.name = key
        rouge(["x"], ["x"], [key])  # validate the key now, not at the first training step

    @torch.no_grad()
    def __call__(self, batch_view: Mapping[str, Any], summaries: list[str]) -> torch.Tensor:
        check_rows(batch_view, summaries, "ref_text")
        return rouge(summaries, list(batch_view["ref_text"]), [self.key], self.use_stemmer)[self.key].float()


class ClipBertScoreReward:
    """CLIPBERTScore of each summary against its document and images (Wan & Bansal 2022).

    Examples without images: CLIP-S is not applicable, so the reward falls back to BERT-S and
    counts it (`num_missing_image`), warning the first time; with no_image="error" it raises.
    Encoders are loaded by name/path (Hydra-friendly) unless scorer objects are passed in; they
    live in plain attributes, never inside a LightningModule's state.
    """

    name = "clipbertscore"

    def __init__(
        self,
        clip_model: str = "RN50x64",
        clip_pretrained: str | None = "openai",
        bert_model: str = "roberta-large-mnli",
        bert_num_layers: int | None = 10,
        alpha: float = 0.25,
        no_image: Literal["bert", "error"] = "bert",
        device: str | None = None,
        bert_batch_size: int = 64,
        bert_cache_max_bytes: int = 1 << 30,
        clip_options: Mapping[str, Any] | None = None,
        scorer: Any = None,
    ) -> None:
        if no_image not in ("bert", "error"):
            raise ValueError(f"no_image must be 'bert' or 'error', got {no_image!r}")
        if scorer is None:
            from mmsum.scoring.bertscore import BertScorer
            from mmsum.scoring.clipbert import ClipBertScore
            from mmsum.scoring.clipscore import ClipScorer, ClipSOptions

            clip = ClipScorer(
                clip_model, clip_pretrained, device=device, options=ClipSOptions(**(clip_options or {}))
            )
            bert = BertScorer(
                bert_model,
                bert_num_layers,
                batch_size=bert_batch_size,
                device=device,
                cache_max_bytes=bert_cache_max_bytes,
            )
            scorer = ClipBertScore(clip, bert, alpha=alpha, no_image="bert")
        self.scorer = scorer
        self.no_image = no_image
        self.num_missing_image = 0
        self.num_scored = 0
        self.last_result = None  # the parts (CLIP-S, BERT-S) of the last call, for logging

    @torch.no_grad()
    def __call__(self, batch_view: Mapping[str, Any], summaries: list[str]) -> torch.Tensor:
        check_rows(batch_view, summaries)
        feats = batch_view["image_features"]
        mask = batch_view.get("image_mask")
        result = self.scorer(feats, mask, summaries, list(batch_view["doc_text"]))
        missing = int(result.missing_image.sum())
        if missing:
            if self.no_image == "error":
                ids = [
                    i for i, m in zip(batch_view.get("ids", range(len(summaries))), result.missing_image) if m
                ]
                raise ValueError(
                    f"CLIPBERTScore reward: no images for examples {ids[:10]} (no_image='error')"
                )
            if self.num_missing_image == 0:
                log.warning(
                    "CLIPBERTScore reward: example(s) without images; using BERT-S alone for them (counted)"
                )
            self.num_missing_image += missing
        self.num_scored += len(summaries)
        self.last_result = result
        return result.score.float()
