"""An OpenAI-compatible chat-completions client (llama.cpp server, vLLM, Ollama, hosted APIs) on the
standard library, and the run that asks a model every item: concurrent, retrying transient failures,
resumable from its responses file.

The API key comes only from an environment variable (``--api-key-env``, default ``OPENAI_API_KEY``), never
from the command line or a file; without it no Authorization header is sent (local servers need none).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import random
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core import jsontext
from pipeline.core.errors import PipelineError
from pipeline.llm.prompt import LETTERS

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_TIMEOUT_S = 3600.0  # an hour per request: beyond it a stuck endpoint, not a slow one
MAX_RETRIES = 100
SYSTEM = "You answer multiple-choice questions about soft queries with a single letter."


class LLMError(PipelineError):
    """The endpoint refused the run (bad URL, key, model): retrying cannot help, so the run stops."""


class TransientError(Exception):
    """A failure worth retrying: HTTP 429/5xx, a timeout, a dropped connection, a malformed reply."""


@dataclass(frozen=True)
class ChatClient:
    """POST {endpoint}/chat/completions with one user message; returns the reply text.

    endpoint: a base URL such as ``http://127.0.0.1:8080/v1`` (or the full .../chat/completions URL).
    Retries ``retries`` times on transient failures with exponential backoff (``backoff`` s doubled each
    time, with jitter, at most 30 s; a Retry-After header of at most 60 s is honoured)."""

    endpoint: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    retries: int = 4
    backoff: float = 1.0
    temperature: float = 0.0
    max_tokens: int = 16

    def __post_init__(self) -> None:
        # checked where the client is made: a timeout of nan or a retry count of -1 never reaches a request
        from pipeline.core.checks import check_float, check_int, check_text
        from pipeline.core.errors import option

        check_text(self.endpoint, option("endpoint"))
        _check_url(self.endpoint)
        check_float(self.timeout, option("timeout"), 0.0, MAX_TIMEOUT_S, lo_open=True)
        check_int(self.retries, option("retries"), 0, MAX_RETRIES)
        check_float(self.backoff, "backoff", 0.0, 60.0)
        check_float(self.temperature, "temperature", 0.0, 2.0)
        check_int(self.max_tokens, "max_tokens", 1, 1_000_000)

    @property
    def url(self) -> str:
        base = self.endpoint.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    def _request(self, prompt: str) -> urllib.request.Request:
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")

    def _once(self, prompt: str) -> str:
        try:
            with urllib.request.urlopen(self._request(prompt), timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code in RETRY_STATUS or exc.code >= 500:
                delay = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                raise TransientError(f"HTTP {exc.code}", delay) from None
            detail = exc.read()[:200].decode("utf-8", "replace") if exc.fp else ""
            raise LLMError(f"{self.url}: HTTP {exc.code} {exc.reason} {detail}".strip()) from None
        except TimeoutError as exc:
            raise TransientError(f"timeout after {self.timeout:g} s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise TransientError(f"timeout after {self.timeout:g} s") from exc
            if isinstance(exc.reason, ConnectionRefusedError):
                raise LLMError(f"{self.url}: connection refused (is the server running?)") from None
            raise TransientError(f"connection error: {exc.reason}") from exc
        except (ConnectionError, OSError, http.client.HTTPException) as exc:
            raise TransientError(f"connection error: {exc!r}") from exc
        return reply_text(raw)

    def complete(self, prompt: str, sleep: Callable[[float], None] = time.sleep) -> str:
        """The reply text; TransientError after the last retry, LLMError at once on a permanent refusal."""
        for attempt in range(self.retries + 1):
            try:
                return self._once(prompt)
            except TransientError as exc:
                if attempt == self.retries:
                    raise
                hinted = exc.args[1] if len(exc.args) > 1 and exc.args[1] is not None else None
                wait_s = hinted if hinted is not None else min(30.0, self.backoff * 2**attempt)
                sleep(wait_s * (1 + 0.1 * random.random()))  # jitter spreads concurrent retries
        raise AssertionError("unreachable")


def _check_url(endpoint: str) -> None:
    """An endpoint a request can be sent to: http(s), a host, no whitespace or control character (urllib
    refuses those only when the first request is built, in a worker thread, where a typo reads as an item
    answered wrong)."""
    from urllib.parse import urlsplit

    from pipeline.core.errors import option, printable

    why = None
    if any(c.isspace() or not c.isprintable() for c in endpoint):
        why = "it holds whitespace or a control character"
    else:
        try:
            parts = urlsplit(endpoint)
            if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
                why = "not an http(s) URL with a host"
            parts.port  # noqa: B018 (a port out of range raises here)
        except ValueError as exc:
            why = str(exc)
    if why is not None:
        raise PipelineError(f"{option('endpoint', printable(endpoint, 80, keep=''))}: {why}; expected e.g. "
                            "http://127.0.0.1:8080/v1")


def _retry_after(value: str | None) -> float | None:
    try:
        return min(60.0, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to exponential backoff


def reply_text(raw: bytes) -> str:
    """choices[0].message.content of a chat-completions body; TransientError when malformed."""
    try:
        doc = jsontext.loads(raw)
        content = doc["choices"][0]["message"]["content"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError) as exc:
        raise TransientError(f"malformed reply: {raw[:80]!r}") from exc
    if not isinstance(content, str):
        raise TransientError(f"malformed reply: content is {type(content).__name__}")
    return content


# ------------------------------------------------------------------------------------------ letter parsing

def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern written with ``[A-D]`` (``[A-Da-d]``) for "a choice letter": the prompt's letters."""
    return re.compile(pattern.replace("[A-Da-d]", f"[{LETTERS}{LETTERS.lower()}]").replace("[A-D]", f"[{LETTERS}]"), flags)


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_MARKUP = _rx(r"[*_`#]+|\\(?:boxed|text|textbf|mathrm)\{\s*([A-Da-d])\s*\}")
_L = r"[\(\[]?\s*([A-D])\s*[\)\]]?(?![A-Za-z0-9'’])"  # one letter, maybe in brackets
_LOWER_OK = r"[\(\[]?\s*([A-Da-d])\s*[\)\]]?(?![A-Za-z0-9'’])"
# Cues a person reads as "this is my choice", each followed by the letter. "answer", "choice" and "option"
# take a lower-case letter too ("answer: d"); the others only a capital (a bare "a" is the article).
_CUES = [
    _rx(r"\b(?:answer|choice|option)\b(?:\s+(?:is|would be|will be|should be))?\s*[:\-=]?\s*" + _LOWER_OK, re.I),
    # "the best candidate is (B)", "the highest score is C", "correct one: D"
    _rx(r"\b(?i:best|highest|top|correct|right|final|winner|winning)\b[^.\n:]{0,40}?(?:\bis\b|:|=)\s*"
        r"(?i:candidate\s+|option\s+|letter\s+)?" + _L),
    # "I pick B", "I'd choose candidate (C)", "go with D"
    _rx(r"\b(?i:pick|choose|select|go with|goes to)\s+(?i:candidate\s+|option\s+|letter\s+)?" + _L),
    # "Candidate B has the highest score", "(C) is the best"
    _rx(r"(?i:\bcandidate\s+)?" + _L + r"\s+(?i:has|gets|scores|wins|is the best|is best|is correct|"
        r"is the (?:answer|winner|highest))"),
    # "..., so B." / "Therefore, (C)."
    _rx(r"\b(?i:so|thus|therefore|hence)\b,?\s+(?i:it is\s+|it's\s+)?" + _L + r"\s*[.!]?\s*$"),
]
# a cue's letter followed by another: "B or C", "(B) and (C)", "B/C"
_AND_ANOTHER = _rx(r"^\s*(?i:,|or|and|/|&|vs\.?)\s*(?i:candidate\s+|option\s+)?[\(\[]?\s*[A-Da-d]\b")
_WORD_NEXT = re.compile(r"\s+[a-z]")  # what follows the article: "a wolf", "A wolf"
_ALONE = _rx(r"^\W*([A-Da-d])\W*$")
# a leading "B.", "B)", "B:", "(B)", "B -", "B is", or B alone on the first line
_LEAD = _rx(r"^[\s\(\[]*([A-D])(?:\s*[\)\]\.:,]|\s*$|\s*\n|\s+[-–—]|\s+is\b)")
_MARKED = _rx(r"\(([A-D])\)|\[([A-D])\]|(?<![A-Za-z0-9(\[])([A-D])\)|(?:^|\n)\s*([A-D])\s*[.:]")
_TOKEN = _rx(r"(?<![A-Za-z0-9'’])([A-D])(?![A-Za-z0-9'’])")


