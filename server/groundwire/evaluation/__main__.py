"""`python -m groundwire.evaluation ...` (the same as `groundwire eval ...`)."""

from __future__ import annotations

import sys

from groundwire.evaluation.cli import main

if __name__ == "__main__":
    sys.exit(main())
