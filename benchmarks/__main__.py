"""The runner.

    python -m benchmarks list [NAME]     every benchmark, its goals and what it needs; or one in full
    python -m benchmarks run NAME [NAME ...] [--quick] [--json FILE] [--label LABEL] [--OPTION VALUE ...]

``run`` calls each named benchmark with the options given (``--per-type 20`` sets ``per_type``; a flag sets a
boolean option, ``--no-FLAG`` clears it; lists are comma-separated), prints its record as Markdown and merges
it into ``--json`` (default ``docs/benchmarks.json``) under ``NAME`` or ``NAME.LABEL``, every other record
left as it was. ``--quick`` applies the benchmark's quick size (seconds, not minutes) and writes only where
``--json`` says, so a quick run never replaces a figure of the pages. Exit status 1 if a benchmark failed.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import time
import types
import typing
from pathlib import Path
from typing import Any

from benchmarks import harness, render

RUNNER = harness.RUNNER_FLAGS
LABEL = re.compile(r"^[a-z0-9][a-z0-9-]*$")
KINDS = {int: "an integer", float: "a number"}


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _convert(text: str | None, hint: Any, option: str) -> Any:
    """``text`` as the option's annotated type: int, float, str, Path, bool, tuple[X, ...] (comma-separated),
    X | None."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if text is None or text.lower() == "none":
            return None
        return _convert(text, args[0], option)
    if hint is bool:
        return text is None or text.lower() in ("1", "true", "yes")
    if text is None:
        raise ValueError(f"--{option} needs a value")
    if origin in (list, tuple):
        inner = typing.get_args(hint)[0]
        items = [_convert(x.strip(), inner, option) for x in text.split(",") if x.strip()]
        return tuple(items) if origin is tuple else items
    try:
        return hint(text)
    except ValueError:
        raise ValueError(f"--{option} {text!r}: not {KINDS.get(hint, hint)}") from None


def parse_run(
    argv: list[str], registry: dict[str, harness.Benchmark]
) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """(benchmark names, runner flags, the options as given: option name -> text or None for a bare flag)."""
    names = []
    i = 0
    while i < len(argv) and not argv[i].startswith("--"):
        names.append(argv[i])
        i += 1
    for name in names:
        if name not in registry:
            close = difflib.get_close_matches(name, list(registry), n=1)
            raise ValueError(
                f"no benchmark {name!r}"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + "; `python -m benchmarks list` names them"
            )
    # an option that is not a flag takes the next word as its value, even one starting with "--" (the
    # arguments a benchmark passes on to a command: --args "--epochs 100 --device cuda")
    flags = {"quick"} | {
        n.replace("_", "-") for b in names for n, h in registry[b].types().items() if h is bool
    }
    given: dict[str, str | None] = {}
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("--"):
            raise ValueError(f"{tok!r}: benchmark names come first, then --options")
        key, eq, value = tok[2:].partition("=")
        flag = key in flags or (key.startswith("no-") and key[3:] in flags)
        if not eq and not flag and i + 1 < len(argv):
            value, i = argv[i + 1], i + 1
        elif not eq:
            value = None
        given[key] = value
        i += 1
    runner = {"quick": "quick" in given, "json": given.pop("json", None), "label": given.pop("label", None)}
    given.pop("quick", None)
    if runner["label"] is not None and not LABEL.match(runner["label"]):
        raise ValueError(f"--label {runner['label']!r}: lower-case letters, digits and '-'")
    known = {p.replace("_", "-") for n in names for p in registry[n].options()}
    for key in given:
        plain = key[3:] if key.startswith("no-") else key
        if plain not in known:
            close = difflib.get_close_matches(plain, sorted(known | RUNNER), n=1)
            raise ValueError(
                f"--{key}: no benchmark named here takes it"
                + (f" (did you mean --{close[0]}?)" if close else "")
            )
    return names, runner, given


