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
        return int(self.model.text_projection.shape[-1]) if hasattr(self.model, "text_projection") else int(
            self.model.visual.output_dim
        )


def clip_id(model_name: str, pretrained: str | None) -> str:
    """The identifier recorded in manifests and checked by scorers: `model_name/pretrained-tag-or-file`."""
    tag = Path(pretrained).name if pretrained and os.path.sep in str(pretrained) else pretrained
    return f"{model_name}/{tag}"


def load_clip(model_name: str = "RN50x64", pretrained: str | None = "openai", device: str | torch.device = "cpu") -> LoadedClip:
    """Load an open_clip model in eval mode.

    `pretrained` is an open_clip tag (`openai`, `laion2b_s34b_b79k`, ...) or a local checkpoint file;
    the tiny offline CLIP (`mmsum-tiny-rn`) is built on first use at its `pretrained` path.
    """
    import open_clip

    register_open_clip_configs()
    if model_name == TINY_CLIP_NAME and pretrained and not Path(pretrained).is_file():
        ensure_tiny_clip(pretrained)
    try:
        model, _, preprocess = open_clip.create_model_and_transforms(model_name, pretrained=pretrained, device=device)
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
