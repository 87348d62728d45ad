"""numba's disk cache with a CRC-32 on every file (imported by pipeline.engine._stream_numba only).

numba reads its cache files with pickle and checks nothing: a flipped bit in a data file's machine
code was loaded as is. Of 16 single-bit flips in the stream's data file, 2 aborted the whole process
inside LLVM (an assertion failure while reading the code) and the rest loaded. Here each index and data
file carries a magic and the CRC-32 of its bytes, checked before anything is unpickled. A damaged data
file counts as missing, and a damaged index counts as empty: numba then compiles afresh and writes the
files again. Files written by plain numba (no magic) are treated the same way, once.
"""

from __future__ import annotations

import pickle
import zlib
from typing import Any

from numba.core.caching import IndexDataCacheFile

MAGIC = b"PIPELINE-CRC1"
_HEAD = len(MAGIC) + 4


def _seal(data: bytes) -> bytes:
    return MAGIC + zlib.crc32(data).to_bytes(4, "little") + data


def _open(raw: bytes) -> bytes | None:
    """The sealed bytes, or None where the magic or the CRC is wrong."""
    if raw[: len(MAGIC)] != MAGIC or int.from_bytes(raw[len(MAGIC) : _HEAD], "little") != zlib.crc32(raw[_HEAD:]):
        return None
    return raw[_HEAD:]


class CheckedCacheFile(IndexDataCacheFile):
    """numba's IndexDataCacheFile, each file sealed with a CRC-32 (same names, same places)."""

    def _save_data(self, name: str, data: Any) -> None:
        with self._open_for_write(self._data_path(name)) as f:
            f.write(_seal(self._dump(data)))

    def _load_data(self, name: str) -> Any:
        with open(self._data_path(name), "rb") as f:
            body = _open(f.read())
        if body is None:  # numba's load() takes an OSError for a missing file: compiled afresh, saved again
            raise OSError(f"{name}: damaged numba cache file")
        return pickle.loads(body)

    def _save_index(self, overloads: dict) -> None:
        with self._open_for_write(self._index_path) as f:
            pickle.dump(self._version, f, protocol=-1)
            f.write(_seal(self._dump((self._source_stamp, overloads))))

    def _load_index(self) -> dict:
        try:
            with open(self._index_path, "rb") as f:
                version = pickle.load(f)
                body = _open(f.read())
        except Exception:  # none yet, or a damaged version header: an empty index (rewritten at the next save)
            return {}
        if version != self._version or body is None:
            return {}
        stamp, overloads = pickle.loads(body)
        return overloads if stamp == self._source_stamp else {}


def checked(dispatcher: Any) -> Any:
    """The dispatcher (numba.njit(cache=True)) with its cache files sealed and read without a refresh of
    numba's registries (:func:`quick_load`); unchanged where this numba keeps its cache otherwise (its own
    unchecked files then, as before)."""
    cache = getattr(dispatcher, "_cache", None)
    plain = getattr(cache, "_cache_file", None)
    if isinstance(plain, IndexDataCacheFile) and not isinstance(plain, CheckedCacheFile):
        base = plain._index_name[: -len(".nbi")]
        cache._cache_file = CheckedCacheFile(plain._cache_path, base, plain._source_stamp)
        quick_load(cache)
    return dispatcher


_QUICK: dict[type, type] = {}


def quick_load(cache: Any) -> None:
    """Make ``cache`` (one dispatcher's) load its compiled code without numba's ``refresh()`` of the target
    context: the code in the cache is already compiled and linked; rebuilding it needs the code generator
    and numba's runtime (initialised here), not the registries of every implementation numba can compile
    (``load_additional_registries`` imports numba.np.linalg, arraymath and the rest, and through them
    scipy.linalg). A miss compiles as before, and numba's compiler refreshes the context first. The
    engine checks the loaded code on known answers anyway (kernels._trusted). Only this cache's class
    changes (other numba users in the process keep numba's own); a numba whose cache lacks the methods used
    here keeps its own load."""
    base = type(cache)
    if not all(hasattr(base, name) for name in ("_load_overload", "_guard_against_spurious_io_errors")):
        return
    quick = _QUICK.get(base)
    if quick is None:
        quick = _QUICK[base] = type(f"Quick{base.__name__}", (base,), {"load_overload": _load_overload})
    cache.__class__ = quick


def _load_overload(self: Any, sig: Any, target_context: Any) -> Any:
    from numba.core.runtime import rtsys

    rtsys.initialize(target_context)  # what the compiled code calls (arrays in and out) needs it
    with self._guard_against_spurious_io_errors():
        return self._load_overload(sig, target_context)
