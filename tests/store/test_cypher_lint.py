"""Every Cypher statement the project can send to Neo4j is accepted by Neo4j 5's own Cypher front end.

The front end is the npm package ``@neo4j-cypher/language-support`` (``lintCypherQuery``: Neo4j's parser
and semantic analysis, as in Neo4j's own tools), pinned in ``tools/cypher-lint/package-lock.json`` and
run by ``tools/cypher-lint/lint.mjs``. The statements: each of ``cypher/*.cypher`` except the FalkorDB-only
``falkordb_*`` files, split at ``;``, with every ``{NAME}`` placeholder filled by a valid identifier the
way the code fills it (undefined ``$parameters`` are not errors). No Cypher text lives in ``pipeline/``
outside those files (checked below), so this is all of it; ``pipeline cypher`` sends the user's own text.

Without Node or the package the lint tests skip with the reason, unless PIPELINE_REQUIRE_CYPHER_LINT=1
(``.ci/run`` sets it once ``npm ci`` succeeded), where they fail instead.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.core.errors import PipelineError
from pipeline.store.base import quote_rel_type, relation_type
from pipeline.store.cypher import cypher_statements, fill, placeholders, split_statements

ROOT = Path(__file__).resolve().parents[2]
LINT = ROOT / "tools" / "cypher-lint"
PACKAGE = LINT / "node_modules" / "@neo4j-cypher" / "language-support"

# a valid identifier per placeholder, as the code fills it: relationship types quoted by quote_rel_type
# (a name that needs the quotes), property keys and labels plain
_REL = quote_rel_type(relation_type("part of"))
SAMPLES = {"REL": _REL, "R1": _REL, "R2": _REL, "R3": _REL, "R4": _REL,
           "CONF": "conf_train", "LABEL": "Entity", "PROP": "eid", "NAME": "name"}


def neo4j_statements() -> dict[str, str]:
    """{"file.cypher[#k]": statement with placeholders filled} for every statement Neo4j may receive."""
    out = {}
    for path in sorted((ROOT / "cypher").glob("*.cypher")):
        if path.stem.startswith("falkordb_"):
            continue
        statements = cypher_statements(path.stem)
        assert statements, f"{path.name} holds no statement"
        for k, text in enumerate(statements, start=1):
            unknown = placeholders(text) - set(SAMPLES)
            assert not unknown, f"{path.name}: no sample identifier for {sorted(unknown)} in this test's SAMPLES"
            key = path.name if len(statements) == 1 else f"{path.name}#{k}"
            out[key] = fill(text, {n: SAMPLES[n] for n in placeholders(text)})
    return out


def lint(statements: dict[str, str]) -> dict[str, dict]:
    """{name: {"errors": [...], "warnings": [...]}} from Neo4j's front end; skips (or fails where CI
    requires the lint) without Node or the package."""
    node = shutil.which("node")
    missing = "node is not on PATH" if node is None else None
    if missing is None and not PACKAGE.is_dir():
        missing = f"{PACKAGE.relative_to(ROOT)} is not installed (cd tools/cypher-lint && npm ci)"
    if missing:
        if os.environ.get("PIPELINE_REQUIRE_CYPHER_LINT") == "1":
            pytest.fail(f"the Neo4j Cypher lint must run here: {missing}")
        pytest.skip(f"Neo4j Cypher lint unavailable: {missing}")
    docs = [{"name": k, "text": v} for k, v in statements.items()]
    done = subprocess.run(
        [node, str(LINT / "lint.mjs")], input=json.dumps(docs), capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"lint.mjs failed: {done.stderr[-2000:]}"
    return {r["name"]: r for r in json.loads(done.stdout)}


def test_every_statement_is_accepted_by_neo4j_5():
    statements = neo4j_statements()
    assert len(statements) > 50  # all of cypher/, not a few
    results = lint(statements)
    assert set(results) == set(statements)
    bad = {
        name: [f"{e['line']}:{e['column']} {e['message']}" for e in r["errors"]]
        for name, r in results.items()
        if r["errors"]
    }
    assert bad == {}, "Neo4j 5 rejects:\n" + "\n".join(f"  {n}: {e}" for n, e in bad.items())


def test_the_lint_rejects_what_neo4j_rejects():
    """The lint can fail: on the old schema.cypher (statements without ';'), an unfilled placeholder and
    a syntax error; a plain statement passes."""
    results = lint({
        "no separators": "CREATE INDEX FOR (n:Entity) ON (n.eid)\nCREATE INDEX FOR (n:Entity) ON (n.dataset)",
        "unfilled": "MATCH (h)-[f:{REL}]->(t) RETURN count(f) AS n",
        "bad syntax": "MATCH (n RETURN n",
        "fine": "MATCH (n:Entity {dataset: $dataset}) RETURN count(n) AS n",
    })
    assert results["no separators"]["errors"] and results["unfilled"]["errors"] and results["bad syntax"]["errors"]
    assert results["fine"]["errors"] == []


def test_fill_formats_identifiers_only():
    text = "MATCH (h)-[f:{REL}]->(t) WHERE f.{CONF} IS NOT NULL RETURN count(f) AS n"
    assert fill(text, {"REL": _REL, "CONF": "conf_test"}) == (
        "MATCH (h)-[f:`part of`]->(t) WHERE f.conf_test IS NOT NULL RETURN count(f) AS n"
    )
    with pytest.raises(PipelineError, match=r"\{CONF\}: .* is not an identifier"):
        fill(text, {"REL": _REL, "CONF": "x} RETURN 1 //"})
    with pytest.raises(PipelineError, match=r"placeholder \{CONF\} has no value"):
        fill(text, {"REL": _REL})
    with pytest.raises(PipelineError, match=r"no \{R9\} placeholder"):
        fill(text, {"REL": _REL, "CONF": "c", "R9": "x"})


def test_statements_split_at_semicolons_outside_quotes():
    assert split_statements("RETURN 'a;b' AS x; RETURN `c;d`.e;\nRETURN 1") == [
        "RETURN 'a;b' AS x", " RETURN `c;d`.e", "\nRETURN 1"
    ]


# a string that starts like a Cypher statement (a clause keyword, then a pattern, a parameter or a name)
_STATEMENT = re.compile(
    r"\s*(OPTIONAL MATCH|MATCH|MERGE|CREATE|UNWIND|CALL|SHOW|WITH|RETURN|DETACH DELETE)\s+[(\[$`{A-Za-z]"
)


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of the string literals that are not docstrings; f-strings with {} for their fields."""
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }
    found, parts = [], set()
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
            found.append((n.lineno, text))
            parts |= {id(v) for v in n.values}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs | parts:
            found.append((n.lineno, n.value))
    return found


