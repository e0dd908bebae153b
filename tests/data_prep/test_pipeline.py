"""End to end: raw trees -> prepared splits with the tiny CLIP; accounting, bad input, determinism, resume."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import numpy as np
import pytest

import data_prep.pipeline as pipeline
from data_prep.pipeline import prepare
from mmsum.data import load_prepared

from .rawtrees import mmss_tree, msmo_tree, wikihow_tree


@pytest.fixture
def tiny(tiny_clip_path) -> dict:
    return dict(clip_model_name="mmsum-tiny-rn", clip_pretrained=str(tiny_clip_path), progress=False)


def manifest(split_dir: Path) -> dict:
    return json.loads((split_dir / "manifest.json").read_text())


def check_accounting(m: dict) -> None:
    assert m["raw"] == m["kept"] + sum(m["dropped"].values())
    assert m["kept"] == m["num_examples"]
    if isinstance(m["dropped_ids"], dict):
        assert {k: len(v) for k, v in m["dropped_ids"].items()} == m["dropped"]


def test_msmo_end_to_end(tmp_path, tiny):
    raw = msmo_tree(tmp_path / "raw")
    out = prepare("msmo", raw, tmp_path / "out", **tiny)
    assert set(out) == {"train", "validation", "test"}
    m = manifest(out["train"])
    check_accounting(m)
    assert m["raw"] == 10 and m["kept"] == 5
    assert m["dropped"] == {"duplicate_id": 1, "empty_body": 1, "empty_summary": 1, "missing_summary": 1,
                            "unsupported_entities": 1}  # fmt: skip
    assert m["dropped_ids"]["unsupported_entities"] == ["hallonly"]
    assert (
        m["images"]["corrupt_ids"] == ["badimgs/1", "badimgs/2", "badimgs/3"] and m["images"]["missing"] == 0
    )
    assert m["entity_filter"]["entity_precision_source_after"] == 1.0
    assert m["entity_filter"]["sentences_removed"] == 2 and m["entity_filter"]["applied"] is True
    assert m["parse"]["decode_replacements"] == {"latin": 2}
    assert m["clip_model"] == "mmsum-tiny-rn/open_clip_model.pt" and m["feature_dim"] == 64
    assert len(m["config_hash"]) == 16 and "torch" in m["versions"]

    ds = load_prepared(out["train"])
    rec = {ds[i]["id"]: ds[i] for i in range(len(ds))}
    assert (
        rec["halluc"]["summary"] == "Obama visited Chicago ."
        and "Merkel" in rec["halluc"]["summary_unfiltered"]
    )
    g = rec["good1"]
    assert g["image_ids"] == ["3", "7", "10"] and g["image_features"].shape == (3, 64)
    assert g["guidance_method"] == "rouge" and g["guidance_labels"] == [1, 1, 1]  # top-3 of 3, all overlap
    assert g["guidance_scores"][0] == max(g["guidance_scores"])  # "a red bus in chicago" overlaps most
    assert np.abs(g["image_features"]).sum() > 0
    assert rec["badimgs"]["image_ids"] == ["4"] and rec["badimgs"]["captions"] == ["fine"]
    assert rec["trailing"]["image_features"].shape == (0, 64)

    test = load_prepared(out["test"])
    t = {test[i]["id"]: test[i] for i in range(len(test))}
    assert t["t1"]["relevant_images"] == ["2"] and t["t2"]["relevant_images"] == []
    assert manifest(out["test"])["entity_filter"]["applied"] is False
    top = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert top["splits"]["train"]["kept"] == 5
    assert not (tmp_path / "out" / ".cache").exists()


def test_mmss_and_wikihow_end_to_end(tmp_path, tiny):
    out = prepare("mmss", mmss_tree(tmp_path / "mmss"), tmp_path / "o1", splits=["train"], **tiny)
    m = manifest(out["train"])
    check_accounting(m)
    assert m["dropped"] == {"empty_body": 1} and m["images"]["missing_ids"] == ["train-3/3"]
    ds = load_prepared(out["train"])
    assert len(ds) == 4 and ds[0]["image_features"].shape == (1, 64)

    raw = wikihow_tree(tmp_path / "wh", n_articles=6, malformed=True)
    opts = {"n_valid_groups": 2, "n_test_groups": 2}
    out = prepare("wikihow", raw, tmp_path / "o2", dataset_options=opts, guidance_method="clip", **tiny)
    total = 0
    for d in out.values():
        m = manifest(d)
        check_accounting(m)
        total += m["raw"]
    assert total == 6 * 4 + 2  # every step of every parsed article, incl. the unsafe and duplicate one
    assert manifest(out["train"])["dropped"] == {"duplicate_id": 1, "unsafe_id": 1}
    top = json.loads((tmp_path / "o2" / "manifest.json").read_text())
    assert [s.split(":")[1] for s in top["malformed_lines"]] == ["4", "6"]
    rec = load_prepared(out["validation"])[0]
    assert rec["guidance_method"] == "clip" and rec["guidance_labels"] in ([0], [1])


def _tree_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def test_killed_run_resumes_byte_identical(tmp_path, tiny, monkeypatch):
    raw = msmo_tree(tmp_path / "raw")
    opts = dict(chunk_size=3, **tiny)
    prepare("msmo", raw, tmp_path / "a", **opts)

    real_save, calls = pipeline._save_chunk, {"n": 0}

    def dying_save(*args, **kw):
        if calls["n"] == 2:  # killed while the third chunk of train is being computed
            raise KeyboardInterrupt
        calls["n"] += 1
        real_save(*args, **kw)

    monkeypatch.setattr(pipeline, "_save_chunk", dying_save)
    with pytest.raises(KeyboardInterrupt):
        prepare("msmo", raw, tmp_path / "b", **opts)
    assert not (tmp_path / "b" / "train").exists()  # nothing half-written is visible
    assert len(list((tmp_path / "b" / ".cache").rglob("chunk_*"))) == 2

    computed = {"n": 0}
    real_process = pipeline._process_chunk

    def counting(*args, **kw):
        computed["n"] += 1
        return real_process(*args, **kw)

    monkeypatch.setattr(pipeline, "_save_chunk", real_save)
    monkeypatch.setattr(pipeline, "_process_chunk", counting)
    prepare("msmo", raw, tmp_path / "b", **opts)
    assert computed["n"] == 2 + 1 + 1  # train chunks 3-4 only, then validation and test
    a, b = _tree_files(tmp_path / "a"), _tree_files(tmp_path / "b")
    assert a == b
    for rel in a:
        assert filecmp.cmp(tmp_path / "a" / rel, tmp_path / "b" / rel, shallow=False), rel


def test_demo_world_prepares(tmp_path, tiny):
    out = prepare("demo", tmp_path / "raw", tmp_path / "out", demo_sizes=(24, 6, 6), **tiny)
    m = manifest(out["train"])
    check_accounting(m)
    assert m["dataset"] == "demo" and m["raw"] == 24
    test = load_prepared(out["test"])
    assert len(test) == 6 and all(r["relevant_images"] for r in test)
    assert all(set(r["relevant_images"]) <= set(r["image_ids"]) for r in test)
    r = test[0]
    for key in ("id", "document", "summary", "image_ids", "captions", "relevant_images", "guidance_labels",
                "guidance_method", "source", "split", "image_features"):  # fmt: skip
        assert key in r, key
    assert r["source"] == "demo" and r["split"] == "test"
