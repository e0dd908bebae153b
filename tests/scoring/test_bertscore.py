"""BERTScore parity with bert_score 0.3.13 (same local model, same layer count, idf on/off)."""

from __future__ import annotations

import pytest
import torch

from mmsum.scoring import BertScorer

CANDS = [
    "The fox jumps over the dog.",
    "A cat sits on a mat.",
    "Officials in Paris said nothing on Monday.",
    "  The government announced new jobs.  ",
    "Water was found on the moon by scientists.",
    "Completely unrelated words: banana, violin, tax!",
    "The quick brown fox jumps over the lazy dog.",
    "Paris",
]
REFS = [
    "The quick brown fox jumps over the lazy dog. It was a sunny day and the dog did not move.",
    "A photo depicts a cat sitting on a red mat next to the window.",
    "Paris is the capital of France, officials said on Monday.",
    "The government announced 1,000 new jobs in the energy sector on Tuesday.",
    "Scientists found water on the surface of the moon last year. " * 40,  # longer than the model max
    "The quick brown fox jumps over the lazy dog.",
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France, officials said on Monday.",
]


def _reference(path, num_layers, idf, cands=CANDS, refs=REFS):
    import bert_score

    return bert_score.score(
        list(cands),
        list(refs),
        model_type=str(path),
        num_layers=num_layers,
        idf=idf,
        batch_size=3,
        nthreads=0,
        device="cpu",
    )


@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize("num_layers", [1, 4])
def test_parity_tiny_roberta(tiny_roberta_path, num_layers, idf) -> None:
    expected = _reference(tiny_roberta_path, num_layers, idf)
    scorer = BertScorer(str(tiny_roberta_path), num_layers=num_layers, idf=idf, batch_size=4, device="cpu")
    ours = scorer.score(CANDS, REFS)
    for e, o in zip(expected, ours):
        torch.testing.assert_close(o, e.float(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize("num_layers", [2, 6])
def test_parity_minilm(minilm_path, num_layers, idf) -> None:
    expected = _reference(minilm_path, num_layers, idf)
    scorer = BertScorer(str(minilm_path), num_layers=num_layers, idf=idf, batch_size=5, device="cpu")
    ours = scorer.score(CANDS, REFS)
    for e, o in zip(expected, ours):
        torch.testing.assert_close(o, e.float(), atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def minilm_scorer(minilm_path) -> BertScorer:
    return BertScorer(str(minilm_path), num_layers=6, batch_size=4, device="cpu")


def test_empty_strings_score_zero(minilm_scorer) -> None:
    # bert_score's documented behaviour (it warns and sets raw scores to 0); 0.3.13 itself crashes
    # on empty strings under transformers 5, so we compare against the documented value.
    P, R, F = minilm_scorer.score(["", "A cat.", "   "], ["A cat sits.", "", "Paris"])
    assert (
        torch.equal(P, torch.zeros(3)) and torch.equal(R, torch.zeros(3)) and torch.equal(F, torch.zeros(3))
    )


def test_cache_reuses_documents_and_is_bounded(minilm_scorer) -> None:
    minilm_scorer.cache.clear()
    first = minilm_scorer.score(CANDS[:3], REFS[:3])
    assert minilm_scorer.cache.misses == 3 and len(minilm_scorer.cache) == 3
    again = minilm_scorer.score(CANDS[:3], REFS[:3])
    assert minilm_scorer.cache.hits == 3
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    small = BertScorer(minilm_scorer.encoder, cache_max_bytes=1)
    small.score(CANDS[:2], REFS[:2])
    assert len(small.cache) == 0  # nothing fits: bounded, still correct


def test_batch_composition_does_not_change_scores(minilm_scorer) -> None:
    alone = minilm_scorer.score(CANDS[:1], REFS[:1])[0]
    together = minilm_scorer.score(CANDS, REFS)[0][:1]
    torch.testing.assert_close(alone, together, atol=1e-6, rtol=0)


def test_bert_s_is_precision_and_scorer_is_not_a_module(minilm_scorer) -> None:
    assert not isinstance(minilm_scorer, torch.nn.Module)
    P = minilm_scorer.precision(CANDS[:2], REFS[:2])
    torch.testing.assert_close(P, minilm_scorer.score(CANDS[:2], REFS[:2])[0])