def options_for(
    bench: harness.Benchmark, given: dict[str, str | None], quick: bool
) -> tuple[dict[str, Any], list[str]]:
    """The options this benchmark takes from ``given`` (converted), its quick size under them; and the
    command-line words that give them (for the record's command)."""
    hints = bench.types()
    opts: dict[str, Any] = dict(bench.quick) if quick else {}
    words = []
    for key, text in given.items():
        negate = key.startswith("no-") and key[3:].replace("-", "_") in hints
        name = (key[3:] if negate else key).replace("-", "_")
        if name not in hints:
            continue
        opts[name] = False if negate else _convert(text, hints[name], key)
        words.append(f"--{key}" + ("" if text is None else f" {text}"))
    missing = [n for n, p in bench.options().items() if p.default is p.empty and n not in opts]
    if missing:
        raise ValueError(f"{bench.name} needs " + ", ".join(f"--{m.replace('_', '-')}" for m in missing))
    return opts, words


def run(argv: list[str]) -> int:
    registry = harness.discover()
    try:
        names, runner, given = parse_run(argv, registry)
    except ValueError as exc:
        return _usage(str(exc))
    if not names:
        return _usage("name a benchmark to run (`python -m benchmarks list` names them)")
    path = Path(runner["json"]) if runner["json"] else (None if runner["quick"] else harness.DEFAULT_JSON)
    failed = 0
    for name in names:
        bench = registry[name]
        try:
            opts, words = options_for(bench, given, runner["quick"])
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        key = name + (f".{runner['label']}" if runner["label"] else "")
        command = " ".join(
            [
                "python -m benchmarks run",
                name,
                *(["--quick"] if runner["quick"] else []),
                *([f"--label {runner['label']}"] if runner["label"] else []),
                *words,
            ]
        )
        harness.say(f"== {key}: {bench.title}")
        host, date, t0 = harness.machine(), harness.now(), time.perf_counter()
        try:
            result = bench.fn(**opts)
        except harness.BenchmarkError as exc:
            print(f"error: {name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        host["load"].append(round(os.getloadavg()[0], 2))
        rec = harness.make_record(
            bench,
            result,
            command=command,
            options=opts,
            quick=runner["quick"],
            host=host,
            date=date,
            seconds=time.perf_counter() - t0,
        )
        print(f"\n## {key}: {bench.title}\n\n{render.record(rec)}\n", flush=True)
        if path is not None:
            harness.merge(path, key, rec)
            harness.say(f"{key}: written to {path}")
        else:
            harness.say(f"{key}: not written (a quick run writes only where --json says)")
    return 1 if failed else 0


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("none" if a is type(None) else _type_name(a) for a in typing.get_args(hint))
    if origin in (list, tuple):
        return f"comma-separated {_type_name(typing.get_args(hint)[0])}s"
    return {Path: "path"}.get(hint, getattr(hint, "__name__", str(hint)))


def show(argv: list[str]) -> int:
    registry = harness.discover()
    if argv:
        bench = registry.get(argv[0])
        if bench is None:
            return _usage(f"no benchmark {argv[0]!r}")
        print(f"{bench.name}: {bench.title}\n\n{bench.doc}\n\nGoals:")
        for g in bench.goals:
            print(f"  {render.goal_text(g.as_dict(None))}")
        print("\nOptions (--name value):")
        hints = bench.types()
        for n, p in bench.options().items():
            default = "required" if p.default is p.empty else f"default {p.default!r}"
            quick = f", quick {bench.quick[n]!r}" if n in bench.quick else ""
            print(f"  --{n.replace('_', '-')} ({_type_name(hints[n])}; {default}{quick})")
        return 0
    for bench in registry.values():
        needs = [f"--{n.replace('_', '-')}" for n, p in bench.options().items() if p.default is p.empty]
        print(f"{bench.name:16s} {bench.title}" + (f"  [needs {' '.join(needs)}]" if needs else ""))
        for g in bench.goals:
            print(f"{'':16s}   goal: {render.goal_text(g.as_dict(None))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "list":
        return show(argv[1:])
    if argv[0] == "run":
        return run(argv[1:])
    return _usage(f"unknown command {argv[0]!r}: list or run")


if __name__ == "__main__":
    sys.exit(main())
