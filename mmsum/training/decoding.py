"""Decoding for SCST: K samples + the greedy baseline per input in one fused decode loop.

The encoder runs once on the B inputs; its states are repeated to B·(K+1) rows laid out as
`[ex0_s1..ex0_sK, ex0_greedy, ex1_s1, ...]` (the row order of `mmsum.rewards.expand_batch`), and a
single loop over the decoder with a KV cache extends all rows at once. Rows stop at EOS and are
padded after it. Token log-probs for the loss come from a separate teacher-forced forward pass
(`sequence_log_probs`), so nothing here depends on generate()'s internals.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from mmsum.models.clip_bart import ClipBartForConditionalGeneration


@dataclass
class FusedDecodeOutput:
    """Generated tokens (decoder start excluded) of B·(K+1) rows, padded after EOS."""

    sequences: torch.Tensor  # [B*(K+1), T] long
    mask: torch.Tensor  # [B*(K+1), T] bool: generated tokens up to and including EOS
    num_samples: int  # K
    has_greedy: bool

    @property
    def group_size(self) -> int:
        return self.num_samples + int(self.has_greedy)

    def sample_rows(self) -> torch.Tensor:
        """Row indices of the sampled sequences (B·K of them, example-major)."""
        n = self.sequences.shape[0]
        rows = torch.arange(n, device=self.sequences.device).view(-1, self.group_size)
        return rows[:, : self.num_samples].reshape(-1)

    def greedy_rows(self) -> torch.Tensor:
        if not self.has_greedy:
            raise ValueError("this decode has no greedy rows")
        n = self.sequences.shape[0]
        return torch.arange(self.group_size - 1, n, self.group_size, device=self.sequences.device)


def filter_logits(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Top-k / nucleus filtering (-inf outside); the identity with the defaults."""
    if top_k and top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        # Drop a token when the mass before it already reaches top_p (the top token always stays).
        drop_sorted = (cum - sorted_logits.softmax(-1)) >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_from_probs(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of `probs` [R, V] (rows need not be normalised), by inverse-CDF sampling.

    The same distribution as `torch.multinomial(probs, 1)`, ~3x faster on CPU over a 30k vocabulary
    (multinomial draws V exponentials per row; this draws one uniform). The CDF is accumulated in
    float64, so each token's probability is exact to ~1e-16 and zero-probability tokens are never
    drawn (`right=True` skips flat CDF steps).
    """
    cdf = probs.cumsum(-1, dtype=torch.float64)
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=torch.float64, device=probs.device)
    drawn = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
    return drawn.clamp_(max=probs.shape[-1] - 1)


def nonzero_logits_bias(model: ClipBartForConditionalGeneration) -> torch.Tensor | None:
    """BART's `final_logits_bias`, or None when it is zero: it is in every released BART, and
    skipping an exact `+ 0` saves a pass over [.., vocab] per LM-head call."""
    bias = model.final_logits_bias
    return bias if bool(bias.any()) else None


def lm_logits(
    model: ClipBartForConditionalGeneration, hidden: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """The LM head plus the bias from `nonzero_logits_bias` (checked once per decode, not per step)."""
    logits = model.lm_head(hidden)
    return logits if bias is None else logits + bias.to(logits.device)


def _decoder_step_logits(
    model: ClipBartForConditionalGeneration,
    tokens: torch.Tensor,
    encoder_states: torch.Tensor,
    encoder_mask: torch.Tensor,
    cache: EncoderDecoderCache,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    # transformers 5.x names the cache kwarg `cache` (past_key_values is deprecated).
    out = model.get_decoder()(
        input_ids=tokens,
        encoder_hidden_states=encoder_states,
        encoder_attention_mask=encoder_mask,
        cache=cache,
        use_cache=True,
    )
    return lm_logits(model, out.last_hidden_state[:, -1], bias)


@torch.no_grad()
def fused_sample_and_greedy(
    model: ClipBartForConditionalGeneration,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    image_features: torch.Tensor | None = None,
    image_mask: torch.Tensor | None = None,
    *,
    num_samples: int = 1,
    include_greedy: bool = True,
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> FusedDecodeOutput:
    """K samples and (optionally) the greedy decode of every input, in one loop.

    Greedy rows equal `model.generate(num_beams=1, do_sample=False, max_new_tokens=...)` token
    for token: the forced BOS/EOS of the model's generation config are applied the same way
    (generate()'s other logits processors — repetition penalties, min_length — are not).
    Seeded sampling is reproducible: pass a `torch.Generator`.
    """
    if num_samples < 0 or (num_samples == 0 and not include_greedy):
        raise ValueError("need at least one sample or the greedy row")
    config = model.config
    gen_config = model.generation_config
    eos_id = gen_config.eos_token_id if gen_config.eos_token_id is not None else config.eos_token_id
    eos_ids = torch.tensor(eos_id if isinstance(eos_id, list) else [eos_id], device=input_ids.device)
    pad_id = config.pad_token_id
    forced_bos = gen_config.forced_bos_token_id
    forced_eos = gen_config.forced_eos_token_id
    start_id = gen_config.decoder_start_token_id
    start_id = config.decoder_start_token_id if start_id is None else start_id

    encoder_outputs, joint_mask, _ = model.encode(input_ids, attention_mask, image_features, image_mask)
    group = num_samples + int(include_greedy)
    states = encoder_outputs.last_hidden_state.repeat_interleave(group, dim=0)
    enc_mask = joint_mask.repeat_interleave(group, dim=0)
    n_rows = states.shape[0]
    is_greedy = torch.zeros(n_rows, dtype=torch.bool, device=states.device)
    if include_greedy:
        is_greedy[group - 1 :: group] = True
    greedy_rows, sample_rows = is_greedy.nonzero().squeeze(-1), (~is_greedy).nonzero().squeeze(-1)

    cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
    bias = nonzero_logits_bias(model)
    current = torch.full((n_rows, 1), start_id, dtype=torch.long, device=states.device)
    finished = torch.zeros(n_rows, dtype=torch.bool, device=states.device)
    tokens: list[torch.Tensor] = []
    for step in range(max_new_tokens):
        logits = _decoder_step_logits(model, current, states, enc_mask, cache, bias).float()
        # generate() counts the decoder start token in max_length = 1 + max_new_tokens.
        forced = None
        if step == 0 and forced_bos is not None:
            forced = forced_bos
        elif step == max_new_tokens - 1 and forced_eos is not None:
            forced = forced_eos if isinstance(forced_eos, int) else forced_eos[0]
        if forced is not None:
            next_tokens = torch.full((n_rows,), forced, dtype=torch.long, device=states.device)
        else:
            next_tokens = torch.empty(n_rows, dtype=torch.long, device=states.device)
            if include_greedy:
                next_tokens[greedy_rows] = logits.index_select(0, greedy_rows).argmax(-1)
            if num_samples:
                sample_logits = logits.index_select(0, sample_rows)
                if temperature != 1.0:
                    sample_logits = sample_logits / temperature
                probs = filter_logits(sample_logits, top_k, top_p).softmax(-1)
                next_tokens[sample_rows] = sample_from_probs(probs, generator)
        next_tokens = next_tokens.masked_fill(finished, pad_id)
        tokens.append(next_tokens)
        finished |= torch.isin(next_tokens, eos_ids)
        if bool(finished.all()):
            break
        current = next_tokens.unsqueeze(-1)
    sequences = torch.stack(tokens, dim=1)
    return FusedDecodeOutput(sequences, completion_mask(sequences, eos_ids), num_samples, include_greedy)


def completion_mask(sequences: torch.Tensor, eos_ids: torch.Tensor | int) -> torch.Tensor:
    """True on every token up to and including the first EOS (all tokens if there is none)."""
    eos_ids = torch.as_tensor(eos_ids, device=sequences.device).reshape(-1)
    is_eos = torch.isin(sequences, eos_ids).long()
    eos_before = is_eos.cumsum(-1) - is_eos  # EOS tokens strictly before each position
    return eos_before == 0


def sequence_log_probs(
    model: ClipBartForConditionalGeneration,
    encoder_states: torch.Tensor,
    encoder_mask: torch.Tensor,
    sequences: torch.Tensor,
) -> torch.Tensor:
    """Teacher-forced log p(y_t | y_<t, x) of each generated token [N, T] (with gradients).

    `encoder_states` / `encoder_mask` must already have one row per sequence. Positions after EOS
    hold the pad token's log-prob; mask them with `completion_mask`.
    """
    start_id = model.config.decoder_start_token_id
    decoder_input_ids = torch.cat([torch.full_like(sequences[:, :1], start_id), sequences[:, :-1]], dim=1)
    out = model.get_decoder()(
        input_ids=decoder_input_ids,
        encoder_hidden_states=encoder_states,
        encoder_attention_mask=encoder_mask,
        use_cache=False,
    )
    logits = lm_logits(model, out.last_hidden_state, nonzero_logits_bias(model)).float()
    log_probs = F.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, sequences.unsqueeze(-1)).squeeze(-1)
