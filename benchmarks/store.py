"""The graph store under faults, and a store that comes back after ``kill -9``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Goal, Result, Table, benchmark, progress, say
from benchmarks.processes import ROOT, env, pipeline_argv


def run(home: Path, *args: str, timeout: float = 600) -> tuple[int, float, str, str]:
    """``pipeline ARGS`` in a fresh process, its server capped at 1 GiB: (exit code, s, stdout, stderr)."""
    e = env(ROOT, PIPELINE_HOME=str(home), PIPELINE_STORE_MEMORY="1")
    e.pop("PIPELINE_STORE", None)
    t0 = time.perf_counter()
    p = subprocess.run(pipeline_argv(*args), env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, time.perf_counter() - t0, p.stdout, p.stderr


def pid_of(home: Path) -> int:
    return json.loads((home / "store" / "server.json").read_text())["pid"]


def count(home: Path, label: str) -> int | None:
    rc, _, out, _ = run(home, "cypher", f"MATCH (n:{label}) RETURN count(n) AS n", "--json")
    return json.loads(out)[0]["n"] if rc == 0 else None


def cont(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass  # restarted: killed meanwhile


def lines(err: str) -> int:
    return len([ln for ln in err.splitlines() if ln.strip()])


def fresh(work: Path, name: str, nodes: int) -> Path:
    home = work / name
    rc, _, _, err = run(home, "cypher", f"UNWIND range(1, {nodes}) AS i CREATE (:Kept {{i: i}})")
    assert rc == 0, err
    return home


def sigstop(work: Path, nodes: int) -> list[list[Any]]:
    rows = []
    home = fresh(work, "stop_next", nodes)
    pid = pid_of(home)
    os.kill(pid, signal.SIGSTOP)
    rc, s, out, err = run(home, "cypher", "MATCH (n:Kept) RETURN count(n) AS n", "--json")
    rows.append(
        [
            "the next command after a SIGSTOP",
            rc,
            s,
            lines(err),
            json.loads(out)[0]["n"] if rc == 0 else None,
            "restarted" if pid_of(home) != pid else "the same",
        ]
    )
    cont(pid)

    home = fresh(work, "stop_inflight", nodes)
    pid = pid_of(home)
    threading.Timer(3.0, lambda: os.kill(pid, signal.SIGSTOP)).start()
    # (a statement that builds no large value: no trial run before it, so it is in flight on the store)
    rc, s, _, err = run(home, "cypher", "MATCH (a:Kept), (b:Kept) WHERE a.i + b.i < 0 RETURN count(*)")
    rows.append(
        [
            "a statement in flight at the SIGSTOP",
            rc,
            s,
            lines(err),
            count(home, "Kept"),
            "restarted" if pid_of(home) != pid else "the same",
        ]
    )
    cont(pid)

    home = fresh(work, "stop_cont", nodes)
    pid = pid_of(home)
    os.kill(pid, signal.SIGSTOP)
    time.sleep(5)
    os.kill(pid, signal.SIGCONT)
    rc, s, out, err = run(home, "cypher", "MATCH (n:Kept) RETURN count(n) AS n", "--json")
    rows.append(
        [
            "continued after 5 s, the next command",
            rc,
            s,
            lines(err),
            json.loads(out)[0]["n"] if rc == 0 else None,
            "restarted" if pid_of(home) != pid else "the same",
        ]
    )
    for name in ("stop_next", "stop_inflight", "stop_cont"):
        run(work / name, "store", "stop")
    return rows


RUNAWAY = (
    (
        "`UNWIND range(1, 10000000000) …`",
        "UNWIND range(1, 10000000000) AS x WITH x WHERE x < 0 RETURN count(x)",
    ),
    (
        "`WITH toInteger('10000000000') AS n UNWIND range(1, n) …`",
        "WITH toInteger('10000000000') AS n UNWIND range(1, n) AS x RETURN count(x)",
    ),
    (
        "`reduce(s = 'x', i IN range(1, 40) | s + s)`",
        "RETURN size(reduce(s = 'x', i IN range(1, 40) | s + s)) AS n",
    ),
    (
        "`[x IN range(1, 20000) | range(1, 20000)]`",
        "RETURN size([x IN range(1, 20000) | range(1, 20000)]) AS n",
    ),
    (
        "`MATCH (h:Huge) UNWIND range(1, h.n) …` (h.n = 10^10 stored)",
        "MATCH (h:Huge) UNWIND range(1, h.n) AS x RETURN count(x)",
    ),
)


def runaway(work: Path, nodes: int) -> list[list[Any]]:
    rows = []
    home = fresh(work, "runaway", nodes)
    run(home, "cypher", "CREATE (:Huge {n: 10000000000})")
    for case, statement in RUNAWAY:
        pid = pid_of(home)
        rc, s, _, err = run(home, "cypher", statement)
        ended = "ended during the statement" in err or pid_of(home) != pid
        deadline = time.monotonic() + 30
        while ended and os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.05)  # (its bug report is still being written)
        rc2, s2, out, _ = run(home, "cypher", "MATCH (n:Kept) RETURN count(n) AS n", "--json")
        how = (
            "refused before it was sent"
            if "would hold" in err
            else "refused after a trial run"
            if "trial run" in err
            else "ran"
            if rc == 0
            else "ended the server at its cap"
            if ended
            else "error"
        )
        rows.append(
            [
                case,
                rc,
                s,
                how,
                "memory" in err,
                "ended" if ended else "the same",
                s2,
                json.loads(out)[0]["n"] if rc2 == 0 else None,
            ]
        )
    run(home, "store", "stop")
    return rows


def full_disk(work: Path) -> list[list[Any]]:
    """Writes on a 64 MB tmpfs filled up (needs root to mount it)."""
    mnt = work / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], check=True)
    rows = []
    try:
        home = mnt / "home"
        run(home, "cypher", "CREATE (:Before {v: 1})")
        filler = mnt / "filler"
        _fill(filler)
        rc, s, out, _ = run(home, "cypher", "UNWIND range(1, 20000) AS i CREATE (:Fill {i: i})")
        os.kill(pid_of(home), signal.SIGKILL)
        time.sleep(0.5)
        filler.unlink()
        acked = 20000 if "nodes created" in out else 0
        rows.append(["a write on the full disk (checked before)", rc, s, acked, count(home, "Fill")])
        code = (
            "import json\nfrom pipeline.store import open_store, recovery\nrecovery.MIN_FREE_BYTES = -(1 << 30)\n"
            "s = open_store(); acked = 0\n"
            "for _ in range(50):\n"
            "    try:\n"
            "        s.run('UNWIND range(1, 100) AS i CREATE (:Late {i: i, pad: $p})', {'p': 'x' * 3000}); acked += 1\n"
            "    except Exception as e:\n"
            "        print(json.dumps({'acked': acked, 'error': str(e)})); break\n"
        )
        _fill(filler)
        e = env(ROOT, PIPELINE_HOME=str(home), PIPELINE_STORE_MEMORY="1")
        out = subprocess.run(
            [sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=300
        ).stdout
        got = json.loads(out.strip().splitlines()[-1])
        filler.unlink()
        rows.append(
            [
                "the disk filled between the check and the write (check off)",
                None,
                None,
                got["acked"] * 100,
                count(home, "Late"),
            ]
        )
        run(home, "store", "stop")
    finally:
        subprocess.run(["umount", "-l", str(mnt)])
    return rows


def _fill(filler: Path) -> None:
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass


def overhead(work: Path, n: int = 500) -> list[list[Any]]:
    """What the bounds cost a statement: the durability check after a one-row write, the liveness watch."""
    saved = {k: os.environ.get(k) for k in ("PIPELINE_HOME", "PIPELINE_STORE_MEMORY")}
    os.environ.update(PIPELINE_HOME=str(work / "overhead"), PIPELINE_STORE_MEMORY="1")
    try:
        return _overhead(n)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _overhead(n: int) -> list[list[Any]]:
    from pipeline.store import embedded, liveness, open_store

    rows = []
    with open_store() as store:
        store.run("CREATE INDEX FOR (n:W) ON (n.i)")
        for durable in (False, True, False, True):  # twice each, interleaved: the machine may be shared
            store.require_durable = durable
            label = f"W{len(rows)}"
            t0 = time.perf_counter()
            for i in range(n):
                store.run(f"CREATE (:{label} {{i: $i}})", {"i": i})
            write = (time.perf_counter() - t0) / n
            t0 = time.perf_counter()
            for i in range(n):
                store.run(f"MATCH (w:{label}) WHERE w.i = $i RETURN w.i AS i", {"i": i})
            read = (time.perf_counter() - t0) / n
            rows.append(["one-row CREATE / MATCH", "on" if durable else "off", write * 1e3, read * 1e3])
    watch = liveness.Watch(lambda t: True, lambda: None)
    t0 = time.perf_counter()
    for _ in range(20000):
        with watch.call(60.0):
            pass
    rows.append(
        ["the liveness watch of one call (no server)", "-", (time.perf_counter() - t0) / 20000 * 1e3, None]
    )
    embedded.stop()
    return rows


@benchmark(
    "store-faults",
    title="The store under faults",
    goals=[
        Goal(
            "command_s",
            "a command meeting a stopped server or a runaway statement (the slowest)",
            "<=",
            30,
            "s",
        ),
        Goal("lost", "acknowledged writes missing after the fault", "<=", 0, "writes"),
    ],
    quick={"nodes": 2000, "disk": False},
)
def store_faults(*, nodes: int = 20000, disk: bool = True, work: Path | None = None) -> Result:
    """The store's faults as a user meets them, each command a fresh ``pipeline`` process in a throw-away home
    whose server is capped at 1 GiB: a server stopped with SIGSTOP (the next command, a statement in flight,
    a server continued after 5 s); statements that blow up memory (refused before they are sent, refused
    after a trial run, or the server ending at its cap: the next command then); a full disk (a 64 MB tmpfs,
    needs root; ``--no-disk`` skips it); what the bounds cost a statement."""
    folder = Path(work or tempfile.mkdtemp(prefix="bench-store-faults-"))
    can_mount = os.geteuid() == 0 and shutil.which("mount") is not None
    parts = ["sigstop", "runaway", *(["disk"] if disk and can_mount else []), "overhead"]
    got: dict[str, list[list[Any]]] = {}
    with progress(len(parts), "store-faults", "part") as bar:
        for part in parts:
            got[part] = {
                "sigstop": sigstop,
                "runaway": runaway,
                "disk": lambda w, n: full_disk(w),
                "overhead": lambda w, n: overhead(w),
            }[part](folder, nodes)
            bar.update(1)
    tables = [
        Table(
            ["case", "exit", "s", "stderr lines", "acknowledged nodes kept", "server"],
            got["sigstop"],
            title=f"SIGSTOP (a store of {nodes:,} nodes)",
            formats={"s": ".1f"},
        ),
        Table(
            [
                "statement",
                "exit",
                "s",
                "outcome",
                "line names the cap",
                "server after",
                "next command s",
                "acknowledged nodes kept",
            ],
            got["runaway"],
            title="Statements that blow up memory",
            formats={"s": ".1f", "next command s": ".1f"},
        ),
    ]
    kept = [r[4] for r in got["sigstop"]] + [r[7] for r in got["runaway"]]
    lost = sum(nodes - k for k in kept if k is not None)
    if "disk" in got:
        tables.append(
            Table(
                ["case", "exit", "s", "acknowledged nodes", "nodes after kill -9 and space freed"],
                got["disk"],
                title="A full disk (64 MB tmpfs)",
                formats={"s": ".1f"},
            )
        )
        lost += sum(max(0, r[3] - (r[4] or 0)) for r in got["disk"])
    else:
        say("store-faults: the full-disk part skipped (--no-disk, or not root)")
    tables.append(
        Table(
            ["statement", "durability check", "write ms", "read ms"],
            got["overhead"],
            title="What the bounds cost",
            formats={"write ms": ".3f", "read ms": ".3f"},
        )
    )
    slowest = max([r[2] for r in got["sigstop"]] + [r[2] for r in got["runaway"]])
    return Result(tables, {"command_s": slowest, "lost": lost})


def _aof(folder: Path) -> tuple[int, int]:
    d = folder / "appendonlydir"
    return sum(p.stat().st_size for p in d.glob("*.base.*")), sum(
        p.stat().st_size for p in d.glob("*.incr.aof")
    )


def _kill(embedded) -> None:
    info = embedded.status()
    os.kill(info.pid, signal.SIGKILL)
    while embedded.pid_alive(info.pid):
        embedded._reap(info.pid)


CONFIGS = {
    "compact": ("compacted (the default), killed after the last write-back", True, False),
    "mid": ("compacted (the default), killed half way through one more write-back", True, True),
    "grow": (
        "never compacted (as before compaction existed), killed after the last write-back",
        False,
        False,
    ),
}


@benchmark(
    "restart",
    title="A store that comes back after kill -9",
    goals=[
        Goal(
            "restart_s",
            "the embedded store's restart after kill -9, compacted (the slowest case)",
            "<=",
            10,
            "s",
        )
    ],
    quick={"per_type": 5, "explain": 1, "rounds": 2, "configs": ("compact",)},
)
def restart(
    *,
    per_type: int = 100,
    explain: int = 3,
    rounds: int = 10,
    configs: tuple[str, ...] = ("compact", "mid"),
    work: Path | None = None,
) -> Result:
    """CN15k into a throw-away embedded store, a test query set sampled there (``--per-type`` per type, alpha
    hybrid, beta random, seed 0), answered by SRC over the observed train graph (exact, no model needed)
    with the witnesses of each query's top ``--explain``; then per configuration, in a fresh home: ingest,
    ``--rounds`` write-backs of those answers (each replaces the previous one, as re-answering does), the
    append-only file's parts measured, ``kill -9`` of the server, the restart timed until the server answers
    (it waits while the log replays), and the answers readers see counted. ``--configs``: compact (killed
    after the last write-back), mid (killed half way through one more), grow (never compacted, as before
    compaction existed: its restart replays the whole log, half an hour on a 2-core machine)."""
    import torch

    torch.set_num_threads(1)
    folder = Path(work or tempfile.mkdtemp(prefix="bench-restart-"))
    from loaders import load
    from pipeline.core.kg import observed_graph
    from pipeline.formats.answers import read_answers
    from pipeline.formats.queryset import read_query_set
    from pipeline.formats.witnesses import read_witnesses
    from pipeline.methods.src import SRC
    from pipeline.stages.answer import AnswerOptions, answer_queries
    from pipeline.stages.options import SampleOptions
    from pipeline.stages.sample import sample_to_dir
    from pipeline.stages.writeback import write_back_to
    from pipeline.store import embedded, open_store
    from pipeline.store.ingest import ingest

    kg = load("cn15k")
    old_home = os.environ.get("PIPELINE_HOME")
    os.environ["PIPELINE_HOME"] = str(folder / "prep")
    try:
        with open_store() as store:
            ingest(kg, store, progress=False)
            done = sample_to_dir(
                kg,
                store,
                SampleOptions(
                    out=folder / "qs",
                    split="test",
                    types=None,
                    per_type=per_type,
                    alpha="hybrid",
                    beta="random",
                    seed=0,
                    browse=False,
                    progress=False,
                ),
            )
        embedded.stop()
        qs = read_query_set(done["file"])
        method = SRC.over(observed_graph(kg, "train"), "cn15k", backbone="observed-train")
        report = answer_queries(
            qs, method, AnswerOptions(out=folder / "ans", explain=explain, progress=False)
        )
        answers = read_answers(report["path"])
        witnesses = read_witnesses(report["witnesses"])[0]
        rows, restarts, written = [], [], {}
        with progress(len(configs), "restart", "configuration") as bar:
            for key in configs:
                label, compact, mid = CONFIGS[key]
                home = folder / f"home-{key}"
                shutil.rmtree(home, ignore_errors=True)
                os.environ["PIPELINE_HOME"] = str(home)
                saved = embedded.COMPACT_BYTES
                if not compact:
                    embedded.COMPACT_BYTES = 1 << 62
                try:
                    info = embedded.start()
                    if not compact:  # the server's own rule off too, as before compaction existed
                        creds = embedded.credentials(info)
                        embedded._client(
                            info.host, info.port, creds.admin_user, creds.admin_password, 10
                        ).config_set("auto-aof-rewrite-percentage", 0)
                    with open_store() as store:
                        ingest(kg, store, progress=False)
                    t = time.perf_counter()
                    for _ in range(rounds):
                        written = write_back_to(None, answers, qs, witnesses=witnesses, query_nodes=True)
                    wb_s = time.perf_counter() - t
                    time.sleep(
                        2
                    )  # a compaction the last checkpoint asked for finishes in the server's background
                    worker = None
                    if mid:  # one more write-back, the server killed half way through it

                        def again() -> None:
                            try:
                                write_back_to(None, answers, qs, witnesses=witnesses, query_nodes=True)
                            except Exception:  # noqa: BLE001 - the server dies under it, as intended
                                pass

                        worker = threading.Thread(target=again, daemon=True)
                        worker.start()
                        time.sleep(wb_s / rounds / 2)
                    base, incr = _aof(embedded.store_dir())
                    _kill(embedded)
                    if worker is not None:
                        worker.join(60)
                    t = time.perf_counter()
                    embedded.start()
                    restart_s = time.perf_counter() - t
                    with open_store() as store:
                        n = store.run(
                            "MATCH (:Query {dataset: 'cn15k'})-[a:ANSWER]->() RETURN count(a) AS n"
                        )[0]["n"]
                    embedded.stop()
                finally:
                    embedded.COMPACT_BYTES = saved
                rows.append([label, wb_s, base, incr, restart_s, n])
                if compact:
                    restarts.append(restart_s)
                bar.update(1)
    finally:
        if old_home is None:
            os.environ.pop("PIPELINE_HOME", None)
        else:
            os.environ["PIPELINE_HOME"] = old_home
    return Result(
        [
            Table(
                [
                    "append-only file",
                    f"{rounds} write-backs s",
                    "snapshot part bytes",
                    "log part bytes",
                    "restart after kill -9 s",
                    "answers readers see",
                ],
                rows,
                formats={f"{rounds} write-backs s": ".1f", "restart after kill -9 s": ".1f"},
            )
        ],
        {"restart_s": max(restarts) if restarts else None},
        [
            f"{len(qs)} CN15k test queries ({per_type} per type); each write-back {written.get('answers')} ANSWER "
            f"edges, {written.get('witnesses')} witnesses, {written.get('atoms')} atoms."
        ],
    )
