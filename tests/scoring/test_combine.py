"""CLIPBERTScore combination, learned combiners and image precision."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mmsum.scoring import ClipBertScore, LogisticCombiner, MLPCombiner, image_precision, load_combiner


class _FakeClip:
    def clip_s(self, feats, mask, summaries, **_):
        return torch.tensor([0.2, float("nan"), 0.4])


class _FakeBert:
    def score(self, cands, refs):
        p = torch.tensor([0.8, 0.6, 0.5])
        return p, p, p


def test_clipbertscore_formula_and_no_image_policy() -> None:
    out = ClipBertScore(_FakeClip(), _FakeBert(), alpha=0.25)(
        torch.zeros(3, 1, 4), None, ["a"] * 3, ["b"] * 3
    )
    torch.testing.assert_close(
        out.score, torch.tensor([0.25 * 0.2 + 0.75 * 0.8, 0.6, 0.25 * 0.4 + 0.75 * 0.5])
    )
    assert out.missing_image.tolist() == [False, True, False]
    nan = ClipBertScore(_FakeClip(), _FakeBert(), no_image="nan")(
        torch.zeros(3, 1, 4), None, ["a"] * 3, ["b"] * 3
    )
    assert math.isnan(nan.score[1])
    with pytest.raises(ValueError):
        ClipBertScore(_FakeClip(), _FakeBert(), no_image="error")(
            torch.zeros(3, 1, 4), None, ["a"] * 3, ["b"] * 3
        )


@pytest.mark.parametrize("cls", [LogisticCombiner, MLPCombiner])
def test_combiners_fit_save_load(tmp_path, cls) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] + 2 * X[:, 1] + 0.3 * rng.normal(size=200) > 0).astype(int)
    comb = cls().fit(X, y)
    p = comb.predict(X)
    np.testing.assert_allclose(p, comb._sk.predict_proba(comb._standardize(X))[:, 1], atol=1e-9)
    assert ((p > 0.5) == y).mean() > 0.85
    loaded = load_combiner(comb.save(tmp_path / "comb.json"))
    np.testing.assert_allclose(loaded.predict(X), p, atol=1e-12)


def test_image_precision() -> None:
    scores = [torch.tensor([0.1, 0.9, 0.3]), torch.tensor([0.5, 0.2]), torch.tensor([0.3]), torch.tensor([])]
    relevant = [[1], [1], [], [0]]
    out = image_precision(scores, relevant)
    assert out["ip"] == pytest.approx(1 / 3) and out["ip_all"] == pytest.approx(1 / 4)
    padded = torch.tensor([[0.1, 0.2, 9.0], [0.5, 0.2, 9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]], dtype=torch.bool)
    assert image_precision(padded, [[1], [0]], mask)["ip"] == 1.0


def test_image_precision_rankings_of_ids() -> None:
    out = image_precision([["im2", "im1"], ["im3"], [], ["im9"]], [["im2"], ["im4"], ["im1"], []])
    assert out["image_precision"] == pytest.approx(1 / 3) and out["image_precision_all"] == pytest.approx(
        1 / 4
    )
