"""The one record every dataset parser yields."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Example:
    """One raw example, before features and guidance labels are attached.

    `image_paths[k]` is the file of image `image_ids[k]`; `captions[k]` its caption (may be "").
    `relevant_images` holds image ids (not positions) annotated as relevant (MSMO test split).
    """

    id: str
    document: str
    summary: str
    split: str
    source: str
    image_ids: list[str] = field(default_factory=list)
    image_paths: list[str] = field(default_factory=list)
    captions: list[str] = field(default_factory=list)
    relevant_images: list[str] = field(default_factory=list)
    title: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
