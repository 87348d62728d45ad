"""Environment-driven locations: PIPELINE_HOME, PIPELINE_DATA, PIPELINE_STORE (design section 5)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

N = TypeVar("N", int, float)


def home() -> Path:
    """Root of caches, models and the embedded store (PIPELINE_HOME; unset or blank: ~/.cache/pipeline)."""
    raw = os.environ.get("PIPELINE_HOME")
    return Path(raw if raw and raw.strip() else Path.home() / ".cache" / "pipeline").expanduser()


MIRROR_FIX = "fix the path, or unset PIPELINE_DATA to download the files from their upstream URLs"


def data_mirror() -> Path | None:
    """PIPELINE_DATA: a local mirror root holding one folder per data set, or None when unset (or blank).
    A path that is missing or not a folder is one PipelineError naming the variable: never a silent
    download in its place."""
    raw = os.environ.get("PIPELINE_DATA")
    if raw is None or not raw.strip():
        return None
    root = Path(raw).expanduser()
    if not root.is_dir():
        from pipeline.core.errors import PipelineError

        if root.exists():
            what = "is a file, not a folder (a local mirror holds one folder per data set)"
        else:
            what = "a symbolic link to nothing" if root.is_symlink() else "no such folder"
            what += f" (a local mirror holds one folder per data set, e.g. {root / 'cn15k'})"
        raise PipelineError(f"PIPELINE_DATA={raw}: {what}; {MIRROR_FIX}")
    return root


def default_store_uri() -> str:
    """The store URI used when --store is not given."""
    return os.environ.get("PIPELINE_STORE", "embedded")


KERNEL_MODES = ("auto", "numba", "torch")  # PIPELINE_KERNELS (pipeline.engine.kernels)
VERIFY_MODES = ("auto", "always")  # PIPELINE_VERIFY (pipeline.formats.pair_cache)
_OFF = ("off", "0", "none")


def _env_error(name: str, raw: str, expected: str):
    from pipeline.core.errors import PipelineError

    return PipelineError(f"{name}={raw!r}: expected {expected}")


def env_choice(name: str, choices: tuple[str, ...]) -> str:
    """Environment variable ``name`` as one of ``choices`` (case and spaces ignored; unset or blank: the
    first); one PipelineError naming the variable and the choices else."""
    raw = os.environ.get(name, "")
    got = raw.strip().lower() or choices[0]
    if got not in choices:
        raise _env_error(name, raw, " or ".join(choices))
    return got


def env_number(name: str, default: N, parse: Callable[[str], N], ok: Callable[[N], bool], expected: str) -> N:
    """The number in environment variable ``name`` (``default`` when unset or blank), read by ``parse``
    and accepted by ``ok``; one PipelineError naming the variable and what it ``expected`` else."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise _env_error(name, raw, expected) from None
    if not ok(value):
        raise _env_error(name, raw, expected)
    return value


def kernel_mode() -> str:
    """PIPELINE_KERNELS: auto (default), numba or torch."""
    return env_choice("PIPELINE_KERNELS", KERNEL_MODES)


def verify_mode() -> str:
    """PIPELINE_VERIFY: auto (default: a pair-cache file is summed once per write) or always."""
    return env_choice("PIPELINE_VERIFY", VERIFY_MODES)


def pair_cache_root() -> Path | None:
    """PIPELINE_PAIR_CACHE: a folder or off; default PIPELINE_HOME/pairs. See :func:`_cache_root` for what
    is refused."""
    return _cache_root("PIPELINE_PAIR_CACHE", "pairs")


def parsed_cache_root() -> Path | None:
    """PIPELINE_PARSED_CACHE (the parsed data sets, :mod:`loaders.parsed`): a folder or off; default
    PIPELINE_HOME/parsed. See :func:`_cache_root` for what is refused."""
    return _cache_root("PIPELINE_PARSED_CACHE", "parsed")


