"""A hostile user's cases against the machine's resources and the places a command writes, generated from
the categories of the issue that found them (``train-qe --threads 100000`` started 32,212 threads; a
``PIPELINE_DATA`` naming a missing folder fell back to a download; ``--update-docs`` and
``PIPELINE_PAIR_CACHE`` made folders anywhere, ``/`` included):

- every count of threads, workers, processes and requests in flight (``--threads``, ``--workers`` of the
  answering and export stages and of every executor, ``--concurrency``, ``OMP_NUM_THREADS`` and its kin,
  ``PIPELINE_STORE_MEMORY``) given a huge, a negative and a zero value, and the bound itself as a control;
- environment variables naming a missing folder, a file, or a folder without what they should hold;
- targets at ``/``, under missing folders or under a file.

Each case runs through the real command line (a fresh ``pipeline`` process) and through the Python API (a
fresh interpreter running every API case in turn), and must end in one clear line: exit code 2 and one
``error:`` line naming the input (one ``PipelineError`` of one line in Python), never a traceback, never a
hang. A hang is a process still running after :data:`TIMEOUT_S` (killed; no time is asserted). Nothing
here starts more than a few threads: every refusal comes before any is started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipeline.core import limits

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300  # a hang, not a time limit: these cases end in seconds
HUGE = 100_000
BOUND = limits.compute_bound()


@dataclass(frozen=True)
class Case:
    """One hostile input. cli: the command line after ``pipeline`` (None: no such door); api: a Python
    statement run with ``pl`` imported and ``W`` (the work folder's path, a str) in scope (None: no such
    door); env: variables set for it ({name: None} removes one); needles: what the line must say, for the
    command line and for Python (``{W}`` is the work folder); unwanted: what it must not say (the control
    cases: a value at its bound is not the reason of the refusal)."""

    name: str
    cli: tuple[str, ...] | None
    api: str | None
    needles_cli: tuple[str, ...]
    needles_api: tuple[str, ...]
    env: dict[str, str | None] = field(default_factory=dict)
    unwanted: tuple[str, ...] = ()


def _counts() -> list[Case]:
    """Every count option, each value refused (and the bound, a control that passes that check)."""
    cases = []
    for v in (HUGE, 10**18, -1, 0):
        why = ("at most",) if v > 0 else ("must be at least 1",)
        cases += [
            Case(f"train-qe --threads {v}",
                 ("train-qe", "ppi5k", "--model", "logice_ne", "--train-queries", "{W}/q.parquet", "--valid-queries",
                  "{W}/q.parquet", "--threads", str(v), "--out", "{W}/qe"), None, (f"--threads {v}", *why), ()),
            Case(f"answer --workers {v}",
                 ("answer", "{W}/q.parquet", "--adjacency", "{W}/adj", "--workers", str(v), "--out", "{W}/ans"),
                 f"pl.answer(W + '/q.parquet', adjacency=W + '/adj', workers={v}, out=W + '/ans')",
                 (f"--workers {v}", *why), (f"workers={v}", *why)),
            Case(f"export --executor processes --workers {v}",
                 ("export", "{W}/run", "--executor", "processes", "--workers", str(v)),
                 f"pl.export(W + '/run', executor='processes', workers={v})",
                 (f"--workers {v}", *why), (f"workers={v}", *why)),
            Case(f"llm-eval --concurrency {v}",
                 ("llm-eval", "{W}/items.jsonl", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                  "--concurrency", str(v)),
                 "from pipeline.stages.llm import evaluate_items_file\n"
                 f"evaluate_items_file(W + '/items.jsonl', 'http://127.0.0.1:9/v1', 'm', concurrency={v})",
                 (f"--concurrency {v}", *why), (f"concurrency={v}", *why)),
        ]
        for executor in ("processes", "local", "ray"):
            cases.append(Case(f"make_executor({executor!r}, workers={v})", None,
                              f"from pipeline.executors import make_executor\nmake_executor({executor!r}, workers={v})",
                              (), (f"workers={v}", *why)))
    for name in limits.THREAD_VARIABLES:
        for v in (HUGE, 0, -4):
            why = ("at most",) if v > 0 else ("must be at least 1",)
            cases.append(Case(f"{name}={v}", ("ls", "datasets"), "pl.evaluate(W + '/none.parquet')",
                              (f"{name}={v}", *why), (f"{name}={v}", *why), env={name: str(v)}))
    cases.append(Case("OMP_NUM_THREADS=2,100000 (a nested level)", ("ls", "datasets"), "pl.evaluate(W + '/none.parquet')",
                      ("OMP_NUM_THREADS=2,100000", "at most"), ("OMP_NUM_THREADS=2,100000", "at most"),
                      env={"OMP_NUM_THREADS": "2,100000"}))
    for v in ("100000", "-1", "0"):
        cases.append(Case(f"PIPELINE_STORE_MEMORY={v}", ("store", "start"), "pl.cypher('UNWIND range(1, 3) AS x RETURN x')",
                          ("PIPELINE_STORE_MEMORY", v), ("PIPELINE_STORE_MEMORY", v), env={"PIPELINE_STORE_MEMORY": v}))
    # controls: the bound itself passes the count's check (the line is about the missing file instead)
    cases += [
        Case(f"answer --workers {BOUND} (the bound)",
             ("answer", "{W}/q.parquet", "--adjacency", "{W}/adj", "--workers", str(BOUND), "--out", "{W}/ans"),
             f"pl.answer(W + '/q.parquet', adjacency=W + '/adj', workers={BOUND}, out=W + '/ans')",
             ("q.parquet",), ("q.parquet",), unwanted=("at most",)),
        Case(f"OMP_NUM_THREADS={BOUND} (the bound)", ("evaluate", "{W}/none.parquet"), "pl.evaluate(W + '/none.parquet')",
             ("none.parquet",), ("none.parquet",), env={"OMP_NUM_THREADS": str(BOUND)}, unwanted=("at most",)),
    ]
    return cases


def _environment() -> list[Case]:
    """Environment variables naming a missing folder, a file, or a folder without what they should hold."""
    cases = []
    ingest_cli = ("ingest", "ppi5k", "--store", "bolt://127.0.0.1:1")
    ingest_api = "pl.ingest('ppi5k', store='bolt://127.0.0.1:1')"
    for value, said in (("{W}/missing", "no such folder"), ("{W}/file.txt", "is a file, not a folder"),
                        ("{W}/dangling", "a symbolic link to nothing"), ("{W}/empty", "has no folder ppi5k/"),
                        ("{W}/wrong-case", "did you mean PPI5K/?")):
        cases.append(Case(f"PIPELINE_DATA={value}", ingest_cli, ingest_api, (f"PIPELINE_DATA={value}", said),
                          (f"PIPELINE_DATA={value}", said), env={"PIPELINE_DATA": value}))
    for name in ("PIPELINE_PAIR_CACHE", "PIPELINE_PARSED_CACHE"):
        for value, said in (("/", "not the filesystem root"), ("{W}/missing/deeper/cache", "does not exist"),
                            ("{W}/file.txt", "is not a folder"), ("{W}/file.txt/cache", "is not a folder")):
            cases.append(Case(f"{name}={value}", ("ls", "datasets"), "pl.evaluate(W + '/none.parquet')",
                              (name, said), (name, said), env={name: value}))
    for value, said in (("/", "not the filesystem root"), ("{W}/file.txt", "is not a folder"),
                        ("{W}/file.txt/home", "is not a folder")):
        cases.append(Case(f"PIPELINE_HOME={value}", ("store", "status"), "pl.evaluate(W + '/none.parquet')",
                          ("PIPELINE_HOME", said), ("PIPELINE_HOME", said), env={"PIPELINE_HOME": value}))
    return cases


def _py(value: str) -> str:
    """A path of a case as Python text: ``{W}/x`` -> ``W + '/x'``."""
    return f"W + {value[3:]!r}" if value.startswith("{W}") else repr(value)


def _targets() -> list[Case]:
    """Targets at the filesystem root, under missing folders, under a file."""
    accepted = "give an existing folder, or the docs/ folder of a project checkout"
    cases = []
    for value, said in (("/", "the filesystem root"), ("{W}/missing/deeper/docs", "no such folder"),
                        ("{W}/plain/docs", "its parent is no project checkout"), ("{W}/file.txt", "an existing file"),
                        ("{W}/file.txt/docs", "no such folder")):
        cases.append(Case(f"evaluate --update-docs {value}", ("evaluate", "{W}/none.parquet", "--update-docs", value),
                          None, (f"--update-docs {value}", said, accepted), ()))
        cases.append(Case(f"reproduce --docs {value}", ("reproduce", "ppi5k", "--docs", value, "--out", "{W}/rep"),
                          f"pl.run('ppi5k', docs={_py(value)}, out=W + '/rep')", (f"--docs {value}", said, accepted),
                          (f"docs='{value}'", said, accepted)))
    cases.append(Case("sample --out /", ("sample", "ppi5k", "--out", "/", "--per-type", "1"),
                      "pl.sample('ppi5k', out='/', per_type=1)", ("--out /", "the filesystem root"),
                      ("out='/'", "the filesystem root")))
    return cases


CASES = _counts() + _environment() + _targets()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the cases name: a file, an empty folder, a mirror with a folder of another case, a
    dangling link, a plain folder (no checkout); PIPELINE_HOME is work/home."""
    w = tmp_path_factory.mktemp("hostile")
    (w / "file.txt").write_text("not a folder\n")
    (w / "empty").mkdir()
    (w / "wrong-case" / "PPI5K").mkdir(parents=True)
    (w / "dangling").symlink_to(w / "gone")
    (w / "plain").mkdir()
    (w / "home").mkdir()
    return w


