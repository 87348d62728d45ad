"""Arrays in one sealed file: the byte layout and the checks shared by the pair cache
(:mod:`pipeline.formats.pair_cache`) and the parsed data sets (:mod:`loaders.parsed`).

A file is a prefix (an 8-byte magic, the CRC-32 and length of a JSON header), the header (the caller's
fields, e.g. format version and identity, and each array's dtype, shape, offset, length and CRC-32), then
the arrays at 64-byte aligned offsets. :func:`open_checked` maps a file and checks the header's CRC, the
caller's fields and every array's CRC (about 4 GB/s); any failure (a flipped byte, a truncation, another
identity, an older format) is :class:`Invalid`, and the caller rebuilds the file instead of believing it.

A file whose arrays passed a full check gets a verification record beside it (``<file>.ok``: its device,
inode, size, mtime and ctime). A later open whose file still has that exact stamp checks the header only:
every write to a file (``write()``, a shared map, a truncation, a rename over it) sets its ctime to the
current time, and no user can set a ctime back, so a file with an unchanged stamp holds the bytes that
were checked. A record is written only once the file's times are :data:`_SETTLED` seconds old, so that a
write in the same tick of a coarse clock as the check still changes the stamp (git's "racy clean" rule).
What a record does not see: bytes that change with no write through the kernel (media errors under the
file system). ``PIPELINE_VERIFY=always`` checks every array on every open.

A file younger than that (the first answer right after ``pipeline export`` reads the files the export has
just written) is checked in full by every process that opens it. :func:`check_ahead` starts that check in
a background thread before the process needs the file (``pipeline answer`` starts it before importing
torch, on the cores the imports leave idle); the open then waits for that check instead of summing again.
Within one process a full check is remembered by the file's stamp (:func:`open_checked` sums a file once
per process and write).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from pipeline.core import atomic, jsontext

_ALIGN = 64
_CRC_CHUNK = 1 << 25  # bytes checked, then unmapped, at a time (32 MiB)
_PARALLEL_CRC = 1 << 26  # files from this size on are checked by one thread per core (64 MiB)
_KEEP_MAPPED = 1 << 28  # a file up to this size keeps its checked pages mapped (256 MiB; larger: dropped)
_PREFIX = struct.Struct("<8sIQ")  # magic, header CRC-32, header length
_SETTLED = 3.0  # seconds a file's mtime and ctime must be old before a full check is recorded beside it
_RECORD = ".ok"  # suffix of a verification record

Stamp = tuple[int, ...]


class Invalid(ValueError):
    """A file that is not a whole, checked file of the expected kind (the caller rebuilds it); ``summed``:
    its arrays' CRCs were summed (and failed)."""

    def __init__(self, why: str, summed: bool = False) -> None:
        super().__init__(why)
        self.summed = summed


@dataclass(frozen=True)
class Opened:
    """A checked file: ``arrays`` are read-only views of ``mm`` (a private map of the file); ``stamp`` the
    file's (:func:`file_stamp`); ``summed``: whether this open checked every array's CRC (no record)."""

    mm: mmap.mmap
    head: dict[str, Any]
    arrays: tuple[np.ndarray, ...]
    stamp: Stamp
    summed: bool


