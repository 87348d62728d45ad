"""What checking an export's checksums costs on load."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark, progress


def synthesise(out: Path, n_facts: int, n_relations: int, n_entities: int, seed: int = 0) -> None:
    """An export folder of ``n_facts`` random facts spread evenly over ``n_relations``, written with the
    project's own writer (Arrow IPC files and a sealed manifest): int32 heads and tails, float32 scores in
    [0.1, 1], distinct (head, tail) keys sorted per relation, as a real export holds them."""
    import pyarrow as pa

    from pipeline.formats.adjacency import FORMAT, SCHEMA, relation_file, write_manifest

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    relations = []
    per = n_facts // n_relations
    for r in range(n_relations):
        keys = np.unique(rng.integers(0, n_entities * n_entities, size=int(per * 1.01), dtype=np.int64))[:per]
        h, t = (keys // n_entities).astype(np.int32), (keys % n_entities).astype(np.int32)
        s = rng.uniform(0.1, 1.0, size=len(keys)).astype(np.float32)
        meta = {
            "format": FORMAT,
            "dataset": "synth",
            "model_hash": "synth",
            "threshold": "0.1",
            "n_entities": str(n_entities),
            "n_relations": str(n_relations),
            "model": "synth",
            "top_k": "",
            "relation": str(r),
        }
        path = out / relation_file(r)
        schema = SCHEMA.with_metadata(meta)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for lo in range(0, len(h), 1 << 22):
                sl = slice(lo, lo + (1 << 22))
                writer.write_batch(
                    pa.record_batch([pa.array(h[sl]), pa.array(t[sl]), pa.array(s[sl])], schema=schema)
                )
        relations.append(
            {"relation": r, "file": relation_file(r), "nnz": len(h), "bytes": path.stat().st_size}
        )
    write_manifest(
        out,
        {
            "format": FORMAT,
            "dataset": "synth",
            "model_hash": "synth",
            "threshold": 0.1,
            "n_entities": n_entities,
            "n_relations": n_relations,
            "relations": relations,
            "nnz": sum(x["nnz"] for x in relations),
        },
    )


@benchmark(
    "checksums",
    title="Checksums on load",
    goals=[
        Goal("check_share", "the checksum check's CPU seconds against the load's without it", "<=", 0.5, "x")
    ],
    quick={"synth": 200_000, "repeat": 2},
)
def checksums(
    *,
    export: Path | None = None,
    synth: int | None = None,
    relations: int = 8,
    entities: int = 1_000_000,
    repeat: int = 3,
    out: Path | None = None,
) -> Result:
    """``load_adjacency`` of an export with and without verifying every relation file's checksum, alternately,
    best of ``--repeat`` (wall and CPU seconds: on a shared machine the wall clock alone is noisy). The page
    cache is warm for every run, so the figure is the hashing's CPU cost, not the disk's. ``--synth N`` first
    writes a random export of N facts (``--relations``, ``--entities``; into ``--out``, default a temporary
    folder), so a large export needs no large model."""
    from pipeline.formats.adjacency import load_adjacency

    if export is None and not synth:
        raise BenchmarkError("give --export EXPORT_DIR or --synth N_FACTS")
    folder = Path(export) if export else Path(out or tempfile.mkdtemp(prefix="bench-checksums-"))
    if synth:
        synthesise(folder, synth, relations, entities)
    size = sum(p.stat().st_size for p in folder.glob("*.arrow"))
    wall: dict[bool, float] = {}
    cpu: dict[bool, float] = {}
    with progress(repeat, "checksums", "round") as bar:
        for _ in range(repeat):
            for verify in (False, True):
                t0, c0 = time.perf_counter(), time.process_time()
                graph, manifest = load_adjacency(folder, verify=verify)
                wall[verify] = min(wall.get(verify, float("inf")), time.perf_counter() - t0)
                cpu[verify] = min(cpu.get(verify, float("inf")), time.process_time() - c0)
                del graph
            bar.update(1)
    rows = [
        ["without the checksum check", wall[False], cpu[False]],
        ["with the checksum check", wall[True], cpu[True]],
        ["the check", wall[True] - wall[False], cpu[True] - cpu[False]],
    ]
    return Result(
        [
            Table(
                ["load", f"wall s (best of {repeat})", f"CPU s (best of {repeat})"],
                rows,
                formats={f"wall s (best of {repeat})": ".3f", f"CPU s (best of {repeat})": ".3f"},
            )
        ],
        {"check_share": (cpu[True] - cpu[False]) / cpu[False]},
        [
            f"{'A synthetic export' if synth else folder.name}: {manifest['nnz']:,} facts, {size / 1e6:.1f} MB."
        ],
    )
