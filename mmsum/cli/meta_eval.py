"""`mmsum-meta-eval`: how well do metrics agree with human judgments on a benchmark?

  mmsum-meta-eval benchmark=mufame path=data/mufame/ metrics=[clip,bert,clipbert,bary] out=runs/me
  mmsum-meta-eval benchmark=wikihowfact path=data/wikihowfact setting=similarity metrics=[clip,bert]
  mmsum-meta-eval benchmark=foil path=foilv1.0_test_2017.json image_dir=val2014 num_refs=4 metrics=[refclip]
  mmsum-meta-eval benchmark=bison path=bison_annotations.cocoval2014.json captions=captions_val2014.json image_dir=val2014
  mmsum-meta-eval benchmark=frank path=frank/human_annotations.json metrics=[bert,bary,rouge]
  # offline: clip.model=mmsum-tiny-rn clip.pretrained=tiny bert.model=minilm bert.num_layers=6 bary.model=minilm

Hydra-style `key=value` overrides (OmegaConf syntax, nested keys with dots) over the defaults of
`mmsum.meta_eval.harness.MetaEvalConfig`; writes scores.csv, results.json, table.md, bar.png.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any


def parse_config(argv: Sequence[str]):
    """Overrides -> MetaEvalConfig (unknown keys and missing benchmark/path are errors)."""
    from omegaconf import OmegaConf

    from mmsum.meta_eval.harness import MetaEvalConfig

    base = OmegaConf.structured(MetaEvalConfig(benchmark="???", path="???"))
    cfg = OmegaConf.merge(base, OmegaConf.from_dotlist([a for a in argv if "=" in a]))
    bad = [a for a in argv if "=" not in a]
    if bad:
        raise SystemExit(f"arguments must be key=value, got {bad}")
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise SystemExit(
            f"missing required setting(s): {', '.join(missing)} (e.g. benchmark=mufame path=...)"
        )
    return OmegaConf.to_object(cfg)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0)
    from mmsum.meta_eval.harness import format_table, run

    cfg = parse_config(argv)
    results = run(cfg)
    print(format_table(results))
    print(f"wrote {cfg.out}/scores.csv, results.json, table.md, bar.png")
    return results


if __name__ == "__main__":
    main()
