"""The three raw-release parsers on generated trees, clean and malformed (no models needed)."""

from __future__ import annotations

import json

import pytest

from data_prep.common import Dropped, ParseStats, RawDataError, UnsafePathError, safe_join
from data_prep.mmss import iter_mmss
from data_prep.msmo import iter_msmo, load_relevant, parse_article
from data_prep.wikihow import dataset_level_report, iter_wikihow
from mmsum.data.schema import Example

from .rawtrees import mmss_tree, msmo_tree, wikihow_tree


def run(parser, *args, **kw):
    stats = ParseStats()
    items = list(parser(*args, stats, **kw))
    ex = {e.id: e for e in items if isinstance(e, Example)}
    drops = {(d.id, d.reason) for d in items if isinstance(d, Dropped)}
    return items, ex, drops, stats


def test_parse_article_tolerates_trailing_space_and_missing_sections():
    s = parse_article("junk\n@title \nT\n@body\t\nline one\n\nline two\n@summary  \nh1\n\n h2 \n")
    assert s == {"title": ["T"], "body": ["line one", "line two"], "summary": ["h1", "h2"]}
    assert "summary" not in parse_article("@title\nT\n@body\nb\n")


def test_msmo_train_fields_and_drops(tmp_path):
    items, ex, drops, stats = run(iter_msmo, msmo_tree(tmp_path), "train")
    # data1 before data2; sorted article files within each
    assert [i.id for i in items][0] == "good1"
    g = ex["good1"]
    assert g.image_ids == ["3", "7", "10"]  # integer order, ids kept, not renumbered
    assert g.captions == ["a red bus in chicago", "obama with staff", "a green field"]
    assert g.extra["summary_sentences"] == ["Obama visited Chicago .", "He saw a red bus ."]
    assert g.summary == "Obama visited Chicago . He saw a red bus ."
    assert g.document.startswith("Barack Obama visited Chicago") and g.title == "Obama in Chicago"
    assert "trailing" in ex and ex["trailing"].summary == "Obama visited Chicago ."
    assert ex["trailing"].image_ids == []  # zero images is fine
    assert drops == {
        ("nosummary", "missing_summary"),
        ("emptybody", "empty_body"),
        ("emptysummary", "empty_summary"),
        ("good1", "duplicate_id"),
    }
    assert len(items) == stats.split_sizes["train"] == 10
    # non-UTF-8 bytes: decoded with replacement and counted
    assert "\ufffd" in ex["latin"].document and stats.decode_replacements["latin"] == 2
    # image without caption is kept with "", caption without image is counted
    b = ex["badimgs"]
    assert b.image_ids == ["1", "2", "3", "4"] and stats.notes["image_caption_mismatch"] >= 1


def test_msmo_test_split_relevant_images(tmp_path):
    _, ex, _, stats = run(iter_msmo, msmo_tree(tmp_path), "test")
    assert ex["t1"].image_ids == ["0", "2"] and ex["t1"].relevant_images == ["2"]
    assert ex["t2"].image_ids == [] and ex["t2"].relevant_images == []
    assert stats.notes["relevant_annotations"] == 3


def test_msmo_missing_dirs(tmp_path):
    msmo_tree(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "valid_data" / "caption")
    _, ex, _, stats = run(iter_msmo, tmp_path, "validation")
    assert ex["v1"].captions == [""] and stats.notes["missing_caption_dir"] == 1
    shutil.rmtree(tmp_path / "valid_data" / "article")
    with pytest.raises(RawDataError, match="missing article directory"):
        run(iter_msmo, tmp_path, "validation")