def _cache_root(name: str, default: str) -> Path | None:
    """A cache folder named by environment variable ``name`` (None: off), else ``PIPELINE_HOME/default``.
    A folder named by the variable is made when missing only as the last folder of its path: a path
    whose parent does not exist (a mistyped root would be made folder by folder), a path that is a file
    or under one, and the filesystem root (each cache file a folder of its own there) are refused in one
    line naming the variable, not ignored."""
    raw = os.environ.get(name)
    if raw is not None and raw.strip().lower() in (*_OFF, ""):
        return None
    if not raw:
        return home() / default
    base = Path(raw).expanduser()
    if base.is_dir():
        if base.resolve() == Path(base.resolve().anchor):
            raise _env_error(name, raw, "a folder of its own or off, not the filesystem root")
        return base
    if base.exists():
        raise _env_error(name, raw, f"a folder or off ({base} is not a folder)")
    parent = base.absolute().parent
    if not parent.is_dir():
        there = next((p for p in (parent, *parent.parents) if p.exists()), None)
        if there is not None and not there.is_dir():
            raise _env_error(name, raw, f"a folder or off ({there} is not a folder)")
        raise _env_error(name, raw, f"a folder or off (its parent {parent} does not exist: only the last "
                         "folder of the path is made)")
    return base


def check_environment() -> None:
    """The project's environment variables that change what a command does, checked at the door (the CLI
    before any command, the Python API before any function): a typo is one line, never ignored.
    (PIPELINE_LOCK_TIMEOUT, PIPELINE_STORE_WAIT, PIPELINE_STORE_MEMORY and PIPELINE_CYCLE_WORK are checked
    where they are read, with the same one line.) The thread counts of the libraries underneath
    (OMP_NUM_THREADS and its kin) are bounded by the machine (:mod:`pipeline.core.limits`)."""
    from pipeline.core import limits

    check_home()
    kernel_mode()
    verify_mode()
    pair_cache_root()
    parsed_cache_root()
    limits.check_thread_variables()


def check_home() -> None:
    """PIPELINE_HOME when set: a folder, or a path to make one at (its missing folders are made on first
    use); a file, a path under a file and the filesystem root (the store, the runs and the caches would
    be folders of their own there) are one line naming the variable."""
    raw = os.environ.get("PIPELINE_HOME")
    if raw is None or not raw.strip():
        return
    path = Path(raw).expanduser()
    there = next((p for p in (path, *path.absolute().parents) if p.exists()), None)
    if there is not None and not there.is_dir():
        raise _env_error("PIPELINE_HOME", raw, f"a folder ({there} is not a folder)")
    if path.is_dir() and path.resolve() == Path(path.resolve().anchor):
        raise _env_error("PIPELINE_HOME", raw, "a folder of its own, not the filesystem root")


def repo_root() -> Path:
    """The checkout root (holds cypher/, docs/)."""
    return Path(__file__).resolve().parents[2]


def select_device(requested: str | None = None) -> str:
    """'cuda' when present unless a device is requested explicitly; never hard-coded. A requested device
    must exist here: ``cpu``, ``cuda``/``cuda:N`` with CUDA in this torch build and that GPU visible, or
    ``mps``; anything else is one PipelineError (not torch's traceback at the first tensor)."""
    import torch

    from pipeline.core.errors import PipelineError

    if requested is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(requested, str) or not requested.strip():  # "" is not "the default": a value lost on the way
        raise PipelineError(f"--device {requested!r}: expected cpu, cuda or cuda:N")
    try:
        dev = torch.device(requested.strip().lower())  # CPU is cpu
    except (RuntimeError, ValueError):
        raise PipelineError(f"--device {requested!r}: not a device; expected cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no GPU visible"
            raise PipelineError(f"--device {requested}: torch {torch.__version__} here is {build}; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise PipelineError(f"--device {requested}: only {torch.cuda.device_count()} GPU(s) visible")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise PipelineError(f"--device {requested}: no MPS device here; use --device cpu")
    elif dev.type != "cpu":
        raise PipelineError(f"--device {requested!r}: expected cpu, cuda or cuda:N")
    return requested.strip().lower()
