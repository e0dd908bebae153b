"""CLIP-BART: BART whose encoder also reads CLIP image embeddings, plus an image-guidance head.

Wan & Bansal (2022), "Evaluating and Improving Factuality in Multimodal Abstractive Summarization".
This file is self-contained (torch + transformers only): it is what ships to the Hugging Face hub,
loadable with `AutoModelForSeq2SeqLM.from_pretrained(dir, trust_remote_code=True)`.

Encoder input layout: `[image slot 0 .. image slot max_images-1 | text tokens]`.
Image slots come first and there are always `max_images` of them (padded ones are masked out),
so every text token sits at the same position whatever the batch's text padding or image count:
an example's outputs do not depend on what else is in its batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BartConfig, BartForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput


class ClipBartConfig(BartConfig):
    """A `BartConfig` plus the visual settings.

    Args:
        visual_feat_dim: size of one pooled CLIP image embedding (1024 for RN50x64).
        max_images: image slots per example; more images than this is an error.
        guidance_loss_weight: weight of the image-guidance cross-entropy (6.0 in the authors' code).
        clip_model: the open_clip `model/pretrained` pair that must produce the image features.
    """

    model_type = "clip_bart"

    def __init__(
        self,
        visual_feat_dim: int = 1024,
        max_images: int = 10,
        guidance_loss_weight: float = 6.0,
        clip_model: str | None = None,
        **kwargs,
    ):
        self.visual_feat_dim = visual_feat_dim
        self.max_images = max_images
        self.guidance_loss_weight = guidance_loss_weight
        self.clip_model = clip_model
        super().__init__(**kwargs)


@dataclass
class ClipBartOutput(Seq2SeqLMOutput):
    """`Seq2SeqLMOutput` plus the guidance head's outputs (`loss` = LM loss + weighted guidance loss)."""

    lm_loss: torch.FloatTensor | None = None
    guidance_loss: torch.FloatTensor | None = None
    guidance_logits: torch.FloatTensor | None = None


def guidance_cross_entropy(
    guidance_logits: torch.Tensor, guidance_labels: torch.Tensor, image_mask: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy of the guidance head over real image slots only (0 if there are none)."""
    labels = guidance_labels.long().masked_fill(~image_mask.bool(), -100)
    if not bool((labels != -100).any()):
        return guidance_logits.sum() * 0.0
    return F.cross_entropy(guidance_logits.reshape(-1, 2).float(), labels.reshape(-1), ignore_index=-100)


class ClipBartForConditionalGeneration(BartForConditionalGeneration):
    config_class = ClipBartConfig

    def __init__(self, config: ClipBartConfig):
        super().__init__(config)
        d_model = config.d_model
        self.image_projection = nn.Linear(config.visual_feat_dim, d_model)
        self.image_slot_embedding = nn.Embedding(config.max_images, d_model)
        # Linear-tanh-Linear to {not summary-worthy, summary-worthy}, as in the authors' code.
        self.guidance_head = nn.Sequential(nn.Linear(d_model, d_model), nn.Tanh(), nn.Linear(d_model, 2))
        self._init_visual_weights()

    def _init_visual_weights(self) -> None:
        std = self.config.init_std
        for module in (self.image_projection, self.guidance_head[0], self.guidance_head[2]):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            nn.init.zeros_(module.bias)
        nn.init.normal_(self.image_slot_embedding.weight, mean=0.0, std=std)

    @classmethod
    def from_bart(
        cls,
        bart_name_or_path: str,
        visual_feat_dim: int,
        max_images: int = 10,
        guidance_loss_weight: float = 6.0,
        clip_model: str | None = None,
        **config_overrides,
    ) -> ClipBartForConditionalGeneration:
        """Start from any BART checkpoint (hub name or local dir); the visual parts start random."""
        bart = BartForConditionalGeneration.from_pretrained(bart_name_or_path)
        config_dict = bart.config.to_dict()
        for key in ("model_type", "architectures", "transformers_version", "auto_map"):
            config_dict.pop(key, None)
        config_dict.update(config_overrides)
        config = ClipBartConfig(
            visual_feat_dim=visual_feat_dim,
            max_images=max_images,
            guidance_loss_weight=guidance_loss_weight,
            clip_model=clip_model,
            **config_dict,
        )
        model = cls(config)
        missing, unexpected = model.load_state_dict(bart.state_dict(), strict=False)
        visual_prefixes = ("image_projection.", "image_slot_embedding.", "guidance_head.")
        missing = [k for k in missing if not k.startswith(visual_prefixes)]
        if missing or unexpected:
            raise RuntimeError(
                f"{bart_name_or_path}: BART weights do not fit CLIP-BART: {missing=} {unexpected=}"
            )
        model.generation_config = bart.generation_config
        return model

    def _pad_image_slots(
        self, image_features: torch.Tensor | None, image_mask: torch.Tensor | None, batch_size: int, device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        max_images, dim = self.config.max_images, self.config.visual_feat_dim
        if image_features is None:
            image_features = torch.zeros(batch_size, 0, dim, device=device)
        if image_features.shape[-1] != dim:
            raise ValueError(
                f"image_features are {image_features.shape[-1]}-d but this model expects "
                f"visual_feat_dim={dim} (CLIP {self.config.clip_model!r})"
            )
        n_images = image_features.shape[1]
        if image_mask is None:
            image_mask = torch.ones(batch_size, n_images, dtype=torch.bool, device=device)
        if n_images > max_images:
            if bool(image_mask[:, max_images:].any()):
                raise ValueError(f"{n_images} image slots given but the model has max_images={max_images}")
            image_features, image_mask = image_features[:, :max_images], image_mask[:, :max_images]
        elif n_images < max_images:
            pad = max_images - n_images
            image_features = F.pad(image_features, (0, 0, 0, pad))
            image_mask = F.pad(image_mask.bool(), (0, pad), value=False)
        return image_features, image_mask.bool()

    def encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_features: torch.Tensor | None = None,
        image_mask: torch.Tensor | None = None,
    ) -> tuple[BaseModelOutput, torch.Tensor, torch.Tensor]:
        """Run the encoder on images + text.

        Returns the encoder output over `[images | text]`, the joint attention mask, and the
        guidance logits [B, max_images, 2].
        """
        batch_size = input_ids.shape[0]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        image_features, image_mask = self._pad_image_slots(
            image_features, image_mask, batch_size, input_ids.device
        )
        encoder = self.get_encoder()
        text_embeds = encoder.embed_tokens(input_ids)
        slots = torch.arange(self.config.max_images, device=input_ids.device)
        image_embeds = self.image_projection(
            image_features.to(text_embeds.dtype)
        ) + self.image_slot_embedding(slots)
        # Zero padded slots so garbage features can't leak through numerics; they are masked anyway.
        image_embeds = image_embeds * image_mask.unsqueeze(-1).to(image_embeds.dtype)
        inputs_embeds = torch.cat([image_embeds, text_embeds], dim=1)
        joint_mask = torch.cat([image_mask.to(attention_mask.dtype), attention_mask], dim=1)
        encoder_outputs = encoder(inputs_embeds=inputs_embeds, attention_mask=joint_mask, return_dict=True)
        image_states = encoder_outputs.last_hidden_state[:, : self.config.max_images]
        guidance_logits = self.guidance_head(image_states)
        return encoder_outputs, joint_mask, guidance_logits

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        image_features: torch.Tensor | None = None,
        image_mask: torch.Tensor | None = None,
        guidance_labels: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs=None,
        labels: torch.Tensor | None = None,
        **kwargs,
    ) -> ClipBartOutput:
        # kwargs carry the decoder cache and flags under whatever names this transformers uses.
        kwargs.pop("token_type_ids", None)
        kwargs.pop("return_dict", None)
        guidance_logits = None
        if encoder_outputs is None:
            if input_ids is None:
                raise ValueError(
                    "CLIP-BART needs input_ids (and image_features) or precomputed encoder_outputs"
                )
            encoder_outputs, attention_mask, guidance_logits = self.encode(
                input_ids, attention_mask, image_features, image_mask
            )
        elif isinstance(encoder_outputs, tuple):
            encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(
                labels, self.config.pad_token_id, self.config.decoder_start_token_id
            )
        outputs = super().forward(
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            return_dict=True,
            **kwargs,
        )
        lm_loss = guidance_loss = loss = None
        if labels is not None:
            lm_loss = F.cross_entropy(
                outputs.logits.reshape(-1, outputs.logits.shape[-1]).float(),
                labels.reshape(-1),
                ignore_index=-100,
            )
            loss = lm_loss
        if guidance_labels is not None and guidance_logits is not None:
            guidance_loss = self.guidance_loss(guidance_logits, guidance_labels, attention_mask)
            loss = guidance_loss * self.config.guidance_loss_weight + (loss if loss is not None else 0.0)
        fields = {k: v for k, v in outputs.items() if k != "loss"}
        fields["encoder_last_hidden_state"] = encoder_outputs.last_hidden_state
        return ClipBartOutput(
            **fields,
            loss=loss,
            lm_loss=lm_loss,
            guidance_loss=guidance_loss,
            guidance_logits=guidance_logits,
        )

    def guidance_loss(
        self, guidance_logits: torch.Tensor, guidance_labels: torch.Tensor, joint_mask: torch.Tensor
    ) -> torch.Tensor:
        """Guidance cross-entropy over real images, from `encode()`'s logits and joint mask."""
        # The joint mask starts with the (already padded) image slots.
        padded_mask = joint_mask[:, : self.config.max_images].bool()
        padded_labels = F.pad(
            guidance_labels, (0, self.config.max_images - guidance_labels.shape[1]), value=0
        )
        return guidance_cross_entropy(guidance_logits, padded_labels, padded_mask)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        image_features: torch.Tensor | None = None,
        image_mask: torch.Tensor | None = None,
        **generate_kwargs,
    ):
        """`generate()` from text + image features; encodes once, then decodes with HF's generate."""
        generate_kwargs.pop("token_type_ids", None)
        if input_ids is None or "encoder_outputs" in generate_kwargs:
            return super().generate(attention_mask=attention_mask, **generate_kwargs)
        encoder_outputs, joint_mask, _ = self.encode(input_ids, attention_mask, image_features, image_mask)
        return super().generate(encoder_outputs=encoder_outputs, attention_mask=joint_mask, **generate_kwargs)

    @torch.no_grad()
    def image_guidance(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_features: torch.Tensor | None = None,
        image_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Probability that each image slot is summary-worthy [B, max_images]; 0 on padded slots."""
        _, joint_mask, guidance_logits = self.encode(input_ids, attention_mask, image_features, image_mask)
        probs = guidance_logits.float().softmax(-1)[..., 1]
        return probs * joint_mask[:, : self.config.max_images].to(probs.dtype)


def shift_tokens_right(
    input_ids: torch.Tensor, pad_token_id: int, decoder_start_token_id: int
) -> torch.Tensor:
    """Teacher-forcing decoder inputs: `[start] + labels[:-1]`, with -100 replaced by padding."""
    shifted = input_ids.new_zeros(input_ids.shape)
    shifted[:, 1:] = input_ids[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


ClipBartConfig.register_for_auto_class()
ClipBartForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
