"""What checking an export's checksums costs on load: `load_adjacency` with and without
verifying every relation file's checksum (pipeline.core.checksums).

    PIPELINE_DATA=../shared/data python benchmarks/bench_checksums.py EXPORT_DIR [--repeat 3]
    python benchmarks/bench_checksums.py --synth 50000000 --out /tmp/synth-export [--relations 8]

``--synth N`` first writes an export of N random facts (int32 heads/tails, float32 scores in [0.1, 1],
sorted by (head, tail) per relation) with the project's own writer (Arrow IPC files + sealed manifest),
so the figure for a large export does not need a large model. The page cache is warm for every run (each
variant reads the same files right after the other): the figure is the hashing's CPU cost, not disk
bandwidth. Prints a markdown table, best of --repeat.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.formats.adjacency import FORMAT, SCHEMA, load_adjacency, relation_file, write_manifest


def synthesise(out: Path, n_facts: int, n_relations: int, n_entities: int, seed: int = 0) -> None:
    """An export folder of ``n_facts`` random facts spread evenly over ``n_relations``."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    relations = []
    per = n_facts // n_relations
    for r in range(n_relations):
        # distinct (head, tail) keys, sorted: what a real export holds
        keys = np.unique(rng.integers(0, n_entities * n_entities, size=int(per * 1.01), dtype=np.int64))[:per]
        keys.sort()
        h, t = (keys // n_entities).astype(np.int32), (keys % n_entities).astype(np.int32)
        s = rng.uniform(0.1, 1.0, size=len(keys)).astype(np.float32)
        meta = {"format": FORMAT, "dataset": "synth", "model_hash": "synth", "threshold": "0.1",
                "n_entities": str(n_entities), "n_relations": str(n_relations), "model": "synth",
                "top_k": "", "relation": str(r)}
        path = out / relation_file(r)
        schema = SCHEMA.with_metadata(meta)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for lo in range(0, len(h), 1 << 22):
                sl = slice(lo, lo + (1 << 22))
                writer.write_batch(pa.record_batch([pa.array(h[sl]), pa.array(t[sl]), pa.array(s[sl])], schema=schema))
        relations.append({"relation": r, "file": relation_file(r), "nnz": len(h), "bytes": path.stat().st_size})
    write_manifest(out, {"format": FORMAT, "dataset": "synth", "model_hash": "synth", "threshold": 0.1,
                         "n_entities": n_entities, "n_relations": n_relations, "relations": relations,
                         "nnz": sum(x["nnz"] for x in relations)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export", nargs="?")
    ap.add_argument("--synth", type=int, help="write a random export of this many facts first")
    ap.add_argument("--out", default="/tmp/synth-export")
    ap.add_argument("--relations", type=int, default=8)
    ap.add_argument("--entities", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    folder = Path(args.export or args.out)
    if args.synth:
        t0 = time.perf_counter()
        synthesise(folder, args.synth, args.relations, args.entities)
        print(f"synthesised {args.synth} facts in {time.perf_counter() - t0:.1f} s")
    size = sum(p.stat().st_size for p in folder.glob("*.arrow"))
    best: dict[bool, float] = {}
    cpu: dict[bool, float] = {}  # CPU seconds too: on a shared machine wall time alone is noisy
    for _ in range(args.repeat):
        for verify in (False, True):
            t0, c0 = time.perf_counter(), time.process_time()
            graph, manifest = load_adjacency(folder, verify=verify)
            best[verify] = min(best.get(verify, float("inf")), time.perf_counter() - t0)
            cpu[verify] = min(cpu.get(verify, float("inf")), time.process_time() - c0)
            del graph
    print(f"machine: {platform.processor() or platform.machine()}, {folder}: {manifest['nnz']} facts, "
          f"{size / 1e6:.1f} MB")
    print(f"| load | wall s (best of {args.repeat}) | CPU s (best of {args.repeat}) |")
    print("|---|---|---|")
    print(f"| without checksum check | {best[False]:.3f} | {cpu[False]:.3f} |")
    print(f"| with checksum check | {best[True]:.3f} | {cpu[True]:.3f} |")
    print(f"| overhead | {best[True] - best[False]:.3f} | {cpu[True] - cpu[False]:.3f} |")


if __name__ == "__main__":
    main()