def test_relevant_loader_json_tsv_and_escapes(tmp_path):
    tsv = tmp_path / "rel.tsv"
    tsv.write_text("h1\t1,3\nh2\t2\t5\n\nh3\t\n")
    assert load_relevant(tsv) == {"h1": ["1", "3"], "h2": ["2", "5"], "h3": []}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"../../etc/passwd": [1]}))
    with pytest.raises(UnsafePathError, match="unsafe id"):
        load_relevant(bad)
    bad.write_text(json.dumps({"h1": ["../1"]}))
    with pytest.raises(UnsafePathError, match="not a non-negative integer"):
        load_relevant(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(RawDataError, match="expected a JSON object"):
        load_relevant(bad)


def test_safe_join_rejects_escape(tmp_path):
    assert safe_join(tmp_path, "a", "b.jpg") == tmp_path / "a" / "b.jpg"
    with pytest.raises(UnsafePathError):
        safe_join(tmp_path, "..", "x")


@pytest.mark.parametrize("dev_name", ["dev", "valid"])
def test_mmss_fields(tmp_path, dev_name):
    root = mmss_tree(tmp_path, dev_name=dev_name)
    items, ex, drops, stats = run(iter_mmss, root, "train")
    assert len(items) == 5 and drops == {("train-2", "empty_body")}
    e = ex["train-1"]
    assert e.document == "the mayor of boston opened bridge number 0 on monday"
    assert e.summary == "boston opens bridge 0" and e.image_ids == ["1"]
    assert e.image_paths[0].endswith("images_train/1.jpg")
    _, ex_v, _, _ = run(iter_mmss, root, "validation")
    assert ex_v["validation-5"].image_paths[0].endswith(f"images_{dev_name}/5.jpg")


def test_mmss_line_mismatch_names_both_files(tmp_path):
    root = mmss_tree(tmp_path, mismatch=True)
    with pytest.raises(RawDataError) as e:
        run(iter_mmss, root, "train")
    msg = str(e.value)
    assert "train_sent.txt has 5 lines" in msg and "train_title.txt has 4" in msg


def test_mmss_missing_files(tmp_path):
    with pytest.raises(RawDataError, match="train_sent.txt"):
        run(iter_mmss, tmp_path, "train")


def test_wikihow_steps_and_group_split(tmp_path):
    root = wikihow_tree(tmp_path, n_articles=10)
    opts = dict(n_valid_groups=3, n_test_groups=2, seed=0)
    per_split = {s: run(iter_wikihow, root, s, **opts) for s in ("train", "validation", "test")}
    groups = {s: {e.extra["group"] for e in r[1].values()} for s, r in per_split.items()}
    assert len(groups["validation"]) == 3 and len(groups["test"]) == 2 and len(groups["train"]) == 15
    assert not (groups["train"] & groups["test"]) and not (groups["validation"] & groups["test"])
    e = per_split["train"][1]
    any_ex = next(iter(e.values()))
    fid, m, s = any_ex.id.split("_")
    assert any_ex.summary == f"Water plant {fid} {m} {s} ."
    assert any_ex.document.startswith("Take a can") and any_ex.image_ids == [any_ex.id]
    assert any_ex.image_paths[0].endswith(f"{any_ex.id}.png") and "wiki_images" in any_ex.image_paths[0]
    # deterministic, and a different seed gives a different split
    again = {e.extra["group"] for e in run(iter_wikihow, root, "test", **opts)[1].values()}
    assert again == groups["test"]
    other = {
        e.extra["group"]
        for e in run(iter_wikihow, root, "test", n_valid_groups=3, n_test_groups=2, seed=1)[1].values()
    }
    assert other != groups["test"] or len(groups["train"]) == 0


def test_wikihow_user_split_files(tmp_path):
    root = wikihow_tree(tmp_path, n_articles=4)
    (tmp_path / "test_ids.txt").write_text("a001\n")
    (tmp_path / "valid_ids.txt").write_text("a002_1\n")
    files = {"test": str(tmp_path / "test_ids.txt"), "validation": str(tmp_path / "valid_ids.txt")}
    test = run(iter_wikihow, root, "test", split_files=files)[1]
    valid = run(iter_wikihow, root, "validation", split_files=files)[1]
    assert {e.extra["group"] for e in test.values()} == {"a001_0", "a001_1"}
    assert {e.extra["group"] for e in valid.values()} == {"a002_1"}


def test_wikihow_malformed(tmp_path):
    root = wikihow_tree(tmp_path, n_articles=6, malformed=True)
    opts = dict(n_valid_groups=0, n_test_groups=0)
    items, ex, drops, stats = run(iter_wikihow, root, "train", **opts)
    assert [s.split(":")[1] for s in stats.skipped_lines] == ["4", "6"]
    assert ("../../etc/passwd", "unsafe_id") in drops and ("a000_0_0", "duplicate_id") in drops
    assert len(ex) == 6 * 4
    rep = dataset_level_report(root, **opts)
    assert len(rep["malformed_lines"]) == 2 and rep["articles"] == 8
    with pytest.raises(RawDataError, match="WikihowText_data.json not found"):
        run(iter_wikihow, tmp_path / "nowhere", "train")