def file_stamp(st: os.stat_result) -> Stamp:
    """What changes with any write to the file, or its replacement (module docstring)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def record_path(path: Path) -> Path:
    return path.with_name(path.name + _RECORD)


# --------------------------------------------------------------------------------------------- writing


def write(f: BinaryIO, magic: bytes, fields: dict[str, Any], arrays: list[np.ndarray]) -> None:
    """A sealed file (module docstring) streamed to ``f``: ``fields`` (JSON) and ``arrays`` (no copy of the
    arrays in memory: the index of a large export is gigabytes)."""
    specs: list[dict[str, Any]] = [
        {"dtype": a.dtype.str, "shape": list(a.shape), "nbytes": int(a.nbytes), "crc": _crc(a)} for a in arrays
    ]
    head: dict[str, Any] = {**fields, "arrays": specs}
    # offsets depend on the header's length, which depends on the offsets' digits: pad them to a fixed width
    for spec in specs:
        spec["offset"] = 10**15
    raw = json.dumps(head, sort_keys=True).encode()
    pos = _align(_PREFIX.size + len(raw))
    for spec in specs:
        spec["offset"] = pos
        pos = _align(pos + spec["nbytes"])
    raw = json.dumps(head, sort_keys=True).encode().ljust(len(raw))  # offsets shorter than the placeholder
    f.write(_PREFIX.pack(magic, zlib.crc32(raw), len(raw)) + raw)
    at = _PREFIX.size + len(raw)
    for spec, a in zip(specs, arrays, strict=True):
        f.write(b"\0" * (spec["offset"] - at))
        f.write(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data)
        at = spec["offset"] + spec["nbytes"]
    f.write(b"\0" * (pos - at))


def write_file(path: str | Path, magic: bytes, fields: dict[str, Any], arrays: list[np.ndarray]) -> None:
    """:func:`write` to ``path`` atomically (a temporary renamed into place: readers see one whole file)."""

    def fill(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            write(f, magic, fields, arrays)

    atomic.write_with(path, fill)


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _crc(a: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(a).reshape(-1).view(np.uint8))


# --------------------------------------------------------------------------------------------- reading


def open_checked(path: str | Path, magic: bytes, want: dict[str, Any]) -> Opened:
    """The file at ``path`` mapped and checked (module docstring): its header's fields must equal ``want``.
    FileNotFoundError when there is none; :class:`Invalid` when it fails a check; OSError as raised."""
    path = Path(path)
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        stamp = file_stamp(st)
        ahead = _ahead_result(path, stamp)
        if ahead is not None:
            mm, hcrc, good = ahead
            if not good:
                raise Invalid("array checksum", summed=True)
        else:
            if st.st_size < _PREFIX.size:
                raise Invalid("truncated")
            # a private copy-on-write map: pages shared with every reader until written (nothing writes
            # them; were something to, it would write its own copy, never the file)
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    head, hcrc, spans = _header(mm, magic)
    if any(head.get(k) != v for k, v in want.items()):
        raise Invalid("stale")
    summed = False
    if ahead is None and not _recorded(path, st, hcrc):
        summed = True
        if _crcs(mm, spans, keep=st.st_size <= _KEEP_MAPPED) != [int(s["crc"]) for s in head["arrays"]]:
            raise Invalid("array checksum", summed=True)
        _record(path, st, hcrc)
    buf = np.frombuffer(mm, dtype=np.uint8)
    try:
        arrays = tuple(
            buf[lo : lo + n].view(np.dtype(spec["dtype"])).reshape(spec["shape"])
            for (lo, n), spec in zip(spans, head["arrays"], strict=True)
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise Invalid(f"damaged array description ({type(exc).__name__})") from None
    return Opened(mm, head, arrays, stamp, summed or (ahead is not None))


def _header(mm: mmap.mmap, magic: bytes) -> tuple[dict[str, Any], int, list[tuple[int, int]]]:
    """(header, its CRC, each array's (offset, nbytes)); Invalid when the prefix or header is damaged."""
    try:
        got, hcrc, hlen = _PREFIX.unpack_from(mm, 0)
        if got != magic or _PREFIX.size + hlen > len(mm):
            raise Invalid("not a sealed file of this kind")
        raw = mm[_PREFIX.size : _PREFIX.size + hlen]
        if zlib.crc32(raw) != hcrc:
            raise Invalid("header checksum")
        head = jsontext.loads(raw)
        spans = []
        for spec in head["arrays"]:
            lo, nbytes = int(spec["offset"]), int(spec["nbytes"])
            if lo < _PREFIX.size + hlen or lo + nbytes > len(mm):
                raise Invalid("array out of the file")
            spans.append((lo, nbytes))
    except (struct.error, KeyError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Invalid(f"damaged header ({type(exc).__name__})") from None
    return head, hcrc, spans


def discard(path: str | Path) -> None:
    """Remove a file that failed its checks, and its record (best effort)."""
    path = Path(path)
    for gone in (path, record_path(path)):
        with contextlib.suppress(OSError):
            gone.unlink(missing_ok=True)


# ------------------------------------------------------------------------------- verification records


def _stamp_doc(st: os.stat_result, header_crc: int) -> dict[str, int]:
    """A verification record's content: the file's stamp and its header's CRC."""
    return {**dict(zip(("dev", "ino", "size", "mtime_ns", "ctime_ns"), file_stamp(st), strict=True)),
            "header_crc": header_crc}


def _recorded(path: Path, st: os.stat_result, header_crc: int) -> bool:
    """Whether the file open as ``st`` is the one a full check recorded (module docstring); never with
    PIPELINE_VERIFY=always. A missing, unreadable or foreign record means no."""
    from pipeline.core.config import verify_mode

    if verify_mode() == "always":
        return False
    try:
        got = jsontext.loads(record_path(path).read_bytes())
    except (OSError, ValueError):
        return False
    return bool(got == _stamp_doc(st, header_crc))


def settled(stamp: Stamp) -> bool:
    """Whether a file with this :func:`file_stamp` was last written long enough ago (:data:`_SETTLED`)
    that any later write gives it another stamp (module docstring)."""
    return time.time() - max(stamp[3], stamp[4]) / 1e9 >= _SETTLED


def _record(path: Path, st: os.stat_result, header_crc: int) -> None:
    """Record the full check of the file open as ``st``, once its times are settled (module docstring).
    Best effort: a folder this process may not write keeps every open checking in full."""
    if not settled(file_stamp(st)):
        return
    with contextlib.suppress(OSError):
        atomic.write_text(record_path(path), json.dumps(_stamp_doc(st, header_crc), sort_keys=True))


# ------------------------------------------------------------------------------- checking ahead


# full checks started by check_ahead, by path: (the stamp checked, done, result (map, header CRC, good))
_AHEAD: dict[Path, tuple[Stamp, threading.Event, list[tuple[mmap.mmap, int, bool]]]] = {}
_AHEAD_LOCK = threading.Lock()


def check_ahead(paths: Iterable[str | Path], magic: bytes) -> threading.Thread | None:
    """Check in one background thread, from now on, each of ``paths`` that a record does not vouch for
    (module docstring): the later :func:`open_checked` of such a file waits for this check and uses its
    map. Files missing, unreadable or not of this ``magic`` are left to the open. Returns the (daemon)
    thread, or None when there is nothing to check."""
    todo = []
    for p in paths:
        path = Path(p)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_size < _PREFIX.size:
                    continue
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            _, hcrc, _ = _header(mm, magic)
        except (OSError, ValueError):
            continue
        if _recorded(path, st, hcrc):
            mm.close()
            continue
        with _AHEAD_LOCK:
            if path in _AHEAD and _AHEAD[path][0] == file_stamp(st):
                mm.close()
                continue
            entry: tuple[Stamp, threading.Event, list[tuple[mmap.mmap, int, bool]]] = (
                file_stamp(st), threading.Event(), [])
            _AHEAD[path] = entry
        todo.append((path, st, mm, magic, entry[1], entry[2]))
    if not todo:
        return None
    thread = threading.Thread(target=_check_all, args=(todo,), name="sealed-arrays-check", daemon=True)
    thread.start()
    return thread


def wait_ahead() -> None:
    """Wait for every check started by :func:`check_ahead` (before a fork: a child copied while a check
    runs would wait for it forever, its thread not being copied)."""
    with _AHEAD_LOCK:
        events = [entry[1] for entry in _AHEAD.values()]
    for done in events:
        done.wait()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=wait_ahead)


def _check_all(todo: list[tuple[Path, os.stat_result, mmap.mmap, bytes, threading.Event, list[Any]]]) -> None:
    for path, st, mm, magic, done, slot in todo:
        good, hcrc = False, 0
        try:
            head, hcrc, spans = _header(mm, magic)
            good = _crcs(mm, spans, keep=st.st_size <= _KEEP_MAPPED) == [int(s["crc"]) for s in head["arrays"]]
            if good:
                _record(path, st, hcrc)
        except (OSError, ValueError):
            good = False
        finally:
            slot.append((mm, hcrc, good))
            done.set()


def _ahead_result(path: Path, stamp: Stamp) -> tuple[mmap.mmap, int, bool] | None:
    """The background check of this file with this stamp (waited for), or None when none was started."""
    with _AHEAD_LOCK:
        entry = _AHEAD.get(path)
    if entry is None or entry[0] != stamp:
        return None
    entry[1].wait()
    with _AHEAD_LOCK:
        _AHEAD.pop(path, None)  # used once: a later open of the same file goes through its record or a check
    return entry[2][0]


# ------------------------------------------------------------------------------------------- sums


def _crcs(mm: mmap.mmap, spans: list[tuple[int, int]], keep: bool = False) -> list[int]:
    """The CRC-32 of each (offset, nbytes) span of the map (:func:`_crc_unmapping`), the spans of a
    large file shared out to one thread per core (zlib releases the GIL while it sums: CN15k's 1.94 GB
    index is checked in ~0.45 s on 2 cores instead of ~0.8). The threads are joined here. ``keep``: leave
    the pages mapped (a small file read next: no second fault per page)."""
    total = sum(n for _, n in spans)
    threads = min(len(spans), os.cpu_count() or 1, 4)
    if threads < 2 or total < _PARALLEL_CRC:
        return [_crc_unmapping(mm, lo, n, keep) for lo, n in spans]
    got = [0] * len(spans)
    load = [0] * threads
    share: list[list[int]] = [[] for _ in range(threads)]
    for i in sorted(range(len(spans)), key=lambda i: -spans[i][1]):  # largest first, to the least loaded
        t = load.index(min(load))
        share[t].append(i)
        load[t] += spans[i][1]

    def work(mine: list[int]) -> list[tuple[int, int]]:
        return [(i, _crc_unmapping(mm, *spans[i], keep)) for i in mine]

    # the pool's threads are joined on leaving; a thread's error is raised (a span never counts as checked)
    with ThreadPoolExecutor(threads) as pool:
        for part in pool.map(work, share):
            for i, crc in part:
                got[i] = crc
    return got


def _crc_unmapping(mm: mmap.mmap, offset: int, nbytes: int, keep: bool = False) -> int:
    """CRC-32 of the mapped bytes [offset, offset + nbytes), read through the map in chunks, each chunk's
    pages then dropped from this process' page tables unless ``keep`` (MADV_DONTNEED; they stay in the
    page cache): a process' memory holds only the pages its answering touches (CN15k's index is 1.94 GB; a
    query set reads part of it), never the whole file at once. The map is private and never written, so a
    later read faults the same bytes back in from the page cache (about 0.05 s per GB)."""
    view = memoryview(mm)
    can_drop = not keep and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED")
    crc, pos, end = 0, offset, offset + nbytes
    while pos < end:
        stop = min(end, pos + _CRC_CHUNK)
        crc = zlib.crc32(view[pos:stop], crc)
        lo, hi = pos // mmap.PAGESIZE * mmap.PAGESIZE, stop // mmap.PAGESIZE * mmap.PAGESIZE
        if can_drop and hi > lo:
            try:
                mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except OSError:  # the process' memory is larger, never the answers different
                can_drop = False
        pos = stop
    view.release()
    return crc
