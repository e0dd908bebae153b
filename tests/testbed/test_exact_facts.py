"""The exact factuality metrics on hand-written summaries of a hand-written scene."""

from __future__ import annotations

import math

import pytest

from mmsum.scoring.exact_facts import (
    ABSENT,
    CONTRADICTED,
    SUPPORTED,
    Mention,
    aggregate,
    exact_facts,
    parse_entities,
    parse_objects,
    score_predictions,
)


def _obj(color: str, shape: str, count: int) -> dict:
    return {"color": color, "shape": shape, "count": count}


# Image 1: three white triangles; image 2: a rocket photo. The document also states two green
# squares that no image shows (an "earlier" fact).
SCENE = {
    "person": "James Wilson",
    "organisation": "the World Bank",
    "city": "Sydney",
    "weekday": "Tuesday",
    "images": [
        {"image_id": "1", "kind": "drawn", "objects": [_obj("white", "triangle", 3)]},
        {"image_id": "2", "kind": "photo", "objects": [_obj("white", "rocket", 1)]},
    ],
    "facts": [
        {"fact_id": "f0", "kind": "object", "obj": _obj("white", "triangle", 3), "image_id": "1"},
        {"fact_id": "f1", "kind": "photo", "obj": _obj("white", "rocket", 1), "image_id": "2"},
        {"fact_id": "f2", "kind": "place", "obj": None, "image_id": None},
        {"fact_id": "f3", "kind": "unpictured", "obj": _obj("green", "square", 2), "image_id": None},
    ],
}


def test_parse_objects_reads_counts_colours_shapes_and_photo_subjects():
    got = parse_objects("Wilson showed Three white triangles and red stars . The show also had a rocket .")
    assert got == [Mention("triangle", "white", 3), Mention("star", "red", None), Mention("rocket")]
    assert parse_objects("Wilson opened a show in Sydney .") == []


def test_parse_entities_prefers_full_names_and_counts_each_span_once():
    assert parse_entities("John Smith met Smith of the World Bank in Paris on Monday") == [
        "John Smith", "Smith", "World Bank", "Paris", "Monday",
    ]  # fmt: skip


def test_faithful_summary():
    r = exact_facts("James Wilson showed three white triangles in Sydney .", SCENE)
    assert r.status == [SUPPORTED] and r.image_precision == 1.0 and r.document_precision == 1.0
    assert not r.image_hallucinated and r.hallucinated_entities == []


def test_document_fact_not_in_the_images_is_an_image_hallucination():
    r = exact_facts("Wilson showed two green squares .", SCENE)
    assert r.status == [ABSENT] and r.image_precision == 0.0 and r.document_precision == 1.0
    assert r.image_hallucinated


def test_wrong_count_or_colour_contradicts_the_image():
    r = exact_facts("It had four white triangles and three red triangles and one blue circle .", SCENE)
    assert r.status == [CONTRADICTED, CONTRADICTED, ABSENT]
    assert r.image_precision == 0.0 and r.document_precision == 0.0
    assert r.as_dict()["n_contradicted"] == 2 and r.as_dict()["n_absent"] == 1


def test_partial_mentions_check_only_what_they_state_and_images_can_be_restricted():
    r = exact_facts("White triangles and a rocket .", SCENE)
    assert r.status == [SUPPORTED, SUPPORTED]
    only_first = exact_facts("White triangles and a rocket .", SCENE, image_ids=["1"])
    assert only_first.status == [SUPPORTED, ABSENT] and only_first.image_precision == 0.5


def test_entity_hallucinations():
    r = exact_facts("Anna Martin of Google showed three white triangles in Sydney on Tuesday .", SCENE)
    assert sorted(r.hallucinated_entities) == ["Anna Martin", "Google"] and not r.image_hallucinated
    assert exact_facts("Wilson of the World Bank .", SCENE).hallucinated_entities == []
    lowercased = exact_facts("anna martin showed three white triangles in sydney .", SCENE)  # uncased model
    assert lowercased.entities == ["Anna Martin", "Sydney"] and lowercased.hallucinated_entities == [
        "Anna Martin"
    ]


def test_aggregate_and_score_predictions():
    preds = [
        {"id": "a", "summary": "Wilson showed three white triangles ."},
        {"id": "b", "summary": "Wilson showed two green squares and three white triangles ."},
        {"id": "c", "summary": "Maria Garcia opened a show ."},
        {"id": "zzz", "summary": "no record: skipped"},
    ]
    records = {k: {"scene": SCENE, "image_ids": ["1", "2"]} for k in "abc"}
    rows, agg = score_predictions(preds, records)
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    assert math.isnan(rows[2]["image_fact_precision"])
    assert agg["image_fact_precision"] == pytest.approx(0.75)  # (1 + 0.5) / 2: "c" has no object
    assert agg["document_fact_precision"] == 1.0
    assert agg["image_hallucination_rate"] == pytest.approx(1 / 3)
    assert agg["entity_hallucination_rate"] == pytest.approx(1 / 3)
    assert agg["object_coverage"] == pytest.approx(2 / 3)
    assert math.isnan(aggregate([])["image_fact_precision"])
