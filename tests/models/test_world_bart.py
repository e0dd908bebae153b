"""The testbed's summarizer: the demo world's own WordPiece vocabulary and the BART built on it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def world_bart_path(model_cache):
    from mmsum.models.tiny import ensure_tiny_bart

    return ensure_tiny_bart(model_cache / "world-bart", d_model=32, layers=1, vocabulary="world")


def test_world_tokenizer_encodes_every_world_text_without_unk(tmp_path):
    from data_prep import demo_world as w
    from mmsum.models.tiny import world_tokenizer

    tok = world_tokenizer()
    assert 200 < len(tok) < 400  # a few hundred words, not MiniLM's 30,522
    # Articles the vocabulary was not collected from (another seed, later indices).
    for i in range(30):
        scene = w._make_article(7, "test", 1000 + i)
        for text in (w.article_text(scene), *(im.caption for im in scene.images)):
            ids = tok(text)["input_ids"]
            assert tok.unk_token_id not in ids, text
            # Round trip (uncased, BERT clean-up of the spaces before punctuation).
            decoded = tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True)
            assert (
                decoded.split()
                == tok.decode(tok(text.lower())["input_ids"], skip_special_tokens=True).split()
            )
            assert decoded.replace(" ", "") == text.lower().replace(" ", "").replace("\n", "")
    # Outside the world: letters, not [UNK].
    assert tok.unk_token_id not in tok("zebra 42")["input_ids"]


def test_world_bart_loads_through_from_pretrained_and_generates(world_bart_path):
    import torch
    from transformers import AutoTokenizer, BartForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(world_bart_path)
    model = BartForConditionalGeneration.from_pretrained(world_bart_path)
    assert model.config.vocab_size == len(tok) and model.config.d_model == 32
    assert model.config.pad_token_id == tok.pad_token_id
    enc = tok(["John Smith showed two red circles in Paris ."], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=5)
    assert out.shape[0] == 1


def test_testbed_model_config_builds_the_world_bart_when_training_starts(tmp_path):
    from hydra import compose, initialize_config_dir
    from transformers import AutoConfig, AutoTokenizer

    from mmsum.cli.train import CONF_DIR
    from mmsum.models.tiny import build_configured_bart

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("train.yaml", overrides=["+experiment=testbed_xe", f"paths.cache_dir={tmp_path}"])
    path = cfg.model.bart_name_or_path
    assert path == str(tmp_path / "world-bart-d128-l3") and cfg.data.tokenizer_name_or_path == path
    assert not (tmp_path / "world-bart-d128-l3").exists()  # composing a config builds nothing
    build_configured_bart(path, cfg.model.build_tiny_bart)  # what train.py and the module do
    assert len(AutoTokenizer.from_pretrained(path)) < 400
    config = AutoConfig.from_pretrained(path)
    assert (config.d_model, config.encoder_layers, config.decoder_layers) == (128, 3, 3)


def test_build_options_are_checked(tmp_path):
    from mmsum.models.tiny import build_configured_bart

    build_configured_bart(tmp_path / "none", False)
    assert not (tmp_path / "none").exists()
    with pytest.raises(ValueError, match="minilm or world"):
        build_configured_bart(tmp_path / "bad", {"vocabulary": "gpt2"})
