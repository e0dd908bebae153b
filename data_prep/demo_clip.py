"""A CLIP that knows the demo world: contrastive training of the tiny open_clip on its images.

`python -m data_prep demo_clip out=PATH [seconds=120] [steps=...] [seed=0] [model=mmsum-tiny-rn]
[batch_size=128] [lr=2e-3] [pool_size=4096] [n_foil=300] [threads=N]`

The random tiny CLIP makes CLIP-S noise. Trained here on freshly drawn world scenes paired with
the sentences the world uses about them (full captions, single-object phrases, summary-like
sentences with names and places), it tells "two red circles" from "two blue circles". The loss is
open_clip's `ClipLoss` plus a NegCLIP-style hard negative per image: the same text with one
attribute (colour, shape or count) swapped, which is exactly what the FOIL test measures.

The checkpoint is a plain open_clip state dict: it loads through the user path,
`load_clip(model, pretrained=PATH)` / `clip=demo_trained`. A JSON report sits next to it.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image

from data_prep import demo_world as w

log = logging.getLogger("data_prep.demo_clip")
DEMO_CLIP_FILE = "demo_clip.pt"  # distinct name: manifests record `model/<file name>`
REPORT_SUFFIX = ".report.json"
ATTRIBUTES = ("color", "shape", "count")


@dataclass
class DemoClipReport:
    model_name: str
    checkpoint: str
    steps: int
    seconds: float
    seed: int
    batch_size: int
    final_loss: float
    foil_accuracy: float  # held-out images: true summary-like sentence beats a one-attribute foil
    foil_accuracy_by_attribute: dict[str, float]
    foil_accuracy_caption: float  # the same with full captions
    foil_accuracy_untrained: float
    n_foil: int


# ------------------------------------------------------------------------------------ the world


def random_scene(rng: random.Random, photo_p: float = 0.1) -> w.ImageScene:
    """One image scene drawn as the world generator draws them (drawn shapes, sometimes a photo)."""
    if rng.random() < photo_p:
        name = rng.choice(sorted(w.PHOTOS))
        noun, color, shape = w.PHOTOS[name]
        return w.ImageScene("0", "photo", name, [w.SceneObject(color, shape, 1)], f"a photo of {noun} .")
    colors, shapes = rng.sample(sorted(w.COLORS), 2), rng.sample(w.SHAPES, 2)
    objs = [w.SceneObject(colors[i], shapes[i], rng.randint(1, 4)) for i in range(rng.choice([1, 2]))]
    bg = rng.choice(sorted(w.BACKGROUNDS))
    caption = " and ".join(o.phrase() for o in objs) + f" on a {bg} background ."
    return w.ImageScene("0", "drawn", bg, objs, caption)


def _object_text(obj: w.SceneObject, scene: w.ImageScene) -> str:
    if scene.kind == "photo":
        return w.PHOTOS[scene.background][0]
    return obj.phrase()


def sentence_for(scene: w.ImageScene, obj: w.SceneObject, rng: random.Random) -> str:
    """A sentence of the kinds summaries and articles use, stating `obj` (one object of the scene)."""
    what = _object_text(obj, scene)
    person, city = rng.choice(w.PEOPLE), rng.choice(w.CITIES)
    return rng.choice(
        [
            f"{what} .",
            f"{person} showed {what} in {city} .",
            f"The show also had {what} .",
            f"The display showed {what} .",
        ]
    )


def foil_object(scene: w.ImageScene, obj: w.SceneObject, rng: random.Random, attribute: str) -> w.SceneObject:
    """`obj` with one attribute swapped so that no object of the scene matches it any more."""
    shown = {(o.color, o.shape, o.count) for o in scene.objects}
    values: dict[str, Sequence[Any]] = {"color": sorted(w.COLORS), "shape": w.SHAPES, "count": [1, 2, 3, 4]}
    options = [v for v in values[attribute] if v != getattr(obj, attribute)]
    rng.shuffle(options)
    for v in options:
        cand = w.SceneObject(**{**asdict(obj), attribute: v})
        # a colour or shape that the scene shows elsewhere is still a foil if the triple is absent
        if (cand.color, cand.shape, cand.count) not in shown and not any(
            (o.color, o.shape) == (cand.color, cand.shape) for o in scene.objects
        ):
            return cand
    return w.SceneObject(**{**asdict(obj), attribute: options[0]})


def foil_scene_text(scene: w.ImageScene, rng: random.Random, attribute: str | None = None) -> tuple[str, str]:
    """(true sentence, foil sentence) about one object of a drawn scene, same template and names."""
    obj = rng.choice(scene.objects)
    attribute = attribute or rng.choice(ATTRIBUTES)
    foil = foil_object(scene, obj, rng, attribute)
    state = rng.getstate()
    true_text = sentence_for(scene, obj, rng)
    rng.setstate(state)  # same template, person and city: only the attribute differs
    return true_text, sentence_for(scene, foil, rng)


def foil_caption(scene: w.ImageScene, rng: random.Random, attribute: str) -> tuple[str, str]:
    """(caption, caption with one attribute of one object swapped)."""
    i = rng.randrange(len(scene.objects))
    objs = list(scene.objects)
    objs[i] = foil_object(scene, objs[i], rng, attribute)
    return scene.caption, " and ".join(o.phrase() for o in objs) + f" on a {scene.background} background ."


def render(scene: w.ImageScene, rng: random.Random) -> Image.Image:
    """The image as the prepared split sees it: drawn, JPEG-encoded and decoded like the raw tree."""
    data = w._jpeg_bytes(w.render_image(scene, rng))
    return Image.open(io.BytesIO(data)).convert("RGB")


def make_pool(n: int, seed: int, preprocess: Any) -> tuple[torch.Tensor, list[w.ImageScene]]:
    rng = random.Random(f"demo-clip/{seed}")
    scenes = [random_scene(rng) for _ in range(n)]
    images = torch.stack([preprocess(render(s, rng)) for s in scenes])
    return images, scenes


# ------------------------------------------------------------------------------------- training


def _train_texts(scenes: Sequence[w.ImageScene], rng: random.Random) -> tuple[list[str], list[str]]:
    """A positive and a hard-negative text per scene; captions a quarter of the time."""
    pos, neg = [], []
    for s in scenes:
        if s.kind == "photo":
            other = rng.choice([p for p in sorted(w.PHOTOS) if p != s.background])
            obj = s.objects[0]
            pos.append(sentence_for(s, obj, random.Random(rng.random())))
            neg.append(f"{w.PHOTOS[other][0]} .")
        elif rng.random() < 0.25:
            t, f = foil_caption(s, rng, rng.choice(ATTRIBUTES))
            pos.append(t)
            neg.append(f)
        else:
            t, f = foil_scene_text(s, rng)
            pos.append(t)
            neg.append(f)
    return pos, neg


def _encode(model: Any, tokenizer: Any, images: torch.Tensor, texts: list[str]) -> tuple[torch.Tensor, ...]:
    img = F.normalize(model.encode_image(images), dim=-1)
    txt = F.normalize(model.encode_text(tokenizer(texts)), dim=-1)
    return img, txt


@torch.no_grad()
def foil_accuracy(
    model: Any, tokenizer: Any, preprocess: Any, n: int = 300, seed: int = 10_000, captions: bool = False
) -> tuple[float, dict[str, float]]:
    """Share of held-out drawn images whose true text scores above its one-attribute foil."""
    model.eval()
    rng = random.Random(f"demo-clip-foil/{seed}")
    scenes = [random_scene(rng, photo_p=0.0) for _ in range(n)]
    images = torch.stack([preprocess(render(s, rng)) for s in scenes])
    attrs = [ATTRIBUTES[i % 3] for i in range(n)]
    pairs = [
        foil_caption(s, rng, a) if captions else foil_scene_text(s, rng, a) for s, a in zip(scenes, attrs)
    ]
    img = F.normalize(model.encode_image(images), dim=-1)
    t = F.normalize(model.encode_text(tokenizer([p[0] for p in pairs])), dim=-1)
    f = F.normalize(model.encode_text(tokenizer([p[1] for p in pairs])), dim=-1)
    ok = ((img * t).sum(-1) > (img * f).sum(-1)).tolist()
    by = {a: sum(o for o, b in zip(ok, attrs) if b == a) / attrs.count(a) for a in ATTRIBUTES}
    return sum(ok) / len(ok), by


def _lr(base: float, step: int, total: int) -> float:
    """Linear warm-up over 20 steps, then cosine down to a tenth of `base` at `total`."""
    cosine = 0.5 * (1 + math.cos(math.pi * min(step / total, 1.0)))
    return base * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * cosine)


def train_demo_clip(
    out: str | os.PathLike,
    model_name: str = "mmsum-tiny-rn",
    seconds: float = 120.0,
    steps: int | None = None,
    seed: int = 0,
    batch_size: int = 128,
    lr: float = 2e-3,
    pool_size: int = 4096,
    n_foil: int = 300,
) -> DemoClipReport:
    """Train until `steps` or `seconds` run out; save the state dict to `out` (+ a JSON report)."""
    import open_clip

    from mmsum.models.tiny import register_open_clip_configs

    register_open_clip_configs()
    torch.manual_seed(seed)
    model, _, preprocess = open_clip.create_model_and_transforms(model_name, pretrained=None)
    tokenizer = open_clip.get_tokenizer(model_name)
    untrained, _ = foil_accuracy(model, tokenizer, preprocess, n=n_foil)
    images, scenes = make_pool(pool_size, seed, preprocess)
    rng = random.Random(f"demo-clip-texts/{seed}")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    clip_loss = open_clip.ClipLoss()
    max_steps = steps if steps is not None else 10**9
    t0, step, loss_val = time.perf_counter(), 0, math.nan
    model.train()
    while step < max_steps and (steps is not None or time.perf_counter() - t0 < seconds):
        idx = torch.randint(0, len(scenes), (batch_size,)).tolist()
        pos, neg = _train_texts([scenes[i] for i in idx], rng)
        img, txt = _encode(model, tokenizer, images[idx], pos)
        neg_f = F.normalize(model.encode_text(tokenizer(neg)), dim=-1)
        scale = model.logit_scale.exp()
        # NegCLIP: each image must also beat its own one-attribute foil among all texts.
        logits = scale * img @ torch.cat([txt, neg_f]).T
        hard = F.cross_entropy(logits, torch.arange(len(idx)))
        loss = clip_loss(img, txt, scale) + hard
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # warm-up then cosine, over the step budget (or a nominal 600 steps for a time budget)
        total = steps or 600
        for g in opt.param_groups:
            g["lr"] = _lr(lr, step, total)
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        loss_val = float(loss.detach())
        step += 1
        if step % 25 == 0:
            log.info("demo_clip step %d loss %.3f (%.0fs)", step, loss_val, time.perf_counter() - t0)
    elapsed = time.perf_counter() - t0
    acc, by = foil_accuracy(model, tokenizer, preprocess, n=n_foil)
    acc_cap, _ = foil_accuracy(model, tokenizer, preprocess, n=n_foil, captions=True)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, out)
    report = DemoClipReport(
        model_name, str(out), step, round(elapsed, 1), seed, batch_size, round(loss_val, 4), acc, by, acc_cap,
        untrained, n_foil,
    )  # fmt: skip
    out.with_name(out.name + REPORT_SUFFIX).write_text(json.dumps(asdict(report), indent=2) + "\n")
    return report


def main(argv: Sequence[str]) -> DemoClipReport:
    """`key=value` arguments (Hydra-style, like the rest of `python -m data_prep`)."""
    opts: dict[str, str] = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            raise SystemExit(f"demo_clip: expected key=value, got {arg!r}")
        opts[key.lstrip("+")] = value
    known = {"out", "seconds", "steps", "seed", "model", "batch_size", "lr", "pool_size", "n_foil", "threads"}
    if unknown := set(opts) - known:
        raise SystemExit(f"demo_clip: unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    from mmsum.models.tiny import default_cache_dir

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if "threads" in opts:  # on a shared CPU one thread can be ~10x faster than oversubscribed ones
        torch.set_num_threads(int(opts["threads"]))
    report = train_demo_clip(
        opts.get("out", str(default_cache_dir() / "demo-clip" / DEMO_CLIP_FILE)),
        model_name=opts.get("model", "mmsum-tiny-rn"),
        seconds=float(opts.get("seconds", 120)),
        steps=int(opts["steps"]) if "steps" in opts else None,
        seed=int(opts.get("seed", 0)),
        batch_size=int(opts.get("batch_size", 128)),
        lr=float(opts.get("lr", 2e-3)),
        pool_size=int(opts.get("pool_size", 4096)),
        n_foil=int(opts.get("n_foil", 300)),
    )
    print(json.dumps(asdict(report), indent=2))
    return report
