"""A small, fully known "world" in MSMO's raw layout, for demos, tests and factuality testbeds.

Every article reports on an exhibition: a person from an organisation shows pictured objects in a
city. Images are simple drawn scenes (coloured shapes on a background) or scikit-image sample
photos; captions describe them; the reference summary states the pictured key facts. Because the
generator knows the scene, `facts.jsonl` records exactly what is true of each example (objects per
image, entities, which facts each sentence states), so later code can check factuality exactly.

Articles also state 1-2 object facts no image shows (`kind: "unpictured"`: planned, earlier,
elsewhere, or a plain "The display showed ..."), mixed in among the pictured ones, so a summary can
be faithful to the document yet not to the images; references state pictured facts only.

About 15% of references deliberately name an entity absent from the article, to exercise the
entity filter. Output is deterministic from the seed: same seed, byte-identical files.

Layout written (MSMO release layout plus two side files):
  <raw_dir>/{data1,valid_data,test_data}/article/<id>.txt
  <raw_dir>/{...}/img/<id>_<k>.jpg, caption/<id>_<k>.caption
  <raw_dir>/test_relevant_images.json     {id: [k, ...]} for the test split
  <raw_dir>/facts.jsonl                   one ArticleScene per line (all splits)
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SPLIT_DIRS = {"train": "data1", "validation": "valid_data", "test": "test_data"}
RELEVANT_FILE = "test_relevant_images.json"
FACTS_FILE = "facts.jsonl"
IMAGE_SIZE = 128
JPEG_QUALITY = 90

# Names spaCy's small English model reliably tags as PERSON / GPE / ORG in these templates.
PEOPLE = [
    "John Smith", "Maria Garcia", "David Miller", "Sarah Johnson", "James Wilson", "Emma Thompson",
    "Michael Brown", "Laura Davis", "Robert Taylor", "Anna Martin", "Peter Clark", "Helen Lewis",
]  # fmt: skip
CITIES = ["London", "Paris", "Chicago", "Berlin", "Madrid", "Toronto", "Sydney", "Boston", "Dublin", "Rome"]
ORGS = ["Google", "Microsoft", "the United Nations", "the BBC", "the Red Cross", "Oxford University",
        "the World Bank", "Harvard University", "Amazon", "the European Union"]  # fmt: skip
COLORS = {
    "red": (220, 30, 30), "blue": (30, 60, 220), "green": (30, 170, 60), "yellow": (235, 210, 30),
    "purple": (140, 40, 170), "orange": (245, 140, 20), "black": (20, 20, 20), "white": (245, 245, 245),
}  # fmt: skip
SHAPES = ["circle", "square", "triangle", "star"]
BACKGROUNDS = {
    "grey": (150, 150, 150),
    "beige": (225, 210, 180),
    "sky": (170, 210, 240),
    "dark": (50, 50, 70),
}
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# scikit-image sample photos: (loader name, caption noun phrase, color, object)
PHOTOS = {
    "astronaut": ("an astronaut in a white suit", "white", "astronaut"),
    "coffee": ("a cup of coffee on a saucer", "brown", "cup"),
    "rocket": ("a rocket on the launch pad", "white", "rocket"),
    "chelsea": ("a ginger cat looking up", "ginger", "cat"),
}


@dataclass
class SceneObject:
    """`count` objects of one colour and shape in an image (or the subject of a photo)."""

    color: str
    shape: str
    count: int

    def phrase(self) -> str:
        noun = self.shape if self.count == 1 else self.shape + "s"
        return f"{NUMBER_WORDS[self.count]} {self.color} {noun}"


@dataclass
class ImageScene:
    image_id: str  # the integer suffix k of <id>_<k>.jpg, as a string
    kind: str  # "drawn" | "photo"
    background: str  # background colour name (drawn) or photo name (photo)
    objects: list[SceneObject]
    caption: str


@dataclass
class Fact:
    """One atomic, checkable statement; `image_id` is set when the fact is pictured."""

    fact_id: str
    kind: str  # "object" | "photo" (pictured) | "unpictured" | "affiliation" | "place" | "time"
    text: str
    image_id: str | None = None
    obj: SceneObject | None = None


@dataclass
class Sentence:
    text: str
    fact_ids: list[str]
    entities: list[str]  # entity strings the sentence names
    hallucinated_entities: list[str] = field(default_factory=list)  # named but absent from the article


@dataclass
class ArticleScene:
    id: str
    split: str
    title: str
    person: str
    organisation: str
    city: str
    weekday: str
    images: list[ImageScene]
    facts: list[Fact]
    body: list[Sentence]
    summary: list[Sentence]
    relevant_images: list[str]  # image ids whose content the summary states
    hallucinated: bool  # some summary sentence names an entity absent from the article


def _example_id(seed: int, split: str, index: int) -> str:
    return hashlib.sha1(f"mmsum-demo/{seed}/{split}/{index}".encode()).hexdigest()


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


@cache
def _photo(name: str) -> Image.Image:
    import skimage.data

    arr = getattr(skimage.data, name)()
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    return Image.fromarray(arr[..., :3]).convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int], fill) -> None:
    x0, y0, x1, y1 = box
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "square":
        draw.rectangle(box, fill=fill)
    elif shape == "triangle":
        draw.polygon([((x0 + x1) // 2, y0), (x1, y1), (x0, y1)], fill=fill)
    else:  # star: two overlapping triangles
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        pts = []
        for i in range(10):
            r = (x1 - x0) / 2 if i % 2 == 0 else (x1 - x0) / 5
            a = np.pi / 2 + i * np.pi / 5
            pts.append((cx + r * np.cos(a), cy - r * np.sin(a)))
        draw.polygon(pts, fill=fill)


def render_image(scene: ImageScene, rng: random.Random) -> Image.Image:
    if scene.kind == "photo":
        return _photo(scene.background).copy()
    img = Image.new("RGB", (IMAGE_SIZE, IMAGE_SIZE), BACKGROUNDS[scene.background])
    draw = ImageDraw.Draw(img)
    # Place objects on a 4x4 grid of cells so they never overlap.
    cells = rng.sample(range(16), sum(o.count for o in scene.objects))
    cell = IMAGE_SIZE // 4
    for obj in scene.objects:
        for _ in range(obj.count):
            c = cells.pop()
            x, y = (c % 4) * cell + 3, (c // 4) * cell + 3
            _draw_shape(draw, obj.shape, (x, y, x + cell - 6, y + cell - 6), COLORS[obj.color])
    return img


def _jpeg_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=False, progressive=False)
    return buf.getvalue()


def _make_article(seed: int, split: str, index: int) -> ArticleScene:
    rng = random.Random(f"{seed}/{split}/{index}")
    aid = _example_id(seed, split, index)
    person, city, org = rng.choice(PEOPLE), rng.choice(CITIES), rng.choice(ORGS)
    weekday = rng.choice(WEEKDAYS)
    surname = person.split()[-1]
    n_images = rng.choice([1, 2, 2, 3, 3, 4])
    first_k = rng.choice([0, 1, 1, 2])  # MSMO's k need not start at 0 or 1
    images: list[ImageScene] = []
    facts: list[Fact] = []
    for j in range(n_images):
        k = str(first_k + j)
        if j > 0 and rng.random() < 0.25:
            name = rng.choice(sorted(PHOTOS))
            noun, color, shape = PHOTOS[name]
            obj = SceneObject(color, shape, 1)
            images.append(ImageScene(k, "photo", name, [obj], f"a photo of {noun} ."))
            facts.append(Fact(f"f{len(facts)}", "photo", f"the exhibition included {noun}", k, obj))
            continue
        colors = rng.sample(sorted(COLORS), 2)
        shapes = rng.sample(SHAPES, 2)
        n_kinds = rng.choice([1, 2])
        objs = [SceneObject(colors[i], shapes[i], rng.randint(1, 4)) for i in range(n_kinds)]
        bg = rng.choice(sorted(BACKGROUNDS))
        caption = " and ".join(o.phrase() for o in objs) + f" on a {bg} background ."
        images.append(ImageScene(k, "drawn", bg, objs, caption))
        for o in objs:
            facts.append(Fact(f"f{len(facts)}", "object", f"the display showed {o.phrase()}", k, o))
    f_aff = Fact(f"f{len(facts)}", "affiliation", f"{person} works for {org}")
    f_place = Fact(f"f{len(facts) + 1}", "place", f"the exhibition was in {city}")
    f_time = Fact(f"f{len(facts) + 2}", "time", f"the exhibition opened on {weekday}")
    facts += [f_aff, f_place, f_time]
    img_facts = [f for f in facts if f.image_id is not None]
    key = img_facts[0]  # the first image is the pictured key fact the summary reports

    def S(text: str, fact_ids: list[str], ents: list[str], halluc: list[str] | None = None) -> Sentence:
        return Sentence(text, fact_ids, ents, halluc or [])

    body = [
        S(f"{person} of {org} opened a new exhibition in {city} on {weekday} .",
          [f_aff.fact_id, f_place.fact_id, f_time.fact_id], [person, org, city]),
    ]  # fmt: skip
    for f in img_facts:
        o = f.obj
        assert o is not None
        if f.kind == "photo":
            body.append(S(_cap(f.text) + " .", [f.fact_id], []))
        else:
            verb = rng.choice(["showed", "featured", "displayed"])
            body.append(S(f"The display {verb} {o.phrase()} .", [f.fact_id], []))
    _add_unpictured(body, facts, images, S, random.Random(f"{seed}/{split}/{index}/unpictured"))
    filler = [
        S(f"Visitors in {city} queued for hours to see the show .", [f_place.fact_id], [city]),
        S(f"{surname} said the pieces were chosen by a small team .", [], [surname]),
        S("The organisers said the show will travel to other cities next year .", [], []),
        S(f"Tickets are free for students , a spokesman for {org} said .", [], [org]),
        S("The weather was mild and the hall was full by noon .", [], []),
        S(f"It is the third exhibition {org} has organised this year .", [], [org]),
        S(f"{surname} thanked the volunteers who built the display .", [], [surname]),
    ]  # fmt: skip
    body += rng.sample(filler, rng.randint(3, 5))
    title = f"{person} opens exhibition in {city}"

    summary = [
        S(f"{person} showed {key.obj.phrase()} in {city} .", [key.fact_id, f_place.fact_id], [person, city])
    ]
    relevant = [key.image_id]
    if len(img_facts) > 1 and rng.random() < 0.5:
        f2 = img_facts[1]
        what = f2.text.split(" included ", 1)[1] if f2.kind == "photo" else f2.obj.phrase()
        summary.append(S(f"The show also had {what} .", [f2.fact_id], []))
        if f2.image_id not in relevant:
            relevant.append(f2.image_id)
    hallucinated = rng.random() < 0.15
    if hallucinated:
        absent = rng.choice([p for p in PEOPLE if p != person and p.split()[-1] != surname])
        if rng.random() < 0.7:  # an extra unsupported sentence: the filter removes just this one
            summary.append(S(f"It was praised by {absent} .", [], [absent], [absent]))
        else:  # the only sentence is unsupported: the filter drops the whole example
            s0 = summary[0]
            summary = [S(s0.text.replace(person, absent), s0.fact_ids[1:], [absent, city], [absent])]
    return ArticleScene(
        id=aid, split=split, title=title, person=person, organisation=org, city=city, weekday=weekday,
        images=images, facts=facts, body=body, summary=summary, relevant_images=relevant,
        hallucinated=hallucinated,
    )  # fmt: skip


# How the article frames an object fact the images do not show (kept apart from the pictured ones
# only by the scene record: "display" reads exactly like a pictured sentence, on purpose).
UNPICTURED_FRAMES = {
    "display": "The display {verb} {phrase} .",
    "earlier": "Last year the gallery showed {phrase} .",
    "planned": "Next month the show will add {phrase} .",
    "elsewhere": "A second hall displayed {phrase} .",
}


def _add_unpictured(body: list[Sentence], facts: list[Fact], images: list[ImageScene], S, rng) -> None:
    """State 1-2 object facts that no image shows, among the pictured object sentences.

    They make the document and the images disagree: a summary can be faithful to the document yet
    hallucinate w.r.t. the images. Their own rng keeps every other draw of the world unchanged.
    """
    shown = {(o.color, o.shape) for im in images for o in im.objects}
    free = [(c, s) for c in sorted(COLORS) for s in SHAPES if (c, s) not in shown]
    n_object_sents = sum(1 for f in facts if f.image_id is not None)
    for pair in rng.sample(free, rng.choice([1, 1, 2])):
        obj = SceneObject(pair[0], pair[1], rng.randint(1, 4))
        frame = rng.choice(sorted(UNPICTURED_FRAMES))
        text = UNPICTURED_FRAMES[frame].format(verb=rng.choice(["showed", "featured"]), phrase=obj.phrase())
        fact = Fact(f"f{len(facts)}", "unpictured", f"{frame}: {obj.phrase()}", None, obj)
        facts.append(fact)
        # Anywhere among the object sentences (body[0] is the lead): position alone must not tell.
        body.insert(rng.randint(1, n_object_sents + 1), S(text, [fact.fact_id], []))
        n_object_sents += 1


def article_text(scene: ArticleScene) -> str:
    """The MSMO article file: marker lines, each followed by its text lines."""
    body = " ".join(s.text for s in scene.body)
    lines = ["@title", scene.title, "", "@body", body, "", "@summary"] + [s.text for s in scene.summary]
    return "\n".join(lines) + "\n"


def generate_demo_world(
    raw_dir: str | Path, seed: int = 0, n_train: int = 240, n_valid: int = 40, n_test: int = 40
) -> Path:
    """Write the demo world under `raw_dir` (see module docstring); returns `raw_dir`."""
    raw_dir = Path(raw_dir)
    relevant: dict[str, list[int]] = {}
    fact_lines: list[str] = []
    for split, n in (("train", n_train), ("validation", n_valid), ("test", n_test)):
        root = raw_dir / SPLIT_DIRS[split]
        for sub in ("article", "img", "caption"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            scene = _make_article(seed, split, i)
            img_rng = random.Random(f"{seed}/{split}/{i}/pixels")
            (root / "article" / f"{scene.id}.txt").write_text(article_text(scene), encoding="utf-8")
            for im in scene.images:
                (root / "img" / f"{scene.id}_{im.image_id}.jpg").write_bytes(
                    _jpeg_bytes(render_image(im, img_rng))
                )
                (root / "caption" / f"{scene.id}_{im.image_id}.caption").write_text(im.caption + "\n")
            if split == "test":
                relevant[scene.id] = [int(k) for k in scene.relevant_images]
            fact_lines.append(json.dumps(asdict(scene), sort_keys=True))
    (raw_dir / RELEVANT_FILE).write_text(json.dumps(relevant, indent=1, sort_keys=True) + "\n")
    (raw_dir / FACTS_FILE).write_text("\n".join(fact_lines) + "\n")
    return raw_dir


def scene_record(scene: dict) -> dict:
    """What a prepared record carries of its scene: images, facts and entities (no article text)."""
    keys = ("images", "facts", "person", "organisation", "city", "weekday", "relevant_images", "hallucinated")
    return {k: scene[k] for k in keys}


def attach_scenes(raw_dir: str | Path, examples: Iterable) -> Iterator:
    """Pass parsed examples through, adding `extra["scene"]` (see `scene_record`) from facts.jsonl."""
    path = Path(raw_dir) / FACTS_FILE
    scenes = load_facts(raw_dir) if path.is_file() else {}
    for ex in examples:
        scene = scenes.get(getattr(ex, "id", None))
        if scene is not None and hasattr(ex, "extra"):
            ex.extra["scene"] = scene_record(scene)
        yield ex


def load_facts(raw_dir: str | Path) -> dict[str, dict]:
    """The scene records of a demo world, by example id (plain dicts, as written)."""
    out = {}
    with open(Path(raw_dir) / FACTS_FILE, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                out[rec["id"]] = rec
    return out
