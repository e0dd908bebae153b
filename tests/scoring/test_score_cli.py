"""mmsum-score on a small prepared split with the tiny CLIP and MiniLM (offline)."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from mmsum.cli.score import main
from mmsum.data.prepared import PreparedSplitWriter
from mmsum.scoring import rouge
from mmsum.scoring.encoders import clip_id

DOCS = [
    "The cat sat on the mat. It was a sunny day.",
    "Paris is the capital of France.",
    "Rain fell in London on Monday.",
]
REFS = ["A cat sat on a mat.", "Paris is France's capital.", "It rained in London."]
PREDS = ["The cat sat.", "Paris is a capital.", "London had rain."]


@pytest.fixture()
def split_dir(tmp_path, tiny_clip_path):
    rng = np.random.default_rng(0)
    with PreparedSplitWriter(tmp_path / "test", feature_dim=64) as w:
        for i, (d, r) in enumerate(zip(DOCS, REFS)):
            n = [2, 1, 0][i]
            ex = {
                "id": f"ex{i}",
                "document": d,
                "summary": r,
                "image_ids": [f"im{i}_{j}" for j in range(n)],
                "relevant_images": [f"im{i}_0"] if n else [],
            }
            w.add(ex, rng.normal(size=(n, 64)).astype(np.float16))
        w.finish({"clip_model": clip_id("mmsum-tiny-rn", str(tiny_clip_path))})
    return tmp_path / "test"


def _args(split_dir, preds, out, clip_path, *extra):
    return [
        "--split",
        str(split_dir),
        "--predictions",
        str(preds),
        "--out",
        str(out),
        "--clip-model",
        "mmsum-tiny-rn",
        "--clip-pretrained",
        str(clip_path),
        "--bert-model",
        "minilm",
        "--bert-num-layers",
        "2",
        "--device",
        "cpu",
        *extra,
    ]


def test_score_jsonl(tmp_path, split_dir, tiny_clip_path) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"id": f"ex{i}", "summary": s, "image_scores": [0.9, 0.1][: [2, 1, 0][i]]}) + "\n"
            for i, s in enumerate(PREDS)
        )
    )
    assert main(_args(split_dir, preds, tmp_path / "out", tiny_clip_path)) == 0
    rows = list(csv.DictReader(open(tmp_path / "out" / "scores.csv")))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [r["id"] for r in rows] == ["ex0", "ex1", "ex2"]
    assert float(rows[0]["rouge2"]) == rouge(PREDS[:1], REFS[:1])["rouge2"].item()
    assert math.isnan(float(rows[2]["clip_s"])) and float(rows[2]["clipbertscore"]) == float(
        rows[2]["bert_s"]
    )
    assert summary["n_without_images"] == 1 and summary["image_precision"]["ip"] == 1.0
    assert summary["image_precision"]["n_with_relevant"] == 2


def test_score_text_and_clip_mismatch(tmp_path, split_dir, tiny_clip_path) -> None:
    preds = tmp_path / "preds.txt"
    preds.write_text("\n".join(PREDS) + "\n")
    assert main(_args(split_dir, preds, tmp_path / "out", tiny_clip_path, "--metrics", "rouge")) == 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["n"] == 3
    manifest = json.loads((split_dir / "manifest.json").read_text())
    manifest["clip_model"] = "RN50x64/openai"
    (split_dir / "manifest.json").write_text(json.dumps(manifest))
    from mmsum.scoring import ClipFeatureMismatch

    with pytest.raises(ClipFeatureMismatch):
        main(_args(split_dir, preds, tmp_path / "out2", tiny_clip_path, "--metrics", "clip"))
