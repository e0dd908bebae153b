"""`python -m data_prep dataset=... raw_dir=... out_dir=...` and `python -m data_prep report out_dir=...`."""

from __future__ import annotations

import sys

from data_prep.cli import main

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        # Hydra only takes key=value overrides: turn the subcommand into one.
        sys.argv[1:2] = ["command=report", "dataset=none", "raw_dir=none"]
    main()
