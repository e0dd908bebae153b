"""Exact factuality on the generated demo world: every fact is known, so nothing is estimated.

A summary is parsed with the world's lexicon (numbers, colours, shapes, photo subjects, people,
organisations, cities, weekdays) into object mentions ("two red circles", "a rocket") and entity
mentions. Each object mention is checked against the example's scene record (the `scene` field
data prep writes into demo records, see `data_prep.demo_world.scene_record`):

  image-fact precision     object mentions that some image of the example shows / object mentions
  document-fact precision  object mentions the document states (pictured or not) / object mentions
  image hallucination      the summary states at least one object fact the images do not show:
                           contradicted (an image shows the same colour and shape in another count,
                           or the same shape and count in another colour) or absent altogether
  entity hallucinations    named entities the article does not contain

A mention may leave out the count ("red circles") or the colour ("three circles"); what it leaves
out is not checked. Summaries stating no object get NaN precisions (not applicable) and count as
not hallucinating; `object_coverage` (share of summaries with an object mention) keeps a model that
simply stops naming objects from looking faithful.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

SUPPORTED, CONTRADICTED, ABSENT = "supported", "contradicted", "absent"


@dataclass(frozen=True)
class Lexicon:
    """The words that name facts in a world. `Lexicon.demo()` is the generated demo world's."""

    numbers: Mapping[str, int]
    colors: Sequence[str]
    shapes: Sequence[str]
    photo_subjects: Mapping[str, str]  # word in text -> the scene object's shape ("cup" -> "cup")
    people: Sequence[str]
    organisations: Sequence[str]
    cities: Sequence[str]
    weekdays: Sequence[str]

    @classmethod
    @cache
    def demo(cls) -> Lexicon:
        from data_prep import demo_world as w  # the generator owns the words; import late (no cycle)

        subjects = {obj: obj for _, _, obj in w.PHOTOS.values()}
        colors = sorted(set(w.COLORS) | {c for _, c, _ in w.PHOTOS.values()})
        return cls(
            numbers={v: k for k, v in w.NUMBER_WORDS.items()},
            colors=colors,
            shapes=list(w.SHAPES),
            photo_subjects=subjects,
            people=list(w.PEOPLE),
            organisations=[o.removeprefix("the ") for o in w.ORGS],
            cities=list(w.CITIES),
            weekdays=list(w.WEEKDAYS),
        )

    @property
    def object_pattern(self) -> re.Pattern[str]:
        return _object_pattern(tuple(self.numbers), tuple(self.colors), tuple(self.shapes))

    def entity_names(self) -> list[str]:
        """Every nameable entity, longest first (so "John Smith" wins over "Smith")."""
        surnames = [p.split()[-1] for p in self.people]
        names = [*self.people, *surnames, *self.organisations, *self.cities, *self.weekdays]
        return sorted(set(names), key=lambda s: (-len(s), s))


@cache
def _object_pattern(numbers: tuple[str, ...], colors: tuple[str, ...], shapes: tuple[str, ...]) -> re.Pattern:
    def alt(words: tuple[str, ...]) -> str:  # longest first: "four" must not lose to a prefix
        return "|".join(sorted(map(re.escape, words), key=len, reverse=True))

    return re.compile(
        rf"\b(?:(?P<count>{alt(numbers)})\s+)?(?:(?P<color>{alt(colors)})\s+)?(?P<shape>{alt(shapes)})s?\b",
        re.IGNORECASE,
    )


@dataclass(frozen=True)
class Mention:
    """An object fact as stated; None = the summary left that attribute out."""

    shape: str
    color: str | None = None
    count: int | None = None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (
            obj["shape"] == self.shape
            and self.color in (None, obj["color"])
            and self.count in (None, int(obj["count"]))
        )

    def near_miss(self, obj: Mapping[str, Any]) -> bool:
        """Same object with exactly one stated attribute wrong (a contradiction, not an invention)."""
        if obj["shape"] != self.shape:
            return False
        wrong = int(self.color not in (None, obj["color"])) + int(self.count not in (None, int(obj["count"])))
        return wrong == 1


def parse_objects(summary: str, lexicon: Lexicon | None = None) -> list[Mention]:
    """The object facts a text states: drawn objects ("two red circles") and photo subjects."""
    lex = lexicon or Lexicon.demo()
    out: list[Mention] = []
    for m in lex.object_pattern.finditer(summary):
        count = lex.numbers[m["count"].lower()] if m["count"] else None
        out.append(Mention(m["shape"].lower(), m["color"].lower() if m["color"] else None, count))
    for word, subject in lex.photo_subjects.items():
        if re.search(rf"\b{re.escape(word)}s?\b", summary, re.IGNORECASE):
            out.append(Mention(subject))
    return out