def test_no_cypher_text_outside_the_cypher_files():
    """Query text lives in cypher/ (so the lint above sees all of it); the code formats in identifiers only."""
    inline = [
        f"{p.relative_to(ROOT)}:{line}: {text.strip()[:60]!r}"
        for p in sorted([*(ROOT / "pipeline").rglob("*.py"), *(ROOT / "loaders").rglob("*.py")])
        for line, text in _strings(ast.parse(p.read_text()))
        # a regex over statements (a backslash) or a keyword prefix is not a statement
        if _STATEMENT.match(text) and "\\" not in text and len(text.strip()) > 12
    ]
    assert inline == [], "Cypher text outside cypher/*.cypher:\n" + "\n".join(inline)


def test_falkordb_only_statements_are_named_so():
    """The statements FalkorDB alone accepts (its procedures) are in falkordb_* files only."""
    falkor_only = re.compile(r"\bCALL\s+db\.(indexes|labels|relationshiptypes)\b|\bGRAPH\.", re.IGNORECASE)
    for path in sorted((ROOT / "cypher").glob("*.cypher")):
        if not path.stem.startswith("falkordb_"):
            for text in cypher_statements(path.stem):
                assert not falkor_only.search(text), f"{path.name} holds a FalkorDB-only statement: name it falkordb_*"
