"""JSON text as the project reads it from files, options and replies: a document nested deeper than
Python's reader can follow (``[[[[...`` 100,000 levels, a few hundred kilobytes) is one more malformed
document, a :class:`json.JSONDecodeError` that the reader's caller already turns into a line naming the
file, never a ``RecursionError`` traceback.

>>> loads('{"a": [1, 2]}')
{'a': [1, 2]}
>>> loads("[" * 100_000 + "]" * 100_000)
Traceback (most recent call last):
...
json.decoder.JSONDecodeError: nested too deeply (Python's JSON reader follows at most about 1,000 levels): line 1 column 1 (char 0)
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOO_DEEP = f"nested too deeply (Python's JSON reader follows at most about {sys.getrecursionlimit():,} levels)"


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``; a document nested too deeply raises JSONDecodeError (a ValueError) too."""
    try:
        return json.loads(text)
    except RecursionError:
        # the document is not kept on the error: it may be megabytes
        raise json.JSONDecodeError(TOO_DEEP, "", 0) from None
