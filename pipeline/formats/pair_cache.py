"""Relation-pair work kept on disk, once per export: the multi-edge steps' shared entries and column
fronts (:meth:`Adjacency.shared_facts`, :meth:`Adjacency.column_front`) written the first time any process
builds them and memory-mapped by every later one, so a fresh ``pipeline answer`` answers like a warm one.

One file per (kind, relation pair): a magic line, the CRC-32 and length of a JSON header (format version,
the export's identity, kind, pair, and each array's dtype, shape, offset and CRC-32), then the arrays at
64-byte aligned offsets. Reading maps the file and checks the header's CRC and every array's CRC (about
4 GB/s); a file that fails any check (a flipped byte, a truncation, another export's identity, an older
format) is never believed: the arrays are rebuilt and the file rewritten.

A file whose arrays passed a full check gets a verification record beside it (``<file>.ok``: its device,
inode, size, mtime and ctime). A later open whose file still has that exact stamp checks the header only:
every write to a file (``write()``, a shared map, a truncation, a rename over it) sets its ctime to the
current time, and no user can set a ctime back, so a file with an unchanged stamp holds the bytes that
were checked. A record is written only once the file's times are :data:`_SETTLED` seconds old, so that a
write in the same tick of a coarse clock as the check still changes the stamp (git's "racy clean" rule).
CN15k's 1.9 GB index was checked on every ``pipeline answer`` (0.7-0.9 s on two cores) and each worker
summed its relation pairs (~0.15 s for 400 MB). What a record does not see: bytes that change with no
write through the kernel (media errors under the file system). ``PIPELINE_VERIFY=always`` checks every
array on every open. Writers go through :func:`pipeline.core.atomic.write_with` (a temporary renamed into place): two
processes building the same pair at once both write the same bytes, and readers see one whole file or the
other, never a mix. The folder is bounded by bytes (:data:`DEFAULT_BUDGET`): past it, new pairs stay in
the process' memo only.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from pipeline.core import atomic

FORMAT = "soft-queries/pair-cache/1"
MAGIC = b"SQPAIRS1"
_ALIGN = 64
_CRC_CHUNK = 1 << 25  # bytes checked, then unmapped, at a time (32 MiB)
_PARALLEL_CRC = 1 << 26  # files from this size on are checked by one thread per core (64 MiB)
_PREFIX = struct.Struct("<8sIQ")  # magic, header CRC-32, header length
_SETTLED = 3.0  # seconds a file's mtime and ctime must be old before a full check is recorded beside it
_RECORD = ".ok"  # suffix of a verification record
DEFAULT_BUDGET = 4 << 30  # bytes of pair files per export before new pairs are kept in memory only
KINDS = ("shared", "front", "index")  # index: the whole engine index of the export (formats.engine_index)

Parts = tuple[tuple[bool, int], ...]


def pair_name(kind: str, parts: Parts) -> str:
    """The file name of one pair's arrays: kind, then h<rel> / t<rel> per atom (s on the head / tail side)."""
    if kind not in KINDS:
        raise ValueError(f"unknown pair-cache kind {kind!r}")
    if not parts:
        return f"{kind}.bin"
    return (
        f"{kind}-" + "-".join(f"{'h' if from_head else 't'}{int(rel)}" for from_head, rel in parts) + ".bin"
    )


def _crc(a: np.ndarray | memoryview | bytes) -> int:
    return zlib.crc32(
        a if not isinstance(a, np.ndarray) else np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    )