def _env(work: Path, case: Case) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in limits.THREAD_VARIABLES}
    env.update({"PYTHONPATH": str(REPO), "PIPELINE_HOME": str(work / "home"), "PIPELINE_STORE_MEMORY": "1"})
    for name, value in case.env.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value.replace("{W}", str(work))
    return env


def _fill(texts: tuple[str, ...], work: Path) -> list[str]:
    return [t.replace("{W}", str(work)) for t in texts]


def _judge(line: str, case: Case, needles: tuple[str, ...], work: Path) -> None:
    assert "\n" not in line.strip(), f"{case.name}: more than one line: {line!r}"
    for needle in _fill(needles, work):
        assert needle in line, f"{case.name}: {needle!r} not in {line!r}"
    for unwanted in case.unwanted:
        assert unwanted not in line, f"{case.name}: {unwanted!r} in {line!r}"


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.cli is not None], ids=lambda c: c.name)
def test_the_command_line_says_one_line(case: Case, work: Path) -> None:
    try:
        res = subprocess.run([sys.executable, "-m", "pipeline.cli", *_fill(case.cli, work)], capture_output=True,
                             text=True, timeout=TIMEOUT_S, env=_env(work, case), cwd=work)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: still running after {TIMEOUT_S} s (a hang)")
    assert "Traceback" not in res.stdout + res.stderr, f"{case.name}: a traceback\n{res.stderr}"
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (
        f"{case.name}: exit {res.returncode}, stderr {res.stderr!r}")
    _judge(lines[0], case, case.needles_cli, work)


