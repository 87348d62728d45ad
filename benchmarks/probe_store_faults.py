"""The store probed as a hostile user would: new inputs in the categories of the faults fixed (kill -9 at
random moments, SIGSTOP, a full disk, statements that blow up memory or time), each case a fresh
`pipeline` process, its outcome sorted into ok / one clear line / traceback / silent wrong / lost / hang.

- ok: the command did what it says; one clear line: it failed with exit 2 and one ``error:`` line;
- traceback: a Python traceback anywhere in its output;
- silent wrong: exit 0 with a wrong result, or data the store never acknowledged appearing;
- lost: a write the store acknowledged missing after a restart;
- hang: a command still running after 60 s (killed then).

    PIPELINE_DATA=../shared/data python benchmarks/probe_store_faults.py [--seed 0] [--rounds 3]

Needs root for the full-disk cases (a 64 MB tmpfs); they are skipped otherwise. Prints the cases and a
count per outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from pipeline.cli import main; sys.argv[0] = 'pipeline'; main()"]
HANG_S = 60.0


class Home:
    """A throw-away PIPELINE_HOME with its server capped at 1 GiB."""

    def __init__(self, root: Path, name: str) -> None:
        self.path = root / name
        self.env = {**os.environ, "PIPELINE_HOME": str(self.path), "PIPELINE_STORE_MEMORY": "1",
                    "PYTHONPATH": str(REPO), "PIPELINE_LOCK_TIMEOUT": "30"}
        self.env.pop("PIPELINE_STORE", None)

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(CLI + list(args), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=tempfile.gettempdir())

    def run(self, *args: str) -> tuple[object, str, str, float]:
        t0 = time.perf_counter()
        p = self.start(*args)
        try:
            out, err = p.communicate(timeout=HANG_S)
            return p.returncode, out, err, time.perf_counter() - t0
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            return "hang", out, err, time.perf_counter() - t0

    def pid(self) -> int | None:
        try:
            return json.loads((self.path / "store" / "server.json").read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return None

    def signal(self, sig: int) -> None:
        pid = self.pid()
        if pid:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def count(self, label: str) -> int | None:
        rc, out, _, _ = self.run("cypher", f"MATCH (n:{label}) RETURN count(n) AS n", "--json")
        return json.loads(out)[0]["n"] if rc == 0 else None

    def stop(self) -> None:
        self.signal(signal.SIGCONT)
        self.run("store", "stop")


def judge(rc: object, out: str, err: str) -> str:
    """The outcome of one command by its output alone (ok, one clear line, traceback, hang, unclear)."""
    if rc == "hang":
        return "hang"
    if "Traceback" in out or "Traceback" in err:
        return "traceback"
    if rc == 0:
        return "ok"
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("the store")]
    return "one clear line" if rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") else "unclear"


def acked_ids(out: str) -> set[int]:
    return {int(x) for x in out.split()} if out.strip() else set()


# a writer that prints the id of each write the store acknowledged, one per line, until it is stopped
WRITER = (
    "import sys, time\nfrom pipeline.store import open_store\ns = open_store()\nt0 = time.monotonic()\n"
    "for i in range(100000):\n"
    "    if time.monotonic() - t0 > 20: break\n"
    "    try:\n"
    "        s.run('CREATE (:Acked {i: $i, pad: $p})', {'i': i, 'p': 'x' * int(sys.argv[1])})\n"
    "    except Exception as e:\n"
    "        print('ERR', type(e).__name__, str(e).splitlines()[0][:200], file=sys.stderr); break\n"
    "    print(i, flush=True)\n"
)


def writer_case(home: Home, fault, pad: int = 100, settle: float = 1.5) -> tuple[str, str]:
    """Acknowledged writes in a loop, ``fault(home)`` meanwhile; then every acknowledged id must be there."""
    home.run("cypher", "MATCH (a:Acked) DETACH DELETE a")
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(pad)], env=home.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    first = p.stdout.readline()  # the fault comes once writes are being acknowledged
    time.sleep(settle)
    fault(home)
    try:
        out, err = p.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        p.kill()
        return "hang", "writer still running"
    acked = acked_ids(first + out)
    home.signal(signal.SIGCONT)
    rc, found, ferr, _ = home.run("cypher", "MATCH (a:Acked) RETURN a.i AS i", "--json")
    if rc != 0:
        return judge(rc, found, ferr), ferr.strip()[:160]
    stored = {r["i"] for r in json.loads(found)}
    if "Traceback" in err:
        return "traceback", err.strip().splitlines()[-1][:160]
    if acked - stored:
        return "lost", f"{len(acked - stored)} acknowledged writes missing"
    if len(stored - acked) > 1:  # (one write may be in flight when the writer dies: applied, not acknowledged)
        return "silent wrong", f"{len(stored - acked)} unacknowledged writes present"
    note = err.strip().splitlines()[-1][:160] if err.strip() else "ran to the end"
    return "ok", f"{len(acked)} acknowledged, all there; writer: {note}"


def cases(root: Path, rng: random.Random, rounds: int, disk: bool) -> list[tuple[str, str, str]]:
    results: list[tuple[str, str, str]] = []

    def record(name: str, outcome: str, note: str) -> None:
        results.append((name, outcome, note))
        print(f"{outcome:15} {name}: {note}", flush=True)

    home = Home(root, "main")
    home.run("cypher", "UNWIND range(1, 5000) AS i CREATE (:Base {i: i})")
    for _ in range(rounds):
        # ---- kill -9 at random moments
        delay = rng.uniform(0.5, 3.0)
        record(f"kill -9 during acknowledged writes ({delay:.1f} s)",
               *writer_case(home, lambda h: h.signal(signal.SIGKILL), settle=delay))
        delay = rng.uniform(0.3, 2.0)
        p = home.start("cypher", "UNWIND range(1, 200000) AS i CREATE (:Big {i: i})")
        time.sleep(delay)
        home.signal(signal.SIGKILL)
        out, err = p.communicate(timeout=HANG_S)
        n = home.count("Big")
        outcome = judge(p.returncode, out, err)
        if outcome == "ok" and n != 200000:
            outcome = "lost"
        if p.returncode == 2 and n not in (0, 200000, None):
            outcome = "silent wrong"  # half a statement
        record(f"kill -9 {delay:.1f} s into a 200,000-node CREATE", outcome, f"exit {p.returncode}, {n} nodes after; "
               + (err.strip().splitlines() or [""])[-1][:120])
        home.run("cypher", "MATCH (b:Big) DETACH DELETE b")
        # ---- SIGSTOP at random moments
        delay = rng.uniform(0.2, 2.0)
        record(f"SIGSTOP {delay:.1f} s into acknowledged writes, never continued",
               *writer_case(home, lambda h: h.signal(signal.SIGSTOP), settle=delay))
        home.signal(signal.SIGSTOP)
        rc, out, err, s = home.run("store", "status")
        record("store status of a stopped server", "ok" if rc == 0 and out.startswith("suspended") else judge(rc, out, err),
               f"{s:.1f} s: {out.strip()[:120]}")
        rc, out, err, s = home.run("store", "stop")
        record("store stop of a stopped server", judge(rc, out, err) if s < 30 else "hang", f"{s:.1f} s: {(out + err).strip()[:120]}")
        home.signal(signal.SIGCONT)
        pause = rng.uniform(1, 8)
        def stop_then_continue(h: Home, pause: float = pause) -> None:
            h.signal(signal.SIGSTOP)
            threading.Timer(pause, lambda: h.signal(signal.SIGCONT)).start()
        record(f"SIGSTOP for {pause:.1f} s during acknowledged writes, then continued",
               *writer_case(home, stop_then_continue, settle=rng.uniform(0.2, 1.5)))
        # ---- memory and time bombs
        for statement in (
            f"UNWIND range(1, {rng.randrange(10**9, 10**12)}) AS x RETURN count(x)",
            "WITH toInteger('10000000000') AS n UNWIND range(1, n) AS x RETURN count(x)",
            "RETURN size(range(-9223372036854775808, 9223372036854775807))",
            f"RETURN size(reduce(l = [1], i IN range(1, {rng.randrange(30, 45)}) | l + l)) AS n",
            "RETURN size([x IN range(1, 20000) | range(1, 20000)]) AS n",
            "UNWIND range(1, 3000) AS a UNWIND range(1, 3000) AS b WITH collect(a * b) AS c RETURN size(c)",
            f"RETURN size(reduce(s = 'ab', i IN range(1, {rng.randrange(28, 40)}) | s + s + s)) AS n",
            "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b RETURN count(*)",
        ):
            before = home.pid()
            rc, out, err, s = home.run("cypher", statement, "--timeout", "5")
            outcome = judge(rc, out, err)
            kept = home.count("Base")
            if kept != 5000:
                outcome = "lost"
            after = "same server" if home.pid() == before else "server restarted"
            record(f"statement: {statement[:70]}", outcome,
                   f"exit {rc}, {s:.1f} s, {after}, Base {kept}; " + (err.strip().splitlines() or [""])[-1][:110])
    home.stop()
    if disk:
        results += disk_cases(root, rng, record)
    return results


def disk_cases(root: Path, rng: random.Random, record) -> list:
    mnt = root / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], capture_output=True).returncode:
        record("full disk", "skipped", "cannot mount a tmpfs")
        return []
    try:
        home = Home(mnt, "home")
        home.run("cypher", "UNWIND range(1, 100) AS i CREATE (:Base {i: i})")

        def fill(h: Home) -> None:
            with open(mnt / "filler", "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * (1 << 20))
                        f.flush()
                except OSError:
                    pass

        record("disk fills during acknowledged writes (3 KB each)", *writer_case(home, fill, pad=3000))
        (mnt / "filler").unlink(missing_ok=True)
        fill(home)
        kg = root / "kg.tsv"
        kg.write_text("head\trelation\ttail\tconfidence\n" + "".join(
            f"e{rng.randrange(300)}\tr{rng.randrange(4)}\te{rng.randrange(300)}\t{rng.random():.3f}\n" for _ in range(3000)))
        for args in (("ingest", "full", "--from", str(kg)), ("cypher", "CREATE (:X {v: $v})", "--param", "v=1"),
                     ("store", "status"), ("cypher", "MATCH (b:Base) RETURN count(b) AS n")):
            rc, out, err, s = home.run(*args)
            record(f"full disk: {' '.join(args[:2])}", judge(rc, out, err), f"exit {rc}, {s:.1f} s: {(err or out).strip()[:140]}")
        home.signal(signal.SIGKILL)
        (mnt / "filler").unlink(missing_ok=True)
        n = home.count("Base")
        record("after the full disk, kill -9 and space freed", "ok" if n == 100 else "lost", f"Base {n} of 100")
        home.stop()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        for args in (("cypher", "MATCH (b:Base) RETURN count(b) AS n"), ("store", "start"), ("store", "stop")):
            rc, out, err, s = home.run(*args)
            record(f"read-only home: {' '.join(args[:2])}", judge(rc, out, err), f"exit {rc}: {(err or out).strip()[:140]}")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    root = Path(args.work or tempfile.mkdtemp(prefix="probe_store_"))
    disk = os.geteuid() == 0 and shutil.which("mount") is not None
    results = cases(root, random.Random(args.seed), args.rounds, disk)
    tally = Counter(outcome for _, outcome, _ in results)
    print("\n| outcome | cases |\n|---|---|")
    for outcome in ("ok", "one clear line", "traceback", "silent wrong", "lost", "hang", "unclear", "skipped"):
        print(f"| {outcome} | {tally.get(outcome, 0)} |")
    print(f"| total | {len(results)} |")


if __name__ == "__main__":
    main()
