"""FaithScore: offline default end to end (spaCy + tiny CLIP), LLM backends on a fake local
HTTP server and a tiny random local GPT-2."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

from mmsum.scoring.faithscore import (
    Fact,
    FaithScorer,
    HTTPChat,
    LLMDecomposer,
    LLMRecognizer,
    LocalLM,
    SpacyDecomposer,
    SpacyRecognizer,
    VerifiedFact,
    faith_scores,
    parse_facts,
    parse_labels,
)


def test_parse_labels_is_not_a_character_class():
    # The reference's re.finditer("[D]") would count the D of "Dog" and "DOWN" as labels.
    assert parse_labels("Dog runs DOWN the road. [D]\nI think it is happy. [A]") == ["D", "A"]


def test_parse_facts_and_kinds():
    facts = parse_facts(
        "1. There is a dog. (entity)\n- The dog is brown (color)\n* [count] There are two cats\n\nplain fact"
    )
    assert [(f.text, f.kind) for f in facts] == [
        ("There is a dog.", "entity"),
        ("The dog is brown", "color"),
        ("There are two cats", "count"),
        ("plain fact", "other"),
    ]


def test_faith_scores_reference_values():
    f = [Fact("a", sentence=0), Fact("b", sentence=0), Fact("c", sentence=2)]
    v = [VerifiedFact(f[0], True), VerifiedFact(f[1], False), VerifiedFact(f[2], True)]
    assert faith_scores(v, [True, True, True, False]) == pytest.approx((2 / 3, 2 / 3))  # sentence 1: no facts
    assert faith_scores([], [False]) == (0.0, 0.0)


def test_spacy_recognizer_and_decomposer():
    rec = SpacyRecognizer()
    assert rec(["Two red cars are parked next to a tree.", "I think the owner is probably away."]) == [
        True,
        False,
    ]
    facts = SpacyDecomposer()("Two red cars are parked next to a tree.", 3)
    kinds = {f.kind for f in facts}
    assert {"entity", "color", "count", "relation"} <= kinds
    assert Fact("The car is red.", "color", 3, "car", "red") in facts
    assert all(f.sentence == 3 for f in facts)


@pytest.fixture(scope="module")
def image_path(tmp_path_factory):
    from PIL import Image

    p = tmp_path_factory.mktemp("faith") / "im.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(p)
    return str(p)


@pytest.fixture(scope="module")
def tiny_clip_scorer(tiny_clip_path):
    from mmsum.scoring.clipscore import ClipScorer

    return ClipScorer("mmsum-tiny-rn", str(tiny_clip_path), device="cpu")


def test_offline_end_to_end(tiny_clip_scorer, image_path):
    scorer = FaithScorer.offline(tiny_clip_scorer)
    text = "A brown dog sits on a red sofa. Three birds fly over the house. It is probably a happy dog."
    res = scorer.score([text, "", "I believe so."], [[image_path], [image_path], [image_path]])
    r = res[0]
    assert r.descriptive == [True, True, False] and len(r.facts) >= 4
    n_ok = sum(v.supported for v in r.facts)
    assert r.score == pytest.approx(n_ok / len(r.facts)) and 0 <= r.sentence_score <= 1
    assert all(np.isfinite(v.score) for v in r.facts)
    assert res[1].score == 0.0 and res[1].facts == [] and res[2].score == 0.0  # nothing to verify
    no_image = scorer.score([text], [[]])[0]
    assert no_image.score == 0.0 and not any(v.supported for v in no_image.facts)


class _FakeChat(BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeChat.requests.append((body, self.headers.get("Authorization")))
        prompt = body["messages"][0]["content"]
        if "Label each sentence" in prompt:
            content = "A Dog sits. [D]\nDDD maybe happy. [A]"
        else:
            content = "1. There is a dog. (entity)\n2. The dog is brown. (color)"
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    """OpenAI-compatible fake on 127.0.0.1, a free port, bounded: at most 20 requests, 30 s."""
    server = HTTPServer(("127.0.0.1", 0), _FakeChat)
    server.timeout = 1.0
    stop = threading.Event()

    def serve():
        for _ in range(20):
            if stop.is_set():
                break
            server.handle_request()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    stop.set()
    thread.join(timeout=30)
    server.server_close()


def test_llm_backends_over_http(fake_server, tiny_clip_scorer, image_path, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    chat = HTTPChat(fake_server, model="fake", key_env="FAKE_KEY", timeout=10)
    from mmsum.scoring.faithscore import ClipVerifier

    scorer = FaithScorer(LLMRecognizer(chat), LLMDecomposer(chat), ClipVerifier(tiny_clip_scorer))
    r = scorer.score_one("A dog sits. Maybe it is happy.", [image_path])
    assert r.descriptive == [True, False]
    assert [(v.fact.text, v.fact.kind) for v in r.facts] == [
        ("There is a dog.", "entity"),
        ("The dog is brown.", "color"),
    ]
    body, auth = _FakeChat.requests[0]
    assert auth == "Bearer sk-test" and body["model"] == "fake" and body["temperature"] == 0


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A tiny random GPT-2 with the MiniLM (WordPiece) tokenizer, saved as a local folder."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from mmsum.models.tiny import minilm_dir

    path = tmp_path_factory.mktemp("tiny-gpt2")
    tok = AutoTokenizer.from_pretrained(minilm_dir())
    tok.save_pretrained(path)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=32, n_layer=2, n_head=2)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    return str(path)


def test_llm_backends_with_local_model(tiny_gpt2):
    lm = LocalLM(tiny_gpt2, max_new_tokens=8)
    out = lm("There is a dog.")
    assert isinstance(out, str)
    # Random weights produce no labels: every sentence defaults to descriptive; facts parse.
    assert LLMRecognizer(lm)(["A dog.", "A cat."]) == [True, True]
    assert all(isinstance(f, Fact) for f in LLMDecomposer(lm)("A dog.", 0))
