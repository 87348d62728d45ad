"""Provenance: what every artifact carries so a table can be traced to the run that made it (as PyKEEN's
``metadata.json``): the versions, the git hash of the code, the command's config and seed, and the
checksums of its inputs; plus a digest that tells when a file's metadata was edited after it was written.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from datetime import datetime, timezone
from functools import cache
from typing import Any

from pipeline.core import config

PACKAGES = ("soft-queries", "torch", "numpy", "pandas", "pyarrow")


@cache
def git_hash() -> str | None:
    """HEAD of the checkout (with '-dirty' when it has local changes), None outside git."""
    root = config.repo_root()
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


@cache
def versions() -> dict[str, str | None]:
    """Python and the versions of the packages that shape results. torch's is its own version string,
    which names the build (2.13.0+cpu, 2.13.0+cu130): a wheel's metadata may leave the build out."""
    from importlib import metadata as md

    def version(pkg: str) -> str | None:
        if pkg == "torch":
            import torch

            return str(torch.__version__)
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    return {"python": platform.python_version(), **{p: version(p) for p in PACKAGES}}


def provenance(
    config_: dict[str, Any] | None = None,
    seed: int | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance block of an artifact: {created, git, versions, platform, config, seed, inputs}.

    config_: the settings that made it; inputs: checksums (or content keys) of the files it was made from."""
    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git": git_hash(),
        "versions": versions(),
        "platform": platform.platform(),
        "config": dict(config_ or {}),
        "seed": seed,
        "inputs": dict(inputs or {}),
    }


def stable_key(**parts: Any) -> str:
    """A 16-hex content key of named parts (JSON with sorted keys, str() for other values): the key of a
    reproduction stage or a saved calibration. Equal parts give equal keys on every run and machine."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def digest(meta: dict[str, Any]) -> str:
    """A content digest of a metadata document (without its own ``digest`` key)."""
    body = {k: v for k, v in meta.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:32]


def seal(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with its digest, so an accidental edit of any field (a data set relabelled, a threshold
    changed by hand or by another tool, with the digest left as it was or removed) is detected by
    :func:`is_sealed` when the file is read back. A digest is no key: an edit that computes it again is
    caught only by the reader's cross-checks (docs/store.md, "What the seals protect against")."""
    plain = json.loads(json.dumps(meta, sort_keys=True, default=str))
    return {**plain, "digest": digest(plain)}


def is_sealed(meta: dict[str, Any]) -> bool:
    """True when ``meta`` carries a digest that matches its content (False when edited or unsealed)."""
    return "digest" in meta and meta["digest"] == digest(meta)
