"""CLIP-BART invariants and the round trips of the tiny models through the real loading code."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, BartForConditionalGeneration

from mmsum.models.clip_bart import ClipBartConfig, ClipBartForConditionalGeneration, guidance_cross_entropy

FEATURE_DIM = 32
MAX_IMAGES = 4


@pytest.fixture(scope="module")
def tokenizer(tiny_bart_path):
    return AutoTokenizer.from_pretrained(tiny_bart_path)


@pytest.fixture(scope="module")
def model(tiny_bart_path):
    torch.manual_seed(0)
    return ClipBartForConditionalGeneration.from_bart(
        str(tiny_bart_path), visual_feat_dim=FEATURE_DIM, max_images=MAX_IMAGES
    ).eval()


def _inputs(tokenizer, docs, summaries):
    source = tokenizer(docs, padding=True, return_tensors="pt")
    labels = tokenizer(summaries, padding=True, return_tensors="pt")
    return source, labels["input_ids"].masked_fill(labels["attention_mask"] == 0, -100)


def test_from_bart_copies_every_bart_weight(model, tiny_bart_path):
    bart = BartForConditionalGeneration.from_pretrained(tiny_bart_path)
    ours = model.state_dict()
    for name, tensor in bart.state_dict().items():
        assert torch.equal(ours[name], tensor), name
    assert isinstance(model.config, ClipBartConfig)
    assert model.config.visual_feat_dim == FEATURE_DIM


def test_outputs_do_not_depend_on_text_or_image_padding_in_the_batch(model, tokenizer):
    torch.manual_seed(1)
    docs = ["anna smith saw a red circle in paris .", "a much longer document about berlin " * 6]
    source, labels = _inputs(tokenizer, docs, ["anna saw a red circle .", "berlin"])
    features = torch.randn(2, MAX_IMAGES, FEATURE_DIM)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)

    batched = model(**source, image_features=features, image_mask=mask, labels=labels)
    alone_source, alone_labels = _inputs(tokenizer, docs[:1], ["anna saw a red circle ."])
    alone = model(**alone_source, image_features=features[:1, :1], labels=alone_labels)

    n = int((alone_labels != -100).sum())
    torch.testing.assert_close(batched.logits[0, :n], alone.logits[0, :n], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        batched.guidance_logits[0, :1], alone.guidance_logits[0, :1], atol=1e-5, rtol=1e-5
    )


def test_padded_image_slot_changes_nothing_even_with_garbage_features(model, tokenizer):
    source, labels = _inputs(tokenizer, ["clara diaz visited rome ."], ["clara visited rome ."])
    features = torch.randn(1, 2, FEATURE_DIM)
    base = model(**source, image_features=features, labels=labels)
    padded_features = torch.cat([features, 100 * torch.randn(1, 1, FEATURE_DIM)], dim=1)
    padded = model(
        **source,
        image_features=padded_features,
        image_mask=torch.tensor([[True, True, False]]),
        labels=labels,
    )
    torch.testing.assert_close(base.logits, padded.logits, atol=1e-6, rtol=1e-6)


def test_images_change_the_output(model, tokenizer):
    source, labels = _inputs(tokenizer, ["clara diaz visited rome ."], ["clara visited rome ."])
    a = model(**source, image_features=torch.randn(1, 1, FEATURE_DIM), labels=labels).logits
    b = model(**source, image_features=torch.randn(1, 1, FEATURE_DIM), labels=labels).logits
    assert not torch.allclose(a, b)


def test_guidance_loss_ignores_padded_slots():
    logits = torch.randn(2, 3, 2)
    labels = torch.tensor([[1, 0, 1], [0, 1, 0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    loss = guidance_cross_entropy(logits, labels, mask)
    real = torch.stack([logits[0, 0], logits[0, 1], logits[1, 0]])
    expected = torch.nn.functional.cross_entropy(real, torch.tensor([1, 0, 0]))
    torch.testing.assert_close(loss, expected)
    # Changing labels or logits of a padded slot does not move the loss.
    logits2, labels2 = logits.clone(), labels.clone()
    logits2[0, 2] = 50.0
    labels2[1, 2] = 1
    torch.testing.assert_close(guidance_cross_entropy(logits2, labels2, mask), expected)
    # No real image at all: zero loss that still backpropagates.
    assert float(guidance_cross_entropy(logits, labels, torch.zeros_like(mask))) == 0.0


def test_model_loss_is_lm_plus_weighted_guidance(model, tokenizer):
    source, labels = _inputs(tokenizer, ["david lee in vienna ."], ["david in vienna ."])
    out = model(
        **source,
        image_features=torch.randn(1, 2, FEATURE_DIM),
        labels=labels,
        guidance_labels=torch.tensor([[1, 0]]),
    )
    torch.testing.assert_close(out.loss, out.lm_loss + model.config.guidance_loss_weight * out.guidance_loss)


def test_feature_dim_mismatch_is_a_clear_error(model, tokenizer):
    source, _ = _inputs(tokenizer, ["x"], ["y"])
    with pytest.raises(ValueError, match="visual_feat_dim=32"):
        model(
            **source, image_features=torch.randn(1, 1, FEATURE_DIM + 1), decoder_input_ids=source["input_ids"]
        )


def test_too_many_images_is_a_clear_error(model, tokenizer):
    source, labels = _inputs(tokenizer, ["x"], ["y"])
    with pytest.raises(ValueError, match="max_images=4"):
        model(**source, image_features=torch.randn(1, MAX_IMAGES + 1, FEATURE_DIM), labels=labels)


def test_generate_is_batch_independent(model, tokenizer):
    docs = ["anna smith saw a red circle in paris .", "ben jones met officials in london on monday ."]
    source = tokenizer(docs, padding=True, return_tensors="pt")
    features = torch.randn(2, 2, FEATURE_DIM)
    kwargs = dict(max_new_tokens=6, num_beams=1, do_sample=False)
    batched = model.generate(**source, image_features=features, **kwargs)
    for i in range(2):
        alone = model.generate(
            **tokenizer(docs[i : i + 1], return_tensors="pt"), image_features=features[i : i + 1], **kwargs
        )
        n = alone.shape[1]
        assert torch.equal(batched[i, :n], alone[0])


def test_save_and_load_round_trip(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path)
    loaded = ClipBartForConditionalGeneration.from_pretrained(tmp_path).eval()
    source, labels = _inputs(tokenizer, ["rome ."], ["rome"])
    features = torch.randn(1, 1, FEATURE_DIM)
    torch.testing.assert_close(
        model(**source, image_features=features, labels=labels).logits,
        loaded(**source, image_features=features, labels=labels).logits,
    )


def test_tiny_bart_loads_through_from_pretrained(tiny_bart_path):
    bart = BartForConditionalGeneration.from_pretrained(tiny_bart_path)
    tok = AutoTokenizer.from_pretrained(tiny_bart_path)
    assert bart.config.pad_token_id == tok.pad_token_id
    assert bart.config.decoder_start_token_id == tok.cls_token_id
    assert (tiny_bart_path / "config.json").is_file()


def test_tiny_clip_loads_through_the_user_path(tiny_clip_path):
    import open_clip

    from mmsum.models.tiny import TINY_CLIP_NAME
    from mmsum.scoring.encoders import load_clip

    model, _, preprocess = open_clip.create_model_and_transforms(
        TINY_CLIP_NAME, pretrained=str(tiny_clip_path)
    )
    clip = load_clip(TINY_CLIP_NAME, str(tiny_clip_path))
    saved = torch.load(tiny_clip_path, weights_only=True)
    for name, tensor in model.state_dict().items():
        assert torch.equal(saved[name], tensor), name
    assert clip.feature_dim == 64
    from PIL import Image

    image = preprocess(Image.new("RGB", (80, 60), (200, 10, 10))).unsqueeze(0)
    assert clip.model.encode_image(image).shape == (1, 64)
