"""Scoring fixtures: a tiny random RoBERTa (real byte-level BPE tokenizer, trained offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A photo depicts a cat sitting on a red mat next to the window.",
    "Paris is the capital of France, officials said on Monday.",
    "The government announced 1,000 new jobs in the energy sector.",
    "Scientists found water on the surface of the moon last year.",
]


def build_tiny_roberta(path: Path, seed: int = 0, layers: int = 4) -> Path:
    """A random RobertaModel with a byte-level BPE RobertaTokenizer, saved as a hub-style folder."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    path.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        CORPUS * 5,
        vocab_size=500,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    bpe.save_model(str(path))
    tok = RobertaTokenizer(
        vocab=str(path / "vocab.json"), merges=str(path / "merges.txt"), model_max_length=128
    )
    tok.save_pretrained(path)
    config = RobertaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
    )
    torch.manual_seed(seed)
    RobertaModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_roberta_path(model_cache) -> Path:
    path = model_cache / "tiny-roberta"
    if not (path / "config.json").is_file():
        build_tiny_roberta(path)
    return path


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    from mmsum.models.tiny import minilm_dir

    return minilm_dir()