API_CASES = [c for c in CASES if c.api is not None]

# One interpreter runs every API case in turn; SIGALRM marks a case that does not end as a hang (and the
# subprocess's own timeout the whole run). Each case's environment is set around it.
_RUNNER = textwrap.dedent("""
    import json, os, signal, sys
    import pipeline as pl
    W = sys.argv[1]
    cases = json.loads(sys.stdin.read())

    class Hang(BaseException):
        pass

    def hang(*_):
        raise Hang()

    signal.signal(signal.SIGALRM, hang)
    out = {}
    for case in cases:
        saved = dict(os.environ)
        for name, value in case["env"].items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value.replace("{W}", W)
        signal.alarm(case["timeout"])
        try:
            exec(case["code"], {"pl": pl, "W": W})
            out[case["name"]] = ["ok", ""]
        except pl.PipelineError as exc:
            out[case["name"]] = ["refused", str(exc)]
        except Hang:
            out[case["name"]] = ["hang", ""]
        except BaseException as exc:
            out[case["name"]] = ["traceback", f"{type(exc).__name__}: {exc}"]
        finally:
            signal.alarm(0)
            os.environ.clear()
            os.environ.update(saved)
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def api_outcomes(work: Path) -> dict[str, list[str]]:
    payload = json.dumps([{"name": c.name, "code": c.api, "env": c.env, "timeout": TIMEOUT_S} for c in API_CASES])
    env = _env(work, Case("base", None, None, (), ()))
    res = subprocess.run([sys.executable, "-c", _RUNNER, str(work)], input=payload, capture_output=True, text=True,
                         timeout=TIMEOUT_S * 3, env=env, cwd=work)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", API_CASES, ids=lambda c: c.name)
def test_the_python_api_raises_one_line(case: Case, work: Path, api_outcomes: dict[str, list[str]]) -> None:
    outcome, line = api_outcomes[case.name]
    assert outcome == "refused", f"{case.name}: {outcome} {line}"
    _judge(line, case, case.needles_api, work)


def test_the_suite_covers_every_count_and_both_doors() -> None:
    """The generated cases hold every count option with a huge, a negative and a zero value, every thread
    variable of the libraries underneath, and each category through both doors."""
    names = " ".join(c.name for c in CASES)
    for option in ("--threads", "answer --workers", "export --executor processes --workers", "--concurrency",
                   "make_executor('processes'", "make_executor('ray'", *limits.THREAD_VARIABLES, "PIPELINE_STORE_MEMORY"):
        for v in (str(HUGE), "0"):
            assert f"{option} {v}" in names or f"{option}={v}" in names or f"{option}, workers={v}" in names, (option, v)
    for var in ("PIPELINE_DATA", "PIPELINE_PAIR_CACHE", "PIPELINE_PARSED_CACHE", "PIPELINE_HOME"):
        doors = [c for c in CASES if c.name.startswith(var)]
        assert doors and all(c.cli and c.api for c in doors), var
