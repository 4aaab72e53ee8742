"""``python -m dpbench`` is the ``dpbench`` command."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
