"""CLIP-S, RefCLIP-S and CLIPText-S over precomputed image embeddings.

CLIP-S (Wan & Bansal 2022, paper formula): the mean, over every (real image, summary sentence)
pair, of the cosine between CLIP's image and text embeddings. Their released reward code averaged
over zero-padded image slots too, which dilutes the score by the amount of padding; here padded
slots (image_mask False) never enter the mean, and an example with no real image gets NaN
("not applicable").

Options (`ClipSOptions`), with their sources:
  split_sentences  True = paper formula (one text per sentence); False = the authors' released
                   script (the whole summary as one text, truncated to CLIP's context).
  prefix           "" (Wan & Bansal); CLIPScore (Hessel et al. 2021) prepends "A photo depicts ".
  w, clamp         per-pair scaling w * cos (clamp=False, w=1: Wan & Bansal) or CLIPScore's
                   w * max(cos, 0) with w = 2.5.
Texts longer than the context are truncated by open_clip's tokenizer, which keeps the end-of-text
token in the last slot (CLIP pools at that token, so dropping it would pool a random word).
"""

from __future__ import annotations

import os
import re
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from mmsum.scoring.encoders import LoadedClip, load_clip, resolve_clip_pretrained


class ClipFeatureMismatch(ValueError):
    """Image features were made by a different CLIP model than the scorer's text encoder."""


@dataclass(frozen=True)
class ClipSOptions:
    split_sentences: bool = True
    prefix: str = ""
    w: float = 1.0
    clamp: bool = False

    @classmethod
    def paper(cls) -> ClipSOptions:
        """Wan & Bansal (2022) formula: per-sentence, no prompt, raw cosine."""
        return cls()

    @classmethod
    def released_script(cls) -> ClipSOptions:
        """Wan & Bansal's released script: whole summary (truncated to 77 tokens), raw cosine."""
        return cls(split_sentences=False)

    @classmethod
    def clipscore(cls) -> ClipSOptions:
        """Hessel et al. (2021) CLIPScore: "A photo depicts " prompt, 2.5 * max(cos, 0)."""
        return cls(split_sentences=False, prefix="A photo depicts ", w=2.5, clamp=True)


_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def split_sentences(text: str) -> list[str]:
    """Newlines first, then sentence-final punctuation followed by whitespace.

    A small rule-based splitter (no model download); good enough for news summaries. An empty or
    whitespace-only text yields [""] so that every summary has at least one text to score.
    """
    sents = [s.strip() for line in text.split("\n") for s in _SENT_END.split(line)]
    sents = [s for s in sents if s]
    return sents or [""]


