"""CLIPBERTScore (Wan & Bansal 2022): alpha * CLIP-S + (1 - alpha) * BERT-S, alpha = 0.25."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from mmsum.scoring.bertscore import BertScorer
from mmsum.scoring.clipscore import ClipScorer

NoImage = Literal["bert", "nan", "error"]


@dataclass
class ClipBertScoreResult:
    score: torch.Tensor  # [B] CLIPBERTScore
    clip_s: torch.Tensor  # [B] CLIP-S (NaN: example has no image)
    bert_s: torch.Tensor  # [B] BERT-S (BERTScore precision, summary vs document)

    @property
    def missing_image(self) -> torch.Tensor:
        return torch.isnan(self.clip_s)


class ClipBertScore:
    """Combines a ClipScorer and a BertScorer. Holds no weights of its own (not an nn.Module).

    no_image: what the score is for an example without images — "bert" (BERT-S alone, the
    default: the document is still judged), "nan" (not applicable) or "error".
    """

    def __init__(
        self,
        clip_scorer: ClipScorer,
        bert_scorer: BertScorer,
        alpha: float = 0.25,
        no_image: NoImage = "bert",
    ):
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.clip = clip_scorer
        self.bert = bert_scorer
        self.alpha = float(alpha)
        self.no_image = no_image

    def __call__(
        self,
        image_features: torch.Tensor,
        image_mask: torch.Tensor | None,
        summaries: Sequence[str],
        documents: Sequence[str],
        **clip_options,
    ) -> ClipBertScoreResult:
        clip_s = self.clip.clip_s(image_features, image_mask, summaries, **clip_options)
        bert_s = self.bert.score(summaries, documents)[0]
        score = self.alpha * clip_s + (1.0 - self.alpha) * bert_s
        missing = torch.isnan(clip_s)
        if missing.any():
            if self.no_image == "error":
                raise ValueError(f"{int(missing.sum())} example(s) have no images; CLIP-S is not applicable")
            if self.no_image == "bert":
                score = torch.where(missing, bert_s, score)
        return ClipBertScoreResult(score, clip_s, bert_s)