class PairCache:
    """The pair files of one export (``identity``: a content key of the export and of its confidences)
    in ``folder``. Thread- and process-safe: files are written atomically and verified on every read (in full, or by their verification record)."""

    def __init__(self, folder: str | Path, identity: str, budget: int = DEFAULT_BUDGET) -> None:
        self.folder = Path(folder)
        self.identity = identity
        self.budget = budget
        self.rebuilt = 0  # files found invalid and replaced (stale or corrupt), for tests and reports
        self.summed = 0  # files whose arrays this process checked in full (no valid verification record)
        # files this process has mapped and verified, by (kind, parts): (_file_stamp, arrays). Mapped
        # pages live in the page cache, not in the process' memory, so they need no budget; a pair that
        # leaves the engine's memo comes back from here without a second CRC pass
        self._mapped: dict[tuple[str, Parts], tuple[tuple[int, ...], tuple[torch.Tensor, ...]]] = {}

    def path(self, kind: str, parts: Parts) -> Path:
        return self.folder / pair_name(kind, parts)

    def has(self, kind: str, parts: Parts) -> bool:
        """Whether a file for the pair exists (not yet verified: :meth:`load` does that)."""
        return self.path(kind, parts).is_file()

    def load(self, kind: str, parts: Parts) -> tuple[torch.Tensor, ...] | None:
        """The pair's arrays, memory-mapped (read-only tensors sharing the page cache with every other
        reader), or None when there is no valid file (a damaged or stale one is removed)."""
        path = self.path(kind, parts)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                stamp = _file_stamp(st)
                hit = self._mapped.get((kind, parts))
                if hit is not None and hit[0] == stamp:
                    return hit[1]
                if st.st_size < _PREFIX.size:
                    raise ValueError("truncated")
                # a private copy-on-write map: pages shared with every reader until written (nothing
                # writes them; were something to, it would write its own copy, never the file)
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
                got = self._decode(mm, kind, parts, path, st)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError, UnicodeDecodeError, struct.error):
            self._discard(path)
            return None
        self._mapped[(kind, parts)] = (stamp, got)
        return got

    def _decode(
        self, mm: mmap.mmap, kind: str, parts: Parts, path: Path, st: os.stat_result
    ) -> tuple[torch.Tensor, ...]:
        magic, hcrc, hlen = _PREFIX.unpack_from(mm, 0)
        if magic != MAGIC or _PREFIX.size + hlen > len(mm):
            raise ValueError("not a pair file")
        raw = mm[_PREFIX.size : _PREFIX.size + hlen]
        if zlib.crc32(raw) != hcrc:
            raise ValueError("header checksum")
        head = json.loads(raw)
        want = {
            "format": FORMAT,
            "identity": self.identity,
            "kind": kind,
            "parts": [[bool(h), int(r)] for h, r in parts],
        }
        if any(head.get(k) != v for k, v in want.items()):
            raise ValueError("stale")
        buf = np.frombuffer(mm, dtype=np.uint8)
        spans = []
        for spec in head["arrays"]:
            lo, nbytes = int(spec["offset"]), int(spec["nbytes"])
            if lo < _PREFIX.size + hlen or lo + nbytes > len(mm):
                raise ValueError("array out of the file")
            spans.append((lo, nbytes))
        if not _recorded(path, st, hcrc):
            self.summed += 1
            if _crcs(mm, spans) != [int(spec["crc"]) for spec in head["arrays"]]:
                raise ValueError("array checksum")
            _record(path, st, hcrc)
        return tuple(
            torch.from_numpy(buf[lo : lo + nbytes].view(np.dtype(spec["dtype"])).reshape(spec["shape"]))
            for (lo, nbytes), spec in zip(spans, head["arrays"], strict=True)
        )

    def store(self, kind: str, parts: Parts, arrays: tuple[torch.Tensor, ...]) -> bool:
        """Write the pair's arrays (CPU, no autograd) unless the folder is over its budget; True when a file
        was written. Never raises on I/O trouble (a read-only or full disk leaves the memo in charge)."""
        if any(a.requires_grad or a.device.type != "cpu" for a in arrays):
            return False
        nps = [np.ascontiguousarray(a.numpy()) for a in arrays]
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if kind != "index" and self.used() + sum(a.nbytes for a in nps) > self.budget:
                return False
            # the project's atomic write: a temporary renamed into place (the user's umask decides who may
            # read it), and the temporaries of writers killed mid-write removed
            atomic.write_with(self.path(kind, parts), lambda tmp: _write_file(tmp, self.identity, kind, parts, nps))
        except OSError:
            return False
        return True

    @contextlib.contextmanager
    def building(self, kind: str, parts: Parts) -> Any:
        """Hold the pair's build lock (an exclusive flock on ``<file>.lock``, across processes) for the
        block: one process builds a pair while the others that need it wait, then read its file instead
        of building it too (16 forked workers cutting the same types built each pair up to 16 times
        over, each copy in its own memory: 6.5 GiB at peak against 3.4 warm). A lock that cannot be
        taken (a read-only folder, no flock) means building without it, as before; a process killed
        while holding it releases it with its file descriptors."""
        fd = None
        try:
            import fcntl

            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(str(self.path(kind, parts)) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except (OSError, ImportError):
            if fd is not None:
                os.close(fd)
            fd = None
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing the descriptor releases the lock

    def used(self) -> int:
        """Bytes of pair files in the folder."""
        try:
            return sum(p.stat().st_size for p in self.folder.glob("*.bin"))
        except OSError:
            return 0

    def _discard(self, path: Path) -> None:
        self.rebuilt += 1
        for gone in (path, _record_path(path)):
            try:
                gone.unlink(missing_ok=True)
            except OSError:
                pass


_STAMP = ("dev", "ino", "size", "mtime_ns", "ctime_ns")


def _file_stamp(st: os.stat_result) -> tuple[int, ...]:
    """What changes with any write to the file, or its replacement (module docstring)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _stamp(st: os.stat_result, header_crc: int) -> dict[str, int]:
    """A verification record's content: the file's stamp and its header's CRC."""
    return {**dict(zip(_STAMP, _file_stamp(st), strict=True)), "header_crc": header_crc}


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + _RECORD)


