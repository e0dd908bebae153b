"""Entity support matching, the summary filter and Nan et al.'s entity metrics on hand-written cases."""

from __future__ import annotations

import pytest

from mmsum.data.schema import Example
from mmsum.scoring.entities import (
    Entity,
    SourceIndex,
    entity_metrics,
    extract_entities,
    is_supported,
    load_ner,
)

DOC = "Barack Obama met staff of the World Health Organization in New York. Also present: Dr. Smith."


@pytest.mark.parametrize(
    "entity, supported",
    [
        ("Barack Obama", True),
        ("Obama", True),  # shortened name
        ("President Barack Obama", True),  # longer name: a sub-n-gram matches
        ("Michelle Obama", True),  # the Nan et al. rule: any n-gram (here "Obama") suffices
        ("OBAMA", True),  # case-insensitive
        ("new york", True),
        ("York", True),
        ("the World Bank", False),  # "the" and "world" ... only "world" is a non-stop unigram: see below
        ("Al", False),  # token boundaries: "Al" is not in "Also"
        ("The Hague", False),  # "The" is a stop word, "Hague" absent
        ("Angela Merkel", False),
    ],
)
def test_support_token_mode(entity, supported):
    if entity == "the World Bank":
        # "World" occurs in the document as a token, so by the n-gram rule it is supported.
        assert is_supported(entity, DOC)
        return
    assert is_supported(entity, DOC) is supported


def test_substring_compat_mode():
    assert not is_supported("Al", DOC, match="token")
    assert is_supported("Al", DOC, match="substring")  # the reference code's behaviour
    assert SourceIndex(DOC, "substring").supports(Entity("ork", "GPE"))
    with pytest.raises(ValueError):
        SourceIndex(DOC, match="fuzzy")


def test_stop_word_unigrams_never_support():
    assert not is_supported("The Who", "the band played who knows what")
    assert is_supported("The Who", "the who played")  # the full bigram matches


@pytest.fixture(scope="module")
def nlp():
    return load_ner()


def test_extract_entities_keeps_only_listed_types(nlp):
    ents = extract_entities(["Barack Obama visited Paris on Monday with 3 Germans."], nlp)[0]
    labels = {e.text: e.label for e in ents}
    assert labels.get("Barack Obama") == "PERSON" and labels.get("Paris") == "GPE"
    assert "Monday" not in labels and "3" not in labels  # DATE / CARDINAL are not kept
    assert labels.get("Germans") == "NORP"


def test_filter_decisions(nlp):
    from data_prep.filtering import filter_examples

    doc = "Barack Obama visited Chicago on Monday. Obama met staff of Google there."

    def ex(eid: str, sents: list[str]) -> Example:
        return Example(eid, doc, " ".join(sents), "train", "t", extra={"summary_sentences": sents})

    exs = [
        ex("keep", ["Obama visited Chicago ."]),
        ex("cut", ["Obama visited chicago .", "Angela Merkel agreed ."]),  # case differs from the source
        Example("drop", doc, "Angela Merkel visited Paris.", "train", "t"),
        Example("noent", doc, "It rained. Everyone was happy.", "train", "t"),
    ]
    out, stats = filter_examples(exs, nlp=nlp)
    assert out[0].summary == "Obama visited Chicago ."
    assert out[1].summary == "Obama visited chicago ." and out[1].extra["summary_unfiltered"].endswith(
        "Merkel agreed ."
    )
    assert out[2] is None
    assert out[3].summary == "It rained. Everyone was happy."  # split_sentences, nothing removed
    assert stats.sentences_removed == 2 and stats.examples_dropped == 1 and stats.examples_changed == 1
    d = stats.to_dict()
    assert d["entity_precision_source_after"] == 1.0 and d["entity_precision_source_before"] < 1.0
    assert "Angela Merkel" in d["most_removed_entities"]
    # apply=False measures but keeps everything
    out2, stats2 = filter_examples(exs, apply=False, nlp=nlp)
    assert all(o is not None for o in out2) and stats2.sentences_removed == 0
    assert stats2.to_dict()["entity_precision_source_after"] < 1.0


def test_entity_metrics_hand_computed(nlp):
    docs = ["Barack Obama visited Paris and met Emmanuel Macron.", "John Smith works at Google in London."]
    hyps = ["Obama met Macron in Berlin.", "John Smith joined Google."]
    refs = ["Barack Obama met Emmanuel Macron in Paris.", "John Smith works in London."]
    m = entity_metrics(docs, hyps, refs, nlp=nlp)
    e1, e2 = m["per_example"]
    # example 1: h = {Obama, Macron, Berlin}; in source: Obama, Macron; in ref: Obama, Macron
    #            t = {Barack Obama, Emmanuel Macron, Paris}; in hyp: Barack Obama (via "Obama"), Emmanuel Macron
    assert (e1["n_h"], e1["n_h_in_s"], e1["n_h_in_t"], e1["n_t"], e1["n_t_in_h"]) == (3, 2, 2, 3, 2)
    assert e1["unsupported"] == ["Berlin"]
    # example 2: h = {John Smith, Google}; both in source; in ref: John Smith
    #            t = {John Smith, London}; in hyp: John Smith
    assert (e2["n_h"], e2["n_h_in_s"], e2["n_h_in_t"], e2["n_t"], e2["n_t_in_h"]) == (2, 2, 1, 2, 1)
    assert m["corpus_prec_s"] == pytest.approx(4 / 5)
    assert m["example_prec_s"] == pytest.approx((2 / 3 + 1) / 2)
    assert m["corpus_prec_t"] == pytest.approx(3 / 5) and m["corpus_recall_t"] == pytest.approx(3 / 5)
    assert m["corpus_f1_t"] == pytest.approx(3 / 5)
    assert m["example_recall_t"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    f1 = [2 * p * r / (p + r) for p, r in ((2 / 3, 2 / 3), (1 / 2, 1 / 2))]
    assert m["example_f1_t"] == pytest.approx(sum(f1) / 2)


def test_entity_metrics_no_entities_and_length_check(nlp):
    m = entity_metrics(["it rained"], ["it rained"], ["it rained"], nlp=nlp)
    assert m["corpus_prec_s"] is None and m["example_prec_s"] is None and m["num_examples"] == 1
    with pytest.raises(ValueError, match="2 documents, 1 summaries"):
        entity_metrics(["a", "b"], ["a"], ["a"], nlp=nlp)
