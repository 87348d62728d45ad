"""Soft queries over uncertain knowledge graphs (SRC: exact max-plus search over predicted confidences)."""

__version__ = "0.1.0"
