"""CLIP image features for prepared splits: one pooled embedding per image, streamed in batches.

Unreadable images never crash a run: a missing file or one PIL cannot decode (zero bytes,
truncated, not an image) gets status MISSING/CORRUPT and a zero row, and the pipeline removes it
from its example and counts it in the manifest.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from mmsum.scoring.encoders import LoadedClip, encode_images

OK, MISSING, CORRUPT = 0, 1, 2


# `jpeg_draft`: a JPEG is decoded at 1/2, 1/4 or 1/8 scale in the DCT domain (PIL's `draft`), as
# long as both sides stay at least this multiple of the CLIP input size; the bicubic resize then
# starts from the smaller image. Not bit-equal to decoding at full size (docs/data_prep.md).
DRAFT_MIN_MULTIPLE = 2


class ImageFiles(Dataset):
    """Preprocessed images from paths; (tensor, status) so a bad file is a value, not an exception."""

    def __init__(
        self, paths: Sequence[str], preprocess: Callable, blank: torch.Tensor, draft_size: int | None = None
    ):
        self.paths = list(paths)
        self.preprocess = preprocess
        self.blank = blank
        self.draft_size = draft_size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # PIL's DecompressionBomb/EXIF warnings are noise here
                with Image.open(self.paths[i]) as im:
                    if self.draft_size:
                        im.draft(None, (self.draft_size, self.draft_size))  # a no-op unless JPEG
                    im.load()  # decode now: truncated files fail here, not later in a worker
                    return self.preprocess(im.convert("RGB")), OK
        except FileNotFoundError:
            return self.blank, MISSING
        except Exception:  # UnidentifiedImageError, OSError("image file is truncated"), ...
            return self.blank, CORRUPT


def blank_input(clip: LoadedClip) -> torch.Tensor:
    return torch.zeros_like(clip.preprocess(Image.new("RGB", (8, 8))))


def clip_input_size(clip: LoadedClip) -> int:
    """The larger side of the CLIP's input image, in pixels."""
    size = clip.model.visual.image_size
    return int(max(size) if isinstance(size, (tuple, list)) else size)


def encode_image_files(
    clip: LoadedClip,
    paths: Sequence[str],
    batch_size: int = 64,
    num_workers: int = 0,
    on_batch: Callable[[int], None] | None = None,
    jpeg_draft: bool = False,
) -> tuple[np.ndarray, list[int]]:
    """float32 features [len(paths), D] (zero rows for bad images) and a status per path.

    Batches are formed in path order, so the same paths always give the same numbers (resume
    relies on that). `on_batch(n)` is called after each batch, for progress bars. `jpeg_draft`:
    decode large JPEGs at reduced scale (see DRAFT_MIN_MULTIPLE); faster, not bit-equal.
    """
    dim = clip.feature_dim
    if not paths:
        return np.zeros((0, dim), np.float32), []
    loader = DataLoader(
        ImageFiles(
            paths,
            clip.preprocess,
            blank_input(clip),
            DRAFT_MIN_MULTIPLE * clip_input_size(clip) if jpeg_draft else None,
        ),
        batch_size=batch_size,
        num_workers=num_workers,
        shuffle=False,
        persistent_workers=False,
    )
    feats, status = [], []
    for images, st in loader:
        st = st.tolist()
        out = encode_images(clip, images).cpu().numpy().astype(np.float32)
        out[[i for i, s in enumerate(st) if s != OK]] = 0.0
        feats.append(out)
        status.extend(st)
        if on_batch is not None:
            on_batch(len(st))
    return np.concatenate(feats, 0), status


@torch.inference_mode()
def encode_texts(clip: LoadedClip, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
    """CLIP text features [N, D] (not normalised); the tokenizer truncates to the context length."""
    device = next(clip.model.parameters()).device
    out = []
    for i in range(0, len(texts), batch_size):
        tokens = clip.tokenizer(list(texts[i : i + batch_size])).to(device)
        out.append(clip.model.encode_text(tokens).float().cpu().numpy())
    return np.concatenate(out, 0) if out else np.zeros((0, clip.feature_dim), np.float32)
