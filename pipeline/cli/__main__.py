"""``python -m pipeline.cli``: the ``pipeline`` command."""

from pipeline.cli import main

main()