def _recorded(path: Path, st: os.stat_result, header_crc: int) -> bool:
    """Whether the file open as ``st`` is the one a full check recorded (module docstring); never with
    PIPELINE_VERIFY=always. A missing, unreadable or foreign record means no."""
    from pipeline.core.config import verify_mode

    if verify_mode() == "always":
        return False
    try:
        got = json.loads(_record_path(path).read_bytes())
    except (OSError, ValueError):
        return False
    return got == _stamp(st, header_crc)


def _record(path: Path, st: os.stat_result, header_crc: int) -> None:
    """Record the full check of the file open as ``st``, once its times are settled (module docstring).
    Best effort: a folder this process may not write keeps every open checking in full."""
    newest = max(st.st_mtime_ns, st.st_ctime_ns) / 1e9
    if time.time() - newest < _SETTLED:
        return
    with contextlib.suppress(OSError):
        atomic.write_text(_record_path(path), json.dumps(_stamp(st, header_crc), sort_keys=True))


def _crcs(mm: mmap.mmap, spans: list[tuple[int, int]]) -> list[int]:
    """The CRC-32 of each (offset, nbytes) span of the map (:func:`_crc_unmapping`), the spans of a
    large file shared out to one thread per core (zlib releases the GIL while it sums: CN15k's 1.94 GB
    index is checked in ~0.45 s on 2 cores instead of ~0.8). The threads are joined here."""
    total = sum(n for _, n in spans)
    threads = min(len(spans), os.cpu_count() or 1, 4)
    if threads < 2 or total < _PARALLEL_CRC:
        return [_crc_unmapping(mm, lo, n) for lo, n in spans]
    got = [0] * len(spans)
    load = [0] * threads
    share: list[list[int]] = [[] for _ in range(threads)]
    for i in sorted(range(len(spans)), key=lambda i: -spans[i][1]):  # largest first, to the least loaded
        t = load.index(min(load))
        share[t].append(i)
        load[t] += spans[i][1]

    def work(mine: list[int]) -> list[tuple[int, int]]:
        return [(i, _crc_unmapping(mm, *spans[i])) for i in mine]

    # the pool's threads are joined on leaving; a thread's error is raised (a span never counts as checked)
    with ThreadPoolExecutor(threads) as pool:
        for part in pool.map(work, share):
            for i, crc in part:
                got[i] = crc
    return got


