"""Small raw trees in the three release layouts (clean, and with the malformations the parsers handle)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image


def jpeg(color=(200, 30, 30), size=32) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def png(color=(30, 30, 200), size=32) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, format="PNG")
    return buf.getvalue()


def msmo_article(title: str, body: list[str], summary: list[str] | None, trailing: str = "") -> str:
    lines = [f"@title{trailing}", title, "", f"@body{trailing}", *body, ""]
    if summary is not None:
        lines += [f"@summary{trailing}", *summary]
    return "\n".join(lines) + "\n"


def write_msmo(root: Path, split_dir: str, aid: str, text: str | bytes, images: dict[int, bytes] | None = None,
               captions: dict[int, str] | None = None) -> None:  # fmt: skip
    d = root / split_dir
    for sub in ("article", "img", "caption"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    path = d / "article" / f"{aid}.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    for k, data in (images or {}).items():
        (d / "img" / f"{aid}_{k}.jpg").write_bytes(data)
    for k, cap in (captions or {}).items():
        (d / "caption" / f"{aid}_{k}.caption").write_text(cap + "\n")


def msmo_tree(root: Path) -> Path:
    """Clean and malformed MSMO articles; the expected outcome of each is in its id."""
    body = ["Barack Obama visited Chicago on Monday with a red bus .", "Obama met staff of Google there ."]
    good = msmo_article("Obama in Chicago", body, ["Obama visited Chicago .", "He saw a red bus ."])
    write_msmo(root, "data1", "good1", good, {3: jpeg(), 10: jpeg((0, 200, 0)), 7: jpeg((0, 0, 200))},
               {3: "a red bus in chicago", 10: "a green field", 7: "obama with staff"})  # fmt: skip
    write_msmo(
        root, "data2", "trailing", msmo_article("T", body, ["Obama visited Chicago ."], trailing="  \r")
    )
    write_msmo(root, "data2", "nosummary", msmo_article("T", body, None))
    write_msmo(root, "data2", "emptybody", msmo_article("T", [], ["Obama visited Chicago ."]))
    write_msmo(root, "data2", "emptysummary", msmo_article("T", body, []))
    write_msmo(
        root,
        "data2",
        "halluc",
        msmo_article("T", body, ["Obama visited Chicago .", "Angela Merkel agreed ."]),
    )
    write_msmo(root, "data2", "hallonly", msmo_article("T", body, ["Angela Merkel visited Paris ."]))
    write_msmo(root, "data2", "good1", good)  # duplicate of data1/good1
    bad_bytes = (
        msmo_article("T", body, ["Obama visited Chicago ."]).encode().replace(b"Monday", b"Mon\xff\xfeday")
    )
    write_msmo(root, "data2", "latin", bad_bytes, {1: jpeg()}, {1: "a red bus"})
    write_msmo(root, "data2", "badimgs", good, {1: b"", 2: jpeg()[:200], 3: b"not an image at all", 4: jpeg()},
               {1: "zero bytes", 2: "truncated", 3: "text file", 4: "fine", 5: "caption without image"})  # fmt: skip
    # validation / test
    write_msmo(root, "valid_data", "v1", good, {1: jpeg()}, {1: "a red bus"})
    write_msmo(root, "test_data", "t1", good, {0: jpeg(), 2: jpeg()}, {0: "a red bus", 2: "field"})
    write_msmo(root, "test_data", "t2", good, {}, {})
    (root / "test_relevant_images.json").write_text(json.dumps({"t1": [2], "t2": [], "ghost": [1]}))
    return root


def mmss_tree(root: Path, n: int = 5, dev_name: str = "dev", mismatch: bool = False) -> Path:
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for split in ("train", dev_name, "test"):
        sents = [f"the mayor of boston opened bridge number {i} on monday" for i in range(n)]
        titles = [f"boston opens bridge {i}" for i in range(n)]
        if split == "train":
            sents[1] = ""  # empty source sentence
        if mismatch and split == "train":
            titles = titles[:-1]
        (corpus / f"{split}_sent.txt").write_text("\n".join(sents) + "\n")
        (corpus / f"{split}_title.txt").write_text("\n".join(titles) + "\n")
        img = root / f"images_{split}"
        img.mkdir(exist_ok=True)
        for i in range(n):
            if not (split == "train" and i == 2):  # line 3 of train has no image
                (img / f"{i + 1}.jpg").write_bytes(jpeg((10 * i, 100, 100)))
    return root


def wikihow_article(file_id: str, n_methods: int = 2, n_steps: int = 2) -> dict:
    return {
        "file_id": file_id,
        "goal": f"How to do {file_id}",
        "goal_description": "A guide .",
        "category_hierarchy": ["Home", "Garden"],
        "methods": [
            {
                "name": f"Method {m}",
                "steps": [
                    {
                        "headline": f"Water plant {file_id} {m} {s} .",
                        "description": f"Take a can and water plant {file_id} in step {s} of method {m} .",
                        "img": f"https://example.invalid/{file_id}_{m}_{s}.png",
                        "img_license": "cc",
                        "step_id": f"{file_id}_{m}_{s}",
                    }
                    for s in range(n_steps)
                ],
            }
            for m in range(n_methods)
        ],
    }


def wikihow_tree(root: Path, n_articles: int = 10, malformed: bool = False) -> Path:
    lines = [json.dumps(wikihow_article(f"a{i:03d}")) for i in range(n_articles)]
    if malformed:
        lines.insert(3, '{"file_id": "broken", "methods": [')  # line 4: truncated JSON
        lines.insert(5, "[1, 2, 3]")  # line 6: not an article
        bad = wikihow_article("evil", 1, 1)
        bad["methods"][0]["steps"][0]["step_id"] = "../../etc/passwd"
        lines.append(json.dumps(bad))
        dup = wikihow_article("a000", 1, 1)  # same step ids as article a000, method 0
        lines.append(json.dumps(dup))
    root.mkdir(parents=True, exist_ok=True)
    (root / "WikihowText_data.json").write_text("\n".join(lines) + "\n")
    for i in range(n_articles):
        for m in range(2):
            for s in range(2):
                d = root / "wiki_images" / ("test" if i % 4 == 0 else "train")
                d.mkdir(parents=True, exist_ok=True)
                (d / f"a{i:03d}_{m}_{s}.png").write_bytes(png())
    return root