def parse_letter(reply: str) -> str | None:
    """The chosen letter of a reply, read as a person reads it; None when it names no clear single letter.

    In order: a reply that is just a letter ('B', '(B).', 'B)'); the last explicit cue ('Answer: B', 'The
    answer is C', 'the best candidate is (B)', 'I pick D', 'Candidate C has the highest score', '..., so
    B.'; the last wins, as models restate), unless it names two letters ('the answer is B or C'); a leading
    'C.' / 'C)' / 'C:' / '(C)' when no other letter is marked so; else the one letter the reply names (its
    only bracketed or capital letter, '**D**', 'I would say (C)'). A reply naming two letters without a cue
    ('Both B and C look good') gives None, and so does free text whose only 'A' is the English article ('A
    wolf is the best choice'). Reasoning blocks <think>...</think> and markdown emphasis are ignored."""
    text = _THINK.sub(" ", reply or "")
    text = _MARKUP.sub(lambda m: f"({m.group(1).upper()})" if m.group(1) else "", text).strip()
    if not text:
        return None
    m = _ALONE.match(text)
    if m:
        return m.group(1).upper()
    cues = sorted((m.start(1), m.group(1).upper(), m.end()) for cue in _CUES for m in cue.finditer(text)
                  if not (m.group(1).islower() and _WORD_NEXT.match(text, m.end())))  # "the choice is a wolf"
    if cues:
        _, letter, end = cues[-1]
        return None if _AND_ANOTHER.match(text[end:]) else letter
    marked = {next(g for g in m.groups() if g) for m in _MARKED.finditer(text)}
    m = _LEAD.match(text)
    if m and marked <= {m.group(1)}:
        return m.group(1)
    named = {m.group(1) for m in _TOKEN.finditer(text) if not _article(text, m)} | marked
    return named.pop() if len(named) == 1 else None


