from __future__ import annotations

import numpy as np

from data_prep.guidance import CLIP_S_WEIGHT, clip_scores, rouge_scores, top_k_labels


def test_top_k_is_stable_and_respects_min_score():
    assert top_k_labels([0.2, 0.9, 0.2, 0.5], k=2) == [0, 1, 0, 1]
    assert top_k_labels([0.2, 0.2, 0.2], k=2) == [1, 1, 0]  # ties: earlier images win
    assert top_k_labels([0.0, 0.3, 0.0], k=3) == [0, 1, 0]  # no overlap, no label
    assert top_k_labels([], k=3) == []


def test_rouge_scores_rank_captions():
    s = rouge_scores(["a red bus in chicago", "green fields", ""], "Obama saw a red bus in Chicago .")
    assert s[0] > s[1] == 0.0 and s[2] == 0.0
    assert top_k_labels(s, k=1) == [1, 0, 0]


def test_clip_scores_are_clip_s():
    img = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    s = clip_scores(img, np.array([3.0, 0.0]))
    assert np.allclose(s, [CLIP_S_WEIGHT, 0.0, 0.0])
    assert clip_scores(np.zeros((0, 2)), np.ones(2)) == []
