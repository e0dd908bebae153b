"""Image precision (IP): is the top-1 predicted image among the human-marked relevant ones?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def _top1(prediction: Any, mask: torch.Tensor | None, ranked: bool) -> Any:
    """The predicted image: first of a ranking, or argmax of scores over real images."""
    if ranked:
        return prediction[0] if len(prediction) else None
    s = torch.as_tensor(prediction, dtype=torch.float32).flatten()
    if mask is not None:
        s = s.masked_fill(~mask.bool().to(s.device), float("-inf"))
    if not s.numel() or not torch.isfinite(s).any():
        return None
    return int(torch.argmax(s))


def image_precision(
    predictions: Sequence[Any] | torch.Tensor,
    relevant: Sequence[Sequence[Any]],
    image_mask: torch.Tensor | None = None,
    ranked: bool | None = None,
) -> dict[str, float]:
    """IP over examples with at least one relevant image (`ip`, the MSMO protocol) and over all
    examples (`ip_all`, where an example without relevant images counts as a miss).

    predictions, per example, either
      * scores over that example's images (1-D, or [B, M] with image_mask [B, M] marking real
        images, so a padded slot is never the prediction); `relevant` holds image *indices*; or
      * a ranking of image ids, best first (`ranked=True`, or auto-detected when the entries are
        strings); `relevant` holds image ids.
    Also returned under the long names `image_precision` / `image_precision_all`.
    """
    if len(predictions) != len(relevant):
        raise ValueError(f"{len(predictions)} predictions but {len(relevant)} relevance lists")
    hits: list[float] = []
    with_rel: list[float] = []
    for b, (pred, rel) in enumerate(zip(predictions, relevant)):
        is_ranked = ranked
        if is_ranked is None:
            is_ranked = not isinstance(pred, torch.Tensor) and any(isinstance(x, str) for x in pred)
        top = _top1(pred, None if image_mask is None else image_mask[b], is_ranked) if len(pred) else None
        if top is None:
            hit = 0.0
        elif is_ranked:
            hit = float(str(top) in {str(r) for r in rel})
        else:
            hit = float(top in {int(r) for r in rel})
        hits.append(hit)
        if len(rel):
            with_rel.append(hit)
    ip = sum(with_rel) / len(with_rel) if with_rel else float("nan")
    ip_all = sum(hits) / len(hits) if hits else float("nan")
    return {
        "ip": ip,
        "ip_all": ip_all,
        "image_precision": ip,
        "image_precision_all": ip_all,
        "n_with_relevant": float(len(with_rel)),
        "n": float(len(hits)),
    }
