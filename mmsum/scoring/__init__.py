"""Factuality and overlap metrics: CLIP-S, RefCLIP-S, BERT-S, CLIPBERTScore, ROUGE, entities, IP.

Names are resolved lazily (PEP 562) so that `import mmsum.scoring` stays cheap and does not need
every optional piece (e.g. the spaCy-based entity metrics) to be importable.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "rouge": "mmsum.scoring.rougescore",
    "rouge_scores": "mmsum.scoring.rougescore",
    "BertScorer": "mmsum.scoring.bertscore",
    "ClipScorer": "mmsum.scoring.clipscore",
    "ClipFeatureMismatch": "mmsum.scoring.clipscore",
    "split_sentences": "mmsum.scoring.clipscore",
    "ClipBertScore": "mmsum.scoring.clipbert",
    "ClipBertScoreResult": "mmsum.scoring.clipbert",
    "LogisticCombiner": "mmsum.scoring.combiners",
    "MLPCombiner": "mmsum.scoring.combiners",
    "load_combiner": "mmsum.scoring.combiners",
    "image_precision": "mmsum.scoring.image_precision",
    "RougeMetric": "mmsum.scoring.metrics",
    "MeanScoreMetric": "mmsum.scoring.metrics",
    "load_clip": "mmsum.scoring.encoders",
    "load_text_encoder": "mmsum.scoring.encoders",
    "EncoderLoadError": "mmsum.scoring.encoders",
    "entity_metrics": "mmsum.scoring.entities",
    "BaryScorer": "mmsum.scoring.baryscore",
    "BaryScoreResult": "mmsum.scoring.baryscore",
    "FaithScorer": "mmsum.scoring.faithscore",
    "FaithScoreResult": "mmsum.scoring.faithscore",
    "exact_facts": "mmsum.scoring.exact_facts",
    "ExactFacts": "mmsum.scoring.exact_facts",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mmsum.scoring' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ImportError(f"mmsum.scoring.{name} is not available: {e}") from e
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