def parse_entities(summary: str, lexicon: Lexicon | None = None) -> list[str]:
    """Named entities of the world's lexicon in text order; a longer name wins its span ("John Smith",
    not "Smith"), each span counted once."""
    lex = lexicon or Lexicon.demo()
    taken = [False] * len(summary)
    found: list[tuple[int, str]] = []
    for name in lex.entity_names():
        # case-insensitive: an uncased tokenizer (the tiny BART's MiniLM one) lowercases the output
        for m in re.finditer(rf"\b{re.escape(name)}\b", summary, re.IGNORECASE):
            if not any(taken[m.start() : m.end()]):
                taken[m.start() : m.end()] = [True] * (m.end() - m.start())
                found.append((m.start(), name))
    return [name for _, name in sorted(found)]


def scene_entities(scene: Mapping[str, Any]) -> set[str]:
    """The entities the article names: person (and surname), organisation, city, weekday."""
    person = scene["person"]
    return {
        person,
        person.split()[-1],
        scene["organisation"].removeprefix("the "),
        scene["city"],
        scene["weekday"],
    }


def _objects(scene: Mapping[str, Any], image_ids: Iterable[str] | None) -> list[dict]:
    keep = None if image_ids is None else {str(i) for i in image_ids}
    return [o for im in scene["images"] if keep is None or im["image_id"] in keep for o in im["objects"]]


def _document_objects(scene: Mapping[str, Any]) -> list[dict]:
    return [f["obj"] for f in scene["facts"] if f.get("obj")]


@dataclass
class ExactFacts:
    """Exact factuality of one summary."""

    mentions: list[Mention]
    status: list[str]  # per mention: supported | contradicted | absent (w.r.t. the images)
    in_document: list[bool]
    entities: list[str]
    hallucinated_entities: list[str] = field(default_factory=list)

    @property
    def image_precision(self) -> float:
        return _ratio(sum(s == SUPPORTED for s in self.status), len(self.status))

    @property
    def document_precision(self) -> float:
        return _ratio(sum(self.in_document), len(self.in_document))

    @property
    def image_hallucinated(self) -> bool:
        return any(s != SUPPORTED for s in self.status)

    def as_dict(self) -> dict[str, Any]:
        return {
            "image_fact_precision": self.image_precision,
            "document_fact_precision": self.document_precision,
            "image_hallucinated": float(self.image_hallucinated),
            "n_object_facts": len(self.mentions),
            "n_contradicted": sum(s == CONTRADICTED for s in self.status),
            "n_absent": sum(s == ABSENT for s in self.status),
            "entity_hallucinations": len(self.hallucinated_entities),
            "hallucinated_entities": list(self.hallucinated_entities),
        }


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def exact_facts(
    summary: str,
    scene: Mapping[str, Any],
    image_ids: Iterable[str] | None = None,
    lexicon: Lexicon | None = None,
) -> ExactFacts:
    """Check one summary against its scene; `image_ids` limits the images (those the model saw)."""
    lex = lexicon or Lexicon.demo()
    pictured = _objects(scene, image_ids)
    documented = _document_objects(scene)
    mentions = parse_objects(summary, lex)
    status = []
    for m in mentions:
        if any(m.matches(o) for o in pictured):
            status.append(SUPPORTED)
        elif any(m.near_miss(o) for o in pictured):
            status.append(CONTRADICTED)
        else:
            status.append(ABSENT)
    entities = parse_entities(summary, lex)
    known = scene_entities(scene)
    return ExactFacts(
        mentions=mentions,
        status=status,
        in_document=[any(m.matches(o) for o in documented) for m in mentions],
        entities=entities,
        hallucinated_entities=[e for e in entities if e not in known],
    )


def _nanmean(xs: Sequence[float]) -> float:
    vals = [x for x in xs if not math.isnan(x)]
    return sum(vals) / len(vals) if vals else math.nan


def aggregate(results: Sequence[ExactFacts]) -> dict[str, float]:
    """Averages over examples: precisions skip summaries without object facts (NaN)."""
    n = len(results)
    return {
        "image_fact_precision": _nanmean([r.image_precision for r in results]),
        "document_fact_precision": _nanmean([r.document_precision for r in results]),
        "image_hallucination_rate": _ratio(sum(r.image_hallucinated for r in results), n),
        "entity_hallucinations": _ratio(sum(len(r.hallucinated_entities) for r in results), n),
        "entity_hallucination_rate": _ratio(sum(bool(r.hallucinated_entities) for r in results), n),
        "object_coverage": _ratio(sum(bool(r.mentions) for r in results), n),
        "n": float(n),
    }


def score_predictions(
    predictions: Sequence[Mapping[str, Any]], records: Mapping[str, Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Per-example rows and averages for `predictions` ({id, summary}) against prepared `records`
    by id (each with `scene` and `image_ids`). Predictions without a scene are skipped."""
    rows, results = [], []
    for p in predictions:
        rec = records.get(p["id"])
        if rec is None or "scene" not in rec:
            continue
        r = exact_facts(p["summary"], rec["scene"], rec.get("image_ids"))
        results.append(r)
        rows.append({"id": p["id"], "summary": p["summary"], **r.as_dict()})
    return rows, aggregate(results)