def _article(text: str, m: re.Match[str]) -> bool:
    """A capital A used as the English article ('A wolf', 'a' at a sentence start), not as a letter."""
    return m.group(1) == "A" and _WORD_NEXT.match(text, m.end()) is not None


# ------------------------------------------------------------------------------------------- a whole run


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def load_responses(path: Path, model: str) -> dict[str, dict[str, Any]]:
    """Finished responses of an earlier run of the same model (status ok), by item id. A last line cut by
    a crash and records of other models or of failed requests are ignored (those items are asked again)."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    # a damaged line (undecodable, not JSON) is no answer: its item is asked again
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = jsontext.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("model") == model and rec.get("status") == "ok":
            done[str(rec["id"])] = rec
    return done


def ask_all(
    items: list[dict[str, Any]],
    client: ChatClient,
    responses: str | Path,
    concurrency: int = 4,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Ask the model every item not answered yet in ``responses`` (JSONL, appended as answers arrive, so a
    killed run resumes); returns one record per item, in item order:
    {id, model, prompt_hash, status ok|error, reply, letter (None = no clear letter), error}."""
    from pipeline.core import limits
    from pipeline.core.progress import output

    concurrency = limits.check_count("concurrency", concurrency, "io")  # each request in flight is a thread
    path = Path(responses)
    path.parent.mkdir(parents=True, exist_ok=True)
    hashes = {it["id"]: prompt_hash(it["prompt"]) for it in items}
    # an answer counts only for the same prompt: a rebuilt item is asked again
    done = {
        k: v for k, v in load_responses(path, client.model).items() if hashes.get(k) == v.get("prompt_hash")
    }
    todo = [it for it in items if it["id"] not in done]
    results: dict[str, dict[str, Any]] = dict(done)

    def one(it: dict[str, Any]) -> dict[str, Any]:
        rec = {"id": it["id"], "model": client.model, "prompt_hash": prompt_hash(it["prompt"])}
        try:
            reply = client.complete(it["prompt"])
        except TransientError as exc:
            return rec | {"status": "error", "reply": None, "letter": None, "error": str(exc.args[0])}
        return rec | {"status": "ok", "reply": reply, "letter": parse_letter(reply), "error": None}

    if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("\n")  # a crash cut the last line: start ours on a fresh one
    bar = output(progress).bar(total=len(items), initial=len(done), desc=f"ask {client.model}", unit="item")
    with bar, open(path, "a", encoding="utf-8") as out, ThreadPoolExecutor(max_workers=concurrency) as pool:
        pending = set()
        queue: Iterable[dict[str, Any]] = iter(todo)
        try:
            for it in queue:  # keep at most 2 x concurrency requests in flight
                pending.add(pool.submit(one, it))
                if len(pending) >= 2 * concurrency:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    _record(finished, results, out, bar)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                _record(finished, results, out, bar)
        except BaseException:
            for f in pending:
                f.cancel()
            raise
    return [results[it["id"]] for it in items]


def _record(finished, results, out, bar) -> None:
    for f in finished:
        rec = f.result()  # an LLMError propagates: the run stops with one clear line
        results[rec["id"]] = rec
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        out.flush()  # one whole line per answer, so a kill loses at most the line being written
        bar.update(1)
