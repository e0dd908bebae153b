"""ROUGE parity with rouge_score.RougeScorer(keys, use_stemmer=True), bit for bit."""

from __future__ import annotations

import random

import pytest
import torch
from rouge_score import rouge_scorer

from mmsum.scoring import RougeMetric, rouge
from mmsum.scoring.rougescore import lcs_length

KEYS = ("rouge1", "rouge2", "rouge3", "rougeL", "rougeLsum")
WORDS = (
    "the a cat cats dog running runs ran quickly jumped jumping over lazy fox Paris paris "
    "government governments 2024 1,000 U.S. naïve café Straße İstanbul 東京 😀 -- ... ; ! ? "
    "don't it's well-known e-mail"
).split()


def _random_text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return ""
    if kind < 0.10:
        return rng.choice(["...", "!!! ??", " - ", "\n\n", "   ", "😀😀", "東京"])
    n = rng.randint(1, 40)
    parts = []
    for _ in range(n):
        parts.append(rng.choice(WORDS))
        if rng.random() < 0.12:
            parts.append("\n")
    return " ".join(parts)


def _pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = [(_random_text(rng), _random_text(rng)) for _ in range(n)]
    # Candidates sharing many words with the reference exercise LCS tie-breaking in rougeLsum.
    for _ in range(n // 4):
        ref = _random_text(rng)
        words = ref.split(" ")
        rng.shuffle(words)
        pairs.append((" ".join(words[: rng.randint(0, len(words))]), ref))
    return pairs


def test_rouge_matches_rouge_score_exactly() -> None:
    pairs = _pairs(1200)
    preds, refs = [p for p, _ in pairs], [r for _, r in pairs]
    ours = {m: rouge(preds, refs, KEYS, measure=m) for m in ("precision", "recall", "fmeasure")}
    scorer = rouge_scorer.RougeScorer(list(KEYS), use_stemmer=True)
    for i, (pred, ref) in enumerate(pairs):
        expected = scorer.score(ref, pred)
        for k in KEYS:
            for m in ("precision", "recall", "fmeasure"):
                assert ours[m][k][i].item() == getattr(expected[k], m), (i, k, m, pred, ref)


def test_single_key_rougelsum_and_edge_cases() -> None:
    scorer = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)
    for pred, ref in [("", ""), ("a", ""), ("", "a"), ("...", "a b"), ("a\nb", "b\na")]:
        assert (
            rouge([pred], [ref], ["rougeLsum"])["rougeLsum"].item()
            == scorer.score(ref, pred)["rougeLsum"].fmeasure
        )


def test_lcs_length_matches_dp() -> None:
    rng = random.Random(1)
    for _ in range(300):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 30))]
        b = [rng.choice("abcd") for _ in range(rng.randint(0, 30))]
        table = rouge_scorer._lcs_table(a, b)
        assert lcs_length(a, b) == table[-1][-1]


def test_invalid_key_and_length_mismatch() -> None:
    with pytest.raises(ValueError):
        rouge(["a"], ["a"], ["rougeX"])
    with pytest.raises(ValueError):
        rouge(["a"], ["a", "b"])


def test_rouge_metric_accumulates_means() -> None:
    pairs = _pairs(50, seed=3)
    preds, refs = [p for p, _ in pairs], [r for _, r in pairs]
    metric = RougeMetric(("rouge1", "rouge2", "rougeL"))
    metric.update(preds[:20], refs[:20])
    metric.update(preds[20:], refs[20:])
    out = metric.compute()
    direct = rouge(preds, refs, ("rouge1", "rouge2", "rougeL"))
    for k in ("rouge1", "rouge2", "rougeL"):
        assert torch.isclose(out[k].double(), direct[k].mean(), atol=1e-6)
        assert 0.0 <= out[k].item() <= 1.0
    metric.reset()
    assert metric.compute()["rouge1"].item() == 0.0
