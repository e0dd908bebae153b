"""Image-guidance labels: which of an example's images the summary is "about" (0/1 per image).

Two methods, recorded in each example as `guidance_method`:
  rouge  (Zhu et al. 2020): rank images by ROUGE-1 F + ROUGE-2 F (stemmer on) between the image's
         caption and the reference summary;
  clip   (Wan & Bansal 2022): rank images by CLIP-S = w * max(cos(image, summary), 0) with w = 2.5.
The top k images (ties broken by image order) with a score above `min_score` get label 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

METHODS = ("rouge", "clip")
CLIP_S_WEIGHT = 2.5


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rouge2"], use_stemmer=True)


def rouge_scores(captions: Sequence[str], reference: str) -> list[float]:
    scorer = _rouge()
    out = []
    for cap in captions:
        if not cap.strip():
            out.append(0.0)
            continue
        s = scorer.score(reference, cap)
        out.append(s["rouge1"].fmeasure + s["rouge2"].fmeasure)
    return out


def clip_scores(image_features: np.ndarray, text_feature: np.ndarray) -> list[float]:
    """CLIP-S of each image row against one text feature (both unnormalised CLIP embeddings)."""
    if len(image_features) == 0:
        return []
    img = image_features / np.maximum(np.linalg.norm(image_features, axis=1, keepdims=True), 1e-8)
    txt = text_feature / max(float(np.linalg.norm(text_feature)), 1e-8)
    return [CLIP_S_WEIGHT * max(float(c), 0.0) for c in img @ txt]


def top_k_labels(scores: Sequence[float], k: int = 3, min_score: float = 0.0) -> list[int]:
    """1 for the k best-scoring images (stable: earlier images win ties), 0 elsewhere, image order."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    chosen = {i for i in order[:k] if scores[i] > min_score}
    return [1 if i in chosen else 0 for i in range(len(scores))]
