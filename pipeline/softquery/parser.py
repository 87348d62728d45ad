"""The query text grammar (design section 5) -> :class:`Query` in DNF.

    query  := disj EOF
    disj   := conj ('|' conj)*                      lowest precedence
    conj   := unary ('&' unary)*
    unary  := '!' unary | '(' disj ')' | atom       '!' applies to a single atom
    atom   := name '(' term ',' term [',' number [',' number]] ')'
    term   := '?'var | name
    name   := bare | "quoted" | '#'id              bare: [A-Za-z0-9_.:-]+, quoted: \\" and \\\\ escapes

Every error is a QuerySyntaxError (or ResolutionError for names) pointing at the 1-based column.

Limits, so that every number is exact in the engine's float32 and no text exhausts the interpreter:
alpha in [0, 1]; beta finite in [0, MAX_BETA] (1e6: a sum of a thousand such atoms stays 30 orders of
magnitude below float32's overflow at 3.4e38, where 1e39 used to become inf and lose every answer);
at most MAX_DEPTH (100) nested parentheses and '!' (deeper texts used to end in a RecursionError).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.core.errors import QuerySyntaxError, ResolutionError
from pipeline.softquery.model import FREE, MAX_BETA, Atom, Const, Query, Term, Var
from pipeline.softquery.vocab import Vocabulary

BARE = re.compile(r"[A-Za-z0-9_.:-]+")
_VAR = re.compile(r"\?([A-Za-z_][A-Za-z0-9_]*)")
_ID = re.compile(r"#([0-9]+)")
_SPACE = re.compile(r"\s+")
MAX_CONJUNCTIONS = 4096  # distributing '&' over '|' can explode; refuse rather than hang
MAX_DEPTH = 100  # nested '(' and '!': each level is a few Python frames, the interpreter allows ~1000


@dataclass(frozen=True)
class Token:
    kind: str  # ( ) , & | ! word string var id end
    text: str  # the value (unescaped for strings)
    column: int  # 1-based


def tokenize(text: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        m = _SPACE.match(text, i)
        if m:
            i = m.end()
            continue
        ch = text[i]
        if ch in "(),&|!":
            out.append(Token(ch, ch, i + 1))
            i += 1
        elif ch == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    if j + 1 >= n or text[j + 1] not in '"\\':
                        raise QuerySyntaxError(text, j + 1, 'in a quoted name only \\" and \\\\ are escapes')
                    j += 1
                buf.append(text[j])
                j += 1
            if j >= n:
                raise QuerySyntaxError(text, i + 1, "unterminated quoted name")
            out.append(Token("string", "".join(buf), i + 1))
            i = j + 1
        elif ch == "?":
            m = _VAR.match(text, i)
            if not m:
                raise QuerySyntaxError(text, i + 1, "a variable is '?' followed by a name like ?x")
            out.append(Token("var", m.group(1), i + 1))
            i = m.end()
        elif ch == "#":
            m = _ID.match(text, i)
            if not m:
                raise QuerySyntaxError(text, i + 1, "an id is '#' followed by digits like #123")
            out.append(Token("id", m.group(1), i + 1))
            i = m.end()
        else:
            m = BARE.match(text, i)
            if not m:
                raise QuerySyntaxError(text, i + 1, f"unexpected character {ch!r}")
            out.append(Token("word", m.group(0), i + 1))
            i = m.end()
    out.append(Token("end", "", n + 1))
    return out


def _shown(t: Token) -> str:
    if t.kind == "end":
        return "the end of the query"
    return repr({"var": "?", "id": "#"}.get(t.kind, "") + t.text)


class _Parser:
    def __init__(self, text: str, vocab: Vocabulary | None) -> None:
        self.text, self.vocab = text, vocab
        self.tokens = tokenize(text)
        self.pos = 0
        self.depth = 0  # '(' and '!' currently open

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def fail(self, message: str, token: Token | None = None) -> QuerySyntaxError:
        return QuerySyntaxError(self.text, (token or self.tok).column, message)

    def expect(self, kind: str, what: str) -> Token:
        t = self.tok
        if t.kind != kind:
            raise self.fail(f"expected {what}, found {_shown(t)}")
        self.pos += 1
        return t

    def query(self) -> Query:
        if self.tok.kind == "end":
            raise self.fail("empty query")
        dnf = self.disj()
        if self.tok.kind != "end":
            raise self.fail(f"expected '&', '|' or the end of the query, found {_shown(self.tok)}")
        for atoms in dnf:
            # without ?y every entity would get the same utility: a query asks for answers
            if not any(FREE in (a.head, a.tail) for a in atoms):
                raise QuerySyntaxError(
                    self.text,
                    1,
                    "a query needs the answer variable ?y (in every conjunction of its DNF); every other "
                    "variable is existential, so without ?y all entities would get the same utility",
                )
        return Query.of(*dnf)

    def disj(self) -> list[list[Atom]]:
        out = self.conj()
        while self.tok.kind == "|":
            self.pos += 1
            out = out + self.conj()
        return out

    def conj(self) -> list[list[Atom]]:
        out = self.unary()
        while self.tok.kind == "&":
            start = self.tok
            self.pos += 1
            right = self.unary()
            if len(out) * len(right) > MAX_CONJUNCTIONS:
                raise self.fail(f"the DNF would have more than {MAX_CONJUNCTIONS} conjunctions", start)
            out = [a + b for a in out for b in right]
        return out

    def nest(self, t: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep (parentheses and '!'); write it flatter", t)

    def unary(self) -> list[list[Atom]]:
        t = self.tok
        if t.kind == "!":
            self.pos += 1
            self.nest(t)
            inner = self.unary()
            self.depth -= 1
            if len(inner) != 1 or len(inner[0]) != 1:
                raise self.fail("'!' applies to a single atom (soft negation of a formula is not defined)", t)
            a = inner[0][0]
            return [[Atom(a.head, a.relation, a.tail, a.alpha, a.beta, not a.negated)]]
        if t.kind == "(":
            self.pos += 1
            self.nest(t)
            inner = self.disj()
            self.expect(")", "')'")
            self.depth -= 1
            return inner
        return [[self.atom()]]

    def atom(self) -> Atom:
        t = self.tok
        if t.kind not in ("word", "string", "id"):
            raise self.fail(f"expected an atom like relation(?x, ?y), found {_shown(t)}")
        self.pos += 1
        rel = self.resolve(t, "relation")
        self.expect("(", "'(' after the relation")
        head = self.term()
        self.expect(",", "','")
        tail = self.term()
        alpha, beta = 0.0, 1.0
        if self.tok.kind == ",":
            self.pos += 1
            alpha = self.number("alpha", 0.0, 1.0)
            if self.tok.kind == ",":
                self.pos += 1
                beta = self.number("beta", 0.0, MAX_BETA)
        self.expect(")", "')' or ', number'")
        return Atom(head, rel, tail, alpha, beta)

    def term(self) -> Term:
        t = self.tok
        if t.kind == "var":
            self.pos += 1
            return Var(t.text)
        if t.kind in ("word", "string", "id"):
            self.pos += 1
            return Const(self.resolve(t, "entity"))
        raise self.fail(f"expected a variable ?x or an entity, found {_shown(t)}")

    def number(self, what: str, lo: float, hi: float) -> float:
        t = self.tok
        if t.kind != "word":
            raise self.fail(f"expected a number for {what}")
        try:
            x = float(t.text)
        except ValueError:
            raise self.fail(f"{what} must be a number, found {t.text!r}") from None
        if not (lo <= x <= hi):  # NaN fails this too
            raise self.fail(f"{what} {t.text} must be in [{lo:.15g}, {hi:.15g}]")
        self.pos += 1
        return x

    def resolve(self, t: Token, kind: str) -> int:
        names = (
            None
            if self.vocab is None
            else (self.vocab.entities if kind == "entity" else self.vocab.relations)
        )
        if t.kind == "id":
            if len(t.text) > 18:  # beyond any id (and Python's 4300-digit limit of int() with 5000)
                raise self.fail(f"{kind} id #{t.text[:20]}... is too long ({len(t.text)} digits)", t)
            i = int(t.text)
            if names is not None and i >= len(names):
                raise self.fail(f"{kind} id #{i} out of range 0..{len(names) - 1}", t)
            return i
        if self.vocab is None:
            raise ResolutionError(
                f"column {t.column}: {kind} name '{t.text}' needs a data set vocabulary; write it as #id"
            )
        try:
            if kind == "entity":
                return self.vocab.entity_id(t.text, t.column)
            return self.vocab.relation_id(t.text, t.column)
        except ResolutionError:
            hint = self._quote_hint(t, names or ())
            if hint is None:
                raise
            raise ResolutionError(f"column {t.column}: unknown {kind} '{t.text}'; {hint}") from None

    def _quote_hint(self, t: Token, names: tuple[str, ...]) -> str | None:
        """When a bare word is the start of a name with spaces (``Evelyn Jefferson`` unquoted): the quoted
        name to write, if the words that follow make a known name; else the known names it starts, quoted."""
        if t.kind != "word":
            return None
        known = set(names)
        words, end = [t.text], self.pos
        while end < len(self.tokens) and self.tokens[end].kind == "word":
            words.append(self.tokens[end].text)
            end += 1
            if " ".join(words) in known:
                return f"a name with spaces goes in double quotes: \"{' '.join(words)}\""
        starting = sorted(n for n in known if n.startswith(t.text + " "))
        if starting:
            shown = ", ".join(f'"{n}"' for n in starting[:5])
            more = f" (of {len(starting)})" if len(starting) > 5 else ""
            return f"a name with spaces goes in double quotes: {shown}{more}"
        return None


def parse(text: str, vocab: Vocabulary | None = None) -> Query:
    """Parse a soft query; names are resolved through vocab (without one, only `#id` forms work)."""
    return _Parser(text, vocab).query()
