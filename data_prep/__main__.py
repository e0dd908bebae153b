"""`python -m data_prep dataset=... raw_dir=... out_dir=...`, `python -m data_prep report out_dir=...`
and `python -m data_prep demo_clip out=PATH ...` (data_prep/demo_clip.py)."""

from __future__ import annotations

import sys

from data_prep.cli import main

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "demo_clip":  # not a prep run: no Hydra config
        from data_prep.demo_clip import main as demo_clip_main

        demo_clip_main(sys.argv[2:])
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        # Hydra only takes key=value overrides: turn the subcommand into one.
        sys.argv[1:2] = ["command=report", "dataset=none", "raw_dir=none"]
    main()
