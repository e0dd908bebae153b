"""Fused sample+greedy decoding: greedy equals generate(), seeded sampling, EOS masking."""

from __future__ import annotations

import pytest
import torch

from mmsum.models.clip_bart import ClipBartForConditionalGeneration
from mmsum.training.decoding import (
    completion_mask,
    filter_logits,
    fused_sample_and_greedy,
    sample_from_probs,
    sequence_log_probs,
)


@pytest.fixture(scope="module")
def model(tiny_bart_path) -> ClipBartForConditionalGeneration:
    torch.manual_seed(0)
    model = ClipBartForConditionalGeneration.from_bart(str(tiny_bart_path), visual_feat_dim=16, max_images=3)
    # A random tiny BART repeats one token: perturb the weights so decodes vary, and make a token that
    # some rows produce early the EOS, so rows finish at different steps.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    model.config.eos_token_id = model.generation_config.eos_token_id = 6873
    return model.eval()


def _inputs(batch_size: int = 6, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1000, 5000, (batch_size, 12), generator=g)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, 7:] = 0
    image_mask = torch.ones(batch_size, 3, dtype=torch.bool)
    image_mask[1] = False
    image_mask[2, 1:] = False
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "image_features": torch.randn(batch_size, 3, 16, generator=g),
        "image_mask": image_mask,
    }


@pytest.mark.parametrize("num_samples", [1, 3])
def test_greedy_rows_equal_generate_token_for_token(model, num_samples):
    inputs = _inputs()
    max_new = 14
    reference = model.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=max_new)[:, 1:]
    out = fused_sample_and_greedy(model, **inputs, num_samples=num_samples, max_new_tokens=max_new)
    assert out.sequences.shape[0] == inputs["input_ids"].shape[0] * (num_samples + 1)
    greedy = out.sequences[out.greedy_rows()]
    width = max(greedy.shape[1], reference.shape[1])
    pad = model.config.pad_token_id
    greedy = torch.nn.functional.pad(greedy, (0, width - greedy.shape[1]), value=pad)
    reference = torch.nn.functional.pad(reference, (0, width - reference.shape[1]), value=pad)
    assert torch.equal(greedy, reference)
    lengths = out.mask[out.greedy_rows()].sum(-1)
    assert lengths.min() < lengths.max(), "test needs decodes of different lengths"


def test_a_nonzero_final_logits_bias_is_applied(model):
    # Released BARTs have a zero bias, which the decode skips; a nonzero one must still count.
    import copy

    biased = copy.deepcopy(model)
    with torch.no_grad():
        biased.final_logits_bias.copy_(torch.randn_like(biased.final_logits_bias) * 5)
    inputs = _inputs()
    reference = biased.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=10)[:, 1:]
    greedy = fused_sample_and_greedy(biased, **inputs, num_samples=0, max_new_tokens=10).sequences
    unbiased = fused_sample_and_greedy(model, **inputs, num_samples=0, max_new_tokens=10).sequences
    width = min(reference.shape[1], greedy.shape[1])
    assert torch.equal(greedy[:, :width], reference[:, :width])
    assert not torch.equal(greedy, unbiased)


def test_seeded_sampling_is_reproducible_and_seed_dependent(model):
    inputs = _inputs()

    def run(seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        return fused_sample_and_greedy(
            model, **inputs, num_samples=2, max_new_tokens=10, generator=g
        ).sequences

    first, again, other = run(1), run(1), run(2)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_rows_stop_at_eos_and_pad_after(model):
    out = fused_sample_and_greedy(
        model, **_inputs(), num_samples=2, max_new_tokens=12, generator=torch.Generator().manual_seed(0)
    )
    eos, pad = model.config.eos_token_id, model.config.pad_token_id
    for row, mask in zip(out.sequences, out.mask):
        hits = (row == eos).nonzero().flatten()
        if len(hits):
            end = int(hits[0])
            assert bool((row[end + 1 :] == pad).all())
            assert int(mask.sum()) == end + 1  # EOS counted, padding not
        else:
            assert bool(mask.all())


def test_completion_mask_on_hand_built_rows():
    sequences = torch.tensor([[5, 6, 2, 0, 0], [2, 0, 0, 0, 0], [5, 6, 7, 8, 9]])
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(completion_mask(sequences, 2), expected)


def test_top_k_and_top_p_filtering():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(logits, top_k=2)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_logits(logits, top_p=0.7)).tolist() == [[False, False, True, True]]
    assert torch.equal(filter_logits(logits), logits)


def test_sequence_log_probs_match_the_full_forward(model):
    inputs = _inputs(3)
    out = fused_sample_and_greedy(model, **inputs, num_samples=1, include_greedy=False, max_new_tokens=8,
                                  generator=torch.Generator().manual_seed(0))  # fmt: skip
    encoder_outputs, joint_mask, _ = model.encode(**inputs)
    ours = sequence_log_probs(model, encoder_outputs.last_hidden_state, joint_mask, out.sequences)
    decoder_input_ids = torch.cat(
        [torch.full_like(out.sequences[:, :1], model.config.decoder_start_token_id), out.sequences[:, :-1]], 1
    )
    logits = model(**inputs, decoder_input_ids=decoder_input_ids).logits
    theirs = logits.log_softmax(-1).gather(-1, out.sequences.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_inverse_cdf_sampler_matches_the_distribution():
    probs = torch.tensor([[0.5, 0.0, 0.3, 0.15, 0.05, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 2.0]])
    n = 200_000
    g = torch.Generator().manual_seed(0)
    drawn = sample_from_probs(probs.repeat_interleave(n, dim=0), g).view(2, n)
    freq = torch.stack([torch.bincount(row, minlength=6).double() / n for row in drawn])
    expected = probs.double() / probs.double().sum(-1, keepdim=True)
    # 4.5 standard errors of a binomial proportion: fails by chance with p < 1e-5 per cell
    tolerance = 4.5 * (expected * (1 - expected) / n).sqrt()
    assert bool(((freq - expected).abs() <= tolerance).all()), (freq, expected)
    assert freq[0, 1] == 0 and freq[0, 5] == 0  # zero-probability tokens are never drawn
    assert torch.equal(drawn[1], torch.full((n,), 5))  # unnormalised rows are fine
    again = sample_from_probs(probs.repeat_interleave(n, dim=0), torch.Generator().manual_seed(0))
    assert torch.equal(again.view(2, n), drawn)


def test_inverse_cdf_sampler_agrees_with_multinomial_on_a_large_vocabulary():
    # The same distribution as torch.multinomial: compare the two samplers' token frequencies
    # on a peaked 30k-word softmax (two-sample test on the top tokens).
    logits = torch.randn(1, 30522, generator=torch.Generator().manual_seed(1)) * 4
    probs = logits.softmax(-1)
    n, chunk = 6_000, 1_000  # in chunks: [n, 30522] float64 at once would be 1.5 GB
    g_ours, g_theirs = torch.Generator().manual_seed(2), torch.Generator().manual_seed(3)
    rows = probs.expand(chunk, -1)
    ours = torch.cat([sample_from_probs(rows, g_ours) for _ in range(n // chunk)])
    theirs = torch.cat(
        [torch.multinomial(rows, 1, generator=g_theirs).squeeze(-1) for _ in range(n // chunk)]
    )
    top = probs[0].topk(20).indices
    f_ours = torch.stack([(ours == t).double().mean() for t in top])
    f_theirs = torch.stack([(theirs == t).double().mean() for t in top])
    p = probs[0, top].double()
    assert bool(((f_ours - f_theirs).abs() <= 4.5 * (2 * p * (1 - p) / n).sqrt()).all())