def _crc_unmapping(mm: mmap.mmap, offset: int, nbytes: int) -> int:
    """CRC-32 of the mapped bytes [offset, offset + nbytes), read through the map in chunks, each chunk's
    pages then dropped from this process' page tables (MADV_DONTNEED; they stay in the page cache): a
    process' memory holds only the pages its answering touches (CN15k's index is 1.94 GB; a query set
    reads part of it), never the whole file at once. The map is private and never written, so a later
    read faults the same bytes back in from the page cache (about 0.05 s per GB)."""
    view = memoryview(mm)
    can_drop = hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED")
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


def _write_file(path: Path, identity: str, kind: str, parts: Parts, arrays: list[np.ndarray]) -> None:
    with open(path, "wb") as f:
        write(f, identity, kind, parts, arrays)


def write(f: BinaryIO, identity: str, kind: str, parts: Parts, arrays: list[np.ndarray]) -> None:
    """A pair file: prefix, header, aligned arrays (see the module's docstring), streamed to ``f`` (no
    copy of the arrays in memory: the index of a large export is gigabytes)."""
    specs: list[dict[str, Any]] = [
        {"dtype": a.dtype.str, "shape": list(a.shape), "nbytes": int(a.nbytes), "crc": _crc(a)}
        for a in arrays
    ]
    head: dict[str, Any] = {
        "format": FORMAT,
        "identity": identity,
        "kind": kind,
        "parts": [[bool(h), int(r)] for h, r in parts],
        "arrays": specs,
    }
    # offsets depend on the header's length, which depends on the offsets' digits: pad them to a fixed width
    for spec in specs:
        spec["offset"] = 10**15
    raw = json.dumps(head, sort_keys=True).encode()
    pos = _align(_PREFIX.size + len(raw))
    for spec in specs:
        spec["offset"] = pos
        pos = _align(pos + spec["nbytes"])
    raw = json.dumps(head, sort_keys=True).encode().ljust(len(raw))  # offsets shorter than the placeholder
    f.write(_PREFIX.pack(MAGIC, zlib.crc32(raw), len(raw)) + raw)
    at = _PREFIX.size + len(raw)
    for spec, a in zip(specs, arrays, strict=True):
        f.write(b"\0" * (spec["offset"] - at))
        f.write(a.reshape(-1).view(np.uint8).data)
        at = spec["offset"] + spec["nbytes"]
    f.write(b"\0" * (pos - at))


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def export_identity(folder: str | Path) -> str:
    """A content key of an export: sha256 of its manifest (which names the model's hash, the threshold,
    each relation file's size and, where written, digest) and of each relation file's size and modification time (a file rewritten in place is another export). Relation files
    are read by :func:`~pipeline.formats.adjacency.load_adjacency`, which checks them against the manifest."""
    import hashlib

    folder = Path(folder)
    h = hashlib.sha256((folder / "manifest.json").read_bytes())
    for p in sorted(folder.glob("rel-*.arrow")):
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:32]


def default_folder(identity: str) -> Path | None:
    """Where an export's pair files live: PIPELINE_PAIR_CACHE (``off`` disables the cache) or
    PIPELINE_HOME/pairs, then the export's identity."""
    from pipeline.core import config

    base = config.pair_cache_root()
    return None if base is None else base / identity


def for_export(folder: str | Path, salt: str = "") -> PairCache | None:
    """The pair cache of the export at ``folder`` (None when disabled). ``salt`` keys confidences that are
    not the export's own (a saved calibration L)."""
    ident = export_identity(folder)
    if salt:
        import hashlib

        ident = hashlib.sha256(f"{ident}:{salt}".encode()).hexdigest()[:32]
    where = default_folder(ident)
    return None if where is None else PairCache(where, ident)


def for_calibrated(export: str | Path, l_dir: str | Path) -> PairCache | None:
    """The pair cache of an export's confidences calibrated by the saved L in ``l_dir``: keyed by the
    export and the bytes of L's files (a refit with other weights never reads the old pairs)."""
    import hashlib

    l_dir = Path(l_dir)
    h = hashlib.sha256()
    for f in sorted(p for p in l_dir.rglob("*") if p.is_file()):
        h.update(f.relative_to(l_dir).as_posix().encode() + b"\0" + f.read_bytes())
    return for_export(export, salt=f"L:{h.hexdigest()}")
