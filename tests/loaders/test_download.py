"""The real download path (urllib, cache, md5, zip members) against a loopback HTTP server serving a mirror."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import io
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from loaders import get_spec
from loaders.parsed import load_dataset
from pipeline.core.errors import ChecksumError, PipelineError
from tests.conftest import require_data


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 serving tmp_path/www; yields (base URL, folder)."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", www
    finally:
        server.shutdown()
        server.server_close()


def _respec(spec, base: str):
    files = tuple(
        dataclasses.replace(f, url=base + (f.archive or f.filename))
        for f in spec.files
        if f.role != "softlogic"
    )
    return dataclasses.replace(spec, files=files)


def test_download_caches_verifies_and_unzips(served, tmp_path: Path, monkeypatch) -> None:
    base, www = served
    real = require_data("ppi5k")
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PIPELINE_DATA", raising=False)
    for name in ("train.tsv", "val.tsv", "test.tsv"):
        (www / name).write_bytes((real / name).read_bytes())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # the id maps ship in a zip upstream
        zf.writestr("ppi5k/entity_id.csv", (real / "entity_id.csv").read_bytes())
        zf.writestr("ppi5k/relation_id.csv", (real / "relation_id.csv").read_bytes())
    (www / "ppi5k.zip").write_bytes(buf.getvalue())

    spec = _respec(get_spec("ppi5k"), base)
    kg = load_dataset(spec)
    assert kg.n_entities == 4_999 and len(kg.rows) == 230_929 + 19_017 + 21_720
    cache = tmp_path / "home" / "downloads" / "ppi5k"
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        ["train.tsv", "val.tsv", "test.tsv", "ppi5k.zip", "entity_id.csv", "relation_id.csv"]
    )
    # second load reads the cache: the server may go away
    for p in www.iterdir():
        p.unlink()
    assert len(load_dataset(spec).rows) == len(kg.rows)


def test_corrupt_download_is_not_kept(served, tmp_path: Path, monkeypatch) -> None:
    base, www = served
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PIPELINE_DATA", raising=False)
    (www / "train.tsv").write_text("0\t0\t1\t0.5\n")  # wrong md5
    spec = _respec(get_spec("ppi5k"), base)
    with pytest.raises(ChecksumError, match="train.tsv"):
        load_dataset(spec)
    assert not (tmp_path / "home" / "downloads" / "ppi5k" / "train.tsv").exists()


def test_unreachable_url_says_how_to_use_a_mirror(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PIPELINE_DATA", raising=False)
    spec = _respec(get_spec("ppi5k"), "http://127.0.0.1:9/")  # discard port: connection refused
    with pytest.raises(PipelineError, match="--source"):
        load_dataset(spec)
