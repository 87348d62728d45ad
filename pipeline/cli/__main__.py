"""``python -m pipeline.cli``: the ``pipeline`` command."""

from pipeline.cli import main

if __name__ == "__main__":  # not when a documentation tool imports every module to read it
    main()
