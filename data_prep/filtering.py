"""Entity filtering of reference summaries (Nan et al. 2021), batched over a chunk of examples.

Each summary sentence is run through spaCy NER separately (one nlp.pipe call per chunk); a sentence
naming an entity that the source document does not support is removed, and an example left with
no sentence is dropped. Because the kept sentences' entities were all checked, the references'
entity precision-to-source after filtering is 1.0 by construction (the manifest records it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mmsum.data.schema import Example
from mmsum.scoring.entities import MatchMode, SourceIndex, extract_entities, load_ner, split_sentences


@dataclass
class FilterStats:
    """Totals over a split; summed chunk by chunk (so a resumed run reports the same numbers)."""

    examples_seen: int = 0
    sentences_seen: int = 0
    sentences_removed: int = 0
    examples_changed: int = 0
    examples_dropped: int = 0
    entities_before: int = 0
    supported_before: int = 0
    entities_after: int = 0
    supported_after: int = 0
    removed_entities: dict[str, int] = field(default_factory=dict)  # entity text -> times removed

    def add(self, other: FilterStats) -> None:
        for name in self.__dataclass_fields__:
            if name == "removed_entities":
                for k, v in other.removed_entities.items():
                    self.removed_entities[k] = self.removed_entities.get(k, 0) + v
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self, top_entities: int = 20) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "removed_entities"}
        d["entity_precision_source_before"] = (
            self.supported_before / self.entities_before if self.entities_before else None
        )
        d["entity_precision_source_after"] = (
            self.supported_after / self.entities_after if self.entities_after else None
        )
        top = sorted(self.removed_entities.items(), key=lambda kv: (-kv[1], kv[0]))[:top_entities]
        d["most_removed_entities"] = dict(top)
        return d


def summary_sentences(ex: Example) -> list[str]:
    given = ex.extra.get("summary_sentences")
    return list(given) if given else split_sentences(ex.summary)


def filter_examples(
    examples: Sequence[Example],
    apply: bool = True,
    match: MatchMode = "token",
    nlp: Any | None = None,
    batch_size: int = 256,
    n_process: int = 1,
) -> tuple[list[Example | None], FilterStats]:
    """Filter each example's summary; returns (same-length list with None for dropped, stats).

    With `apply=False` nothing is changed but the precision numbers are still measured, so an
    evaluation split's manifest says how faithful its references are.
    """
    stats = FilterStats()
    sents = [summary_sentences(ex) for ex in examples]
    flat = [s for ss in sents for s in ss]
    ents = (
        extract_entities(flat, nlp or load_ner(), batch_size=batch_size, n_process=n_process) if flat else []
    )
    out: list[Example | None] = []
    pos = 0
    for ex, ss in zip(examples, sents):
        index = SourceIndex(ex.document, match)
        kept: list[str] = []
        all_ok = True
        for s in ss:
            e = ents[pos]
            pos += 1
            ok = [index.supports(x) for x in e]
            stats.entities_before += len(e)
            stats.supported_before += sum(ok)
            if all(ok) or not apply:
                kept.append(s)
                stats.entities_after += len(e)
                stats.supported_after += sum(ok)
            else:
                all_ok = False
                stats.sentences_removed += 1
                for x, good in zip(e, ok):
                    if not good:
                        stats.removed_entities[x.text] = stats.removed_entities.get(x.text, 0) + 1
        stats.examples_seen += 1
        stats.sentences_seen += len(ss)
        if not kept:
            stats.examples_dropped += 1
            out.append(None)
            continue
        if not all_ok:
            stats.examples_changed += 1
            extra = dict(ex.extra, summary_sentences=kept, summary_unfiltered=ex.summary)
            ex = Example(**{**ex.to_dict(), "summary": " ".join(kept), "extra": extra})
        out.append(ex)
    return out, stats
