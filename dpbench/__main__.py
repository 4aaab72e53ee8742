"""``python -m dpbench`` is the ``dpbench`` command."""

from .cli.main import console_main

if __name__ == "__main__":
    console_main()
