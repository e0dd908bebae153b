#!/usr/bin/env python
"""Same as `mmsum-export`: python scripts/export_to_hub.py RUN_DIR OUT [--push-to-hub REPO_ID]."""

import sys

from mmsum.cli.export import main

if __name__ == "__main__":
    sys.exit(main())
