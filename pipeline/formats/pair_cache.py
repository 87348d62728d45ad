"""Relation-pair work kept on disk, once per export: the multi-edge steps' shared entries and column
fronts (:meth:`Adjacency.shared_facts`, :meth:`Adjacency.column_front`) written the first time any process
builds them and memory-mapped by every later one, so a fresh ``pipeline answer`` answers like a warm one.

One file per (kind, relation pair): a magic line, the CRC-32 and length of a JSON header (format version,
the export's identity, kind, pair, and each array's dtype, shape, offset and CRC-32), then the arrays at
64-byte aligned offsets. Reading maps the file and checks the header's CRC and every array's CRC (about
4 GB/s); a file that fails any check (a flipped byte, a truncation, another export's identity, an older
format) is never believed: the arrays are rebuilt and the file rewritten.

Files are sealed as :mod:`pipeline.core.sealed_arrays` seals them: a file whose arrays passed a full
check gets a verification record beside it, so a later open whose file still has the same stamp (device,
inode, size, mtime, ctime) checks the header only. CN15k's 1.9 GB index was checked on every ``pipeline
answer`` (0.7-0.9 s on two cores) and each worker summed its relation pairs (~0.15 s for 400 MB).
``PIPELINE_VERIFY=always`` checks every array on every open. Writers go through :func:`pipeline.core.atomic.write_with` (a temporary renamed into place): two
processes building the same pair at once both write the same bytes, and readers see one whole file or the
other, never a mix. The folder is bounded by bytes (:data:`DEFAULT_BUDGET`): past it, new pairs stay in
the process' memo only.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from pipeline.core import atomic, sealed_arrays

if TYPE_CHECKING:  # torch is imported where tensors are made: check_ahead runs before torch's import
    import torch

FORMAT = "soft-queries/pair-cache/1"
MAGIC = b"SQPAIRS1"
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
        hit = self._mapped.get((kind, parts))
        try:
            if hit is not None and hit[0] == sealed_arrays.file_stamp(os.stat(path)):
                return hit[1]
            opened = sealed_arrays.open_checked(path, MAGIC, self._want(kind, parts))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.summed += int(getattr(exc, "summed", False))
            self._discard(path)
            return None
        import torch

        self.summed += int(opened.summed)
        got = tuple(torch.from_numpy(a) for a in opened.arrays)
        self._mapped[(kind, parts)] = (opened.stamp, got)
        return got

    def _want(self, kind: str, parts: Parts) -> dict[str, Any]:
        return {"format": FORMAT, "identity": self.identity, "kind": kind,
                "parts": [[bool(h), int(r)] for h, r in parts]}

    def paths(self) -> list[Path]:
        """Every pair and index file in the folder."""
        try:
            return sorted(self.folder.glob("*.bin"))
        except OSError:
            return []

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
        sealed_arrays.discard(path)


def _write_file(path: Path, identity: str, kind: str, parts: Parts, arrays: list[np.ndarray]) -> None:
    with open(path, "wb") as f:
        write(f, identity, kind, parts, arrays)


def write(f: BinaryIO, identity: str, kind: str, parts: Parts, arrays: list[np.ndarray]) -> None:
    """A pair file (see the module's docstring), streamed to ``f``."""
    fields = {"format": FORMAT, "identity": identity, "kind": kind, "parts": [[bool(h), int(r)] for h, r in parts]}
    sealed_arrays.write(f, MAGIC, fields, arrays)


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


def check_ahead(folder: str | Path) -> Any:
    """Start the full check of the pair-cache files of the export at ``folder`` (its index and pairs) that
    no verification record vouches for yet, in a background thread (:func:`pipeline.core.sealed_arrays.check_ahead`):
    the files the export has just written, which the first ``pipeline answer`` after it would check in
    full inside its first steps. Called before the heavy imports, so the check runs on a core they leave
    idle. Returns the thread (None: nothing to check, no cache, or no readable export there)."""
    try:
        cache = for_export(folder)
    except (OSError, ValueError):
        return None  # no export there: the command reports it
    return None if cache is None else sealed_arrays.check_ahead(cache.paths(), MAGIC)