class ClipScorer:
    """CLIP text encoder + scoring formulas; image embeddings come precomputed.

    Not an nn.Module: the CLIP model is a plain attribute, so it never becomes part of a
    LightningModule's parameters or checkpoints.
    """

    def __init__(
        self,
        model: str | LoadedClip = "RN50x64",
        pretrained: str | os.PathLike | None = "openai",
        device: str | torch.device | None = None,
        options: ClipSOptions | None = None,
        batch_size: int = 256,
        text_cache_size: int = 50_000,
        amp: bool = True,
    ) -> None:
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.clip = (
            model
            if isinstance(model, LoadedClip)
            else load_clip(model, resolve_clip_pretrained(model, pretrained), device)
        )
        self.name = self.clip.name
        self.options = options or ClipSOptions()
        self.batch_size = int(batch_size)
        self.amp = amp
        self._text_cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        self.text_cache_size = int(text_cache_size)

    @property
    def device(self) -> torch.device:
        return next(self.clip.model.parameters()).device

    @property
    def feature_dim(self) -> int:
        return self.clip.feature_dim

    def _amp(self):
        if self.amp and self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    # -- encoders -----------------------------------------------------------------------------
    @torch.no_grad()
    def encode_images(self, images: torch.Tensor | Sequence[Any]) -> torch.Tensor:
        """Raw (un-normalised) image embeddings [N, D] of preprocessed tensors or PIL images,
        the same thing data prep stores in a prepared split."""
        if not isinstance(images, torch.Tensor):
            images = (
                torch.stack([self.clip.preprocess(im) for im in images]) if len(images) else torch.zeros(0)
            )
        if images.numel() == 0:
            return torch.zeros(0, self.feature_dim)
        out = []
        for start in range(0, len(images), self.batch_size):
            with self._amp():
                out.append(
                    self.clip.model.encode_image(
                        images[start : start + self.batch_size].to(self.device)
                    ).float()
                )
        return torch.cat(out)

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit-normalised text embeddings [N, D] (texts used verbatim; LRU-cached by content)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        # Batch by length: similar-length texts together (the tokenizer pads to the context anyway,
        # but the cache makes repeated baselines and references free).
        missing.sort(key=len)
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            tokens = self.clip.tokenizer(chunk).to(self.device)
            with self._amp():
                emb = self.clip.model.encode_text(tokens).float()
            for t, e in zip(chunk, F.normalize(emb, dim=-1)):
                self._text_cache[t] = e
        out = torch.stack([self._text_cache[t] for t in texts]) if texts else torch.zeros(0, self.feature_dim)
        for t in texts:
            self._text_cache.move_to_end(t)
        while len(self._text_cache) > self.text_cache_size:
            self._text_cache.popitem(last=False)
        return out.to(self.device)

    # -- checks -------------------------------------------------------------------------------
    def check_features(self, manifest_or_split: Mapping[str, Any] | Any) -> None:
        """Raise ClipFeatureMismatch unless a prepared split's features come from this CLIP.

        Accepts a manifest dict, a PreparedSplit or a split directory path.
        """
        if isinstance(manifest_or_split, (str, os.PathLike)):
            from mmsum.data.prepared import load_prepared

            manifest_or_split = load_prepared(manifest_or_split)
        manifest = getattr(manifest_or_split, "manifest", manifest_or_split)
        name, dim = manifest.get("clip_model"), manifest.get("feature_dim")
        if dim is not None and int(dim) != self.feature_dim:
            raise ClipFeatureMismatch(
                f"image features are {dim}-d (CLIP {name!r}) but the scorer's CLIP {self.name!r} is "
                f"{self.feature_dim}-d; score with the CLIP that prepared the split"
            )
        if name is None:
            warnings.warn(
                "prepared split does not record its CLIP model; cannot verify CLIP-S inputs", stacklevel=2
            )
        elif name != self.name:
            raise ClipFeatureMismatch(
                f"image features were made by CLIP {name!r} but the scorer uses {self.name!r}: the "
                "cosines would be meaningless. Configure the scorer with the split's CLIP model or "
                "re-prepare the data"
            )

    # -- formulas -----------------------------------------------------------------------------
    def _opts(self, overrides: Mapping[str, Any]) -> ClipSOptions:
        return replace(self.options, **overrides) if overrides else self.options

    @staticmethod
    def _scale(cos: torch.Tensor, o: ClipSOptions) -> torch.Tensor:
        return o.w * (cos.clamp(min=0) if o.clamp else cos)

    @torch.no_grad()
    def clip_s(
        self,
        image_features: torch.Tensor,
        image_mask: torch.Tensor | None,
        summaries: Sequence[str],
        **options: Any,
    ) -> torch.Tensor:
        """Per-example CLIP-S [B] (float32, CPU); NaN where an example has no real image.

        image_features: [B, M, D] raw or normalised; image_mask: [B, M] bool (None = all real).
        options override this scorer's ClipSOptions (split_sentences, prefix, w, clamp).
        """
        o = self._opts(options)
        B = len(summaries)
        if image_features.dim() != 3 or image_features.shape[0] != B:
            raise ValueError(f"image_features must be [B={B}, M, D], got {tuple(image_features.shape)}")
        if image_features.shape[-1] != self.feature_dim:
            raise ClipFeatureMismatch(
                f"image features are {image_features.shape[-1]}-d but CLIP {self.name!r} is {self.feature_dim}-d"
            )
        if image_mask is None:
            image_mask = torch.ones(image_features.shape[:2], dtype=torch.bool)
        sents = [split_sentences(s) if o.split_sentences else [s.strip()] for s in summaries]
        flat = [o.prefix + s for ss in sents for s in ss]
        text = self.encode_texts(flat)  # [S, D]
        S_max = max(len(ss) for ss in sents) if sents else 0
        D = self.feature_dim
        txt = torch.zeros(B, max(S_max, 1), D, device=self.device)
        s_mask = torch.zeros(B, max(S_max, 1), dtype=torch.bool, device=self.device)
        offset = 0
        for b, ss in enumerate(sents):
            txt[b, : len(ss)] = text[offset : offset + len(ss)]
            s_mask[b, : len(ss)] = True
            offset += len(ss)
        img = F.normalize(image_features.to(self.device, torch.float32), dim=-1)
        m_mask = image_mask.to(self.device, torch.bool)
        cos = torch.einsum("bmd,bsd->bms", img, txt)
        pair = m_mask[:, :, None] & s_mask[:, None, :]
        vals = self._scale(cos, o).masked_fill(~pair, 0.0)
        n = pair.sum(dim=(1, 2))
        out = vals.sum(dim=(1, 2)) / n.clamp(min=1)
        return out.masked_fill(n == 0, float("nan")).float().cpu()

    @torch.no_grad()
    def clip_text_s(
        self, summaries: Sequence[str], references: Sequence[str | Sequence[str]], prefix: str | None = None
    ) -> torch.Tensor:
        """CLIPText-S [B]: max cosine between the summary's and the references' CLIP text embeddings.

        Whole texts (truncated to the context), with the same prompt prefix on both sides, as in
        Hessel et al.'s RefCLIPScore code.
        """
        prefix = self.options.prefix if prefix is None else prefix
        groups = [[r] if isinstance(r, str) else list(r) for r in references]
        if len(groups) != len(summaries):
            raise ValueError(f"{len(summaries)} summaries but {len(groups)} reference groups")
        cand = self.encode_texts([prefix + s.strip() for s in summaries])
        refs = self.encode_texts([prefix + r.strip() for g in groups for r in g])
        out, offset = [], 0
        for b, g in enumerate(groups):
            if not g:
                out.append(torch.tensor(float("nan"), device=self.device))
                continue
            out.append((refs[offset : offset + len(g)] @ cand[b]).max())
            offset += len(g)
        return torch.stack(out).float().cpu() if out else torch.zeros(0)

    def ref_clip_s(
        self,
        image_features: torch.Tensor,
        image_mask: torch.Tensor | None,
        summaries: Sequence[str],
        references: Sequence[str | Sequence[str]],
        **options: Any,
    ) -> torch.Tensor:
        """RefCLIP-S [B]: harmonic mean of the (scaled) CLIP-S and max(CLIPText-S, 0).

        NaN where CLIP-S is NaN (no image); 0 where both parts are 0.
        """
        o = self._opts(options)
        # Both parts clamped at 0 (CLIPScore clamps the image part; an unclamped negative cosine
        # would make the harmonic mean meaningless).
        image_part = self.clip_s(image_features, image_mask, summaries, **options).clamp(min=0)
        text_part = self.clip_text_s(summaries, references, prefix=o.prefix).clamp(min=0)
        denom = image_part + text_part
        hm = 2 * image_part * text_part / denom
        return torch.where(denom == 0, torch.zeros_like(hm), hm)
