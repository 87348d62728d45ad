"""The store backends, one registry keyed by URI scheme (``pipeline ls stores``), as every other pluggable
kind of the project: :func:`pipeline.store.open_store` looks the scheme of a URI up here and nowhere else.

A backend is a :class:`StoreBackend`: its name, the URI schemes it serves, the :class:`~pipeline.store.base.Store`
class it opens and an ``opener``. What differs between backends (batch sizes, the statement that lists
indexes, a native bulk load, what it cannot do) is declared on the Store class (see ``Store``'s class
attributes) and read from there by the rest of the project, which never asks which backend it talks to.

Adding a store: a module in ``pipeline/store/`` with a ``Store`` subclass that declares those attributes,
one :class:`StoreBackend` below, and a test class deriving from ``tests/cases.py``'s ``StoreCase`` (the
meta-test fails without it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from pipeline.core.errors import PipelineError, StoreUnavailable
from pipeline.core.registry import Registry
from pipeline.store.base import Store

# opener(uri, its parts, graph override) -> an open Store
Opener = Callable[[str, SplitResult, "str | None"], Store]


@dataclass(frozen=True)
class StoreBackend:
    """A registered backend. ``schemes``: the URI schemes it serves (the first is its name when it is one);
    ``uri``: the URI form shown in tables and errors; ``store_class``: ``module:Class`` of its Store
    (imported on demand: no driver is imported to list the table); ``opener``: ``module:function``."""

    name: str
    schemes: tuple[str, ...]
    uri: str
    description: str
    store_class: str
    opener: str

    @property
    def synonyms(self) -> tuple[str, ...]:
        """The schemes other than the name: the registry finds a backend by any of its schemes."""
        return tuple(s for s in self.schemes if s != self.name)

    def cls(self) -> type[Store]:
        module, _, attr = self.store_class.partition(":")
        return getattr(import_module(module), attr)

    def open(self, uri: str, graph: str | None = None) -> Store:
        """Connect to ``uri`` (one of this backend's schemes); raises StoreUnavailable or PipelineError."""
        module, _, attr = self.opener.partition(":")
        fn: Opener = getattr(import_module(module), attr)
        return fn(uri, split_uri(uri), graph)


def split_uri(uri: str) -> SplitResult:
    """The parts of a store URI whose host a connection can look up; PipelineError naming the URI for one
    that cannot be (an unclosed ``[`` of an IPv6 address, a host name with an empty or over-long label:
    Python's resolver raises a ValueError or a UnicodeError for them, far from the option that gave it)."""
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise PipelineError(f"store URI {uri!r}: {exc}") from None
    host = parts.hostname
    if host and not host.startswith("[") and ":" not in host:
        try:
            host.encode("idna")
        except UnicodeError as exc:
            why = str(exc).rpartition("UnicodeError: ")[2].rstrip(")") or str(exc)
            raise PipelineError(f"store URI {uri!r}: the host {host!r} is not a valid host name ({why})") from None
    return parts


def _row(b: StoreBackend) -> dict[str, Any]:
    cls = b.cls()
    return {
        "name": b.name,
        "uri": b.uri,
        "schemes": ", ".join(b.schemes),
        "class": cls.__name__,
        "write batch": cls.write_batch,
        "witness batch": cls.witness_batch,
        "bulk load": "yes" if cls.bulk_load else "no",
        "indexes listed by": f"cypher/{cls.index_listing}.cypher",
        "cannot": "; ".join(cls.cannot) or "-",
        "description": b.description,
    }


STORES: Registry[StoreBackend] = Registry(
    "store",
    (
        StoreBackend(
            "embedded", ("embedded",), "embedded",
            "the project's FalkorDB server under PIPELINE_HOME, started when needed",
            "pipeline.store.falkordb_store:FalkorDBStore", "pipeline.store.backends:open_embedded",
        ),
        StoreBackend(
            "falkordb", ("falkordb",), "falkordb://[user:password@]host:port[/graph]",
            "a FalkorDB server through its native client",
            "pipeline.store.falkordb_store:FalkorDBStore", "pipeline.store.backends:open_falkordb",
        ),
        StoreBackend(
            "neo4j", ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc"),
            "bolt://[user:password@]host:port[/database]",
            "Neo4j 5 (or another Bolt server) through the neo4j driver",
            "pipeline.store.bolt_store:BoltStore", "pipeline.store.backends:open_bolt",
        ),
    ),
    row=_row,
)

# `embedded`, `embedded:` and `embedded://` all name the embedded server
_BARE = {"embedded", "embedded:", "embedded://"}


def scheme_of(uri: str) -> str:
    """The scheme a URI is looked up by (``embedded`` for the bare word)."""
    return "embedded" if uri.lower() in _BARE else split_uri(uri).scheme.lower()  # EMBEDDED is embedded


def backend_for(uri: str) -> StoreBackend:
    """The registered backend serving ``uri``'s scheme; PipelineError naming the accepted forms otherwise."""
    scheme = scheme_of(uri)
    if scheme and scheme in STORES:
        return STORES[scheme]
    forms = ", ".join(b.uri for b in STORES.values())
    raise PipelineError(f"unknown store URI {uri!r}; expected one of: {forms} (`pipeline ls stores`)")


# ---------------------------------------------------------------------------------------------- openers


def _port(uri: str, parts: SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:
        raise PipelineError(f"store URI {uri!r}: the port is not a number") from None


def open_embedded(uri: str, parts: SplitResult, graph: str | None) -> Store:
    import pipeline.store.embedded as embedded
    import pipeline.store.recovery as recovery
    from pipeline.store.falkordb_store import DEFAULT_GRAPH, FalkorDBStore

    info = embedded.start()
    try:
        store = FalkorDBStore(info.host, info.port, graph or DEFAULT_GRAPH, **embedded.login(info))
    except StoreUnavailable as exc:
        if "did not answer" not in str(exc) and "stopped answering" not in str(exc):
            raise
        # it answered a moment ago and went silent since (stopped, hung): the start looks at it again, and
        # restarts it once it has not answered for liveness.HUNG_AFTER_S
        info = embedded.start()
        store = FalkorDBStore(info.host, info.port, graph or DEFAULT_GRAPH, **embedded.login(info))
    recovery.attach(store, info)
    return store


def open_falkordb(uri: str, parts: SplitResult, graph: str | None) -> Store:
    import pipeline.store.embedded as embedded
    from pipeline.store.falkordb_store import DEFAULT_GRAPH, FalkorDBStore

    port = _port(uri, parts)
    if not parts.hostname:
        raise PipelineError(f"store URI {uri!r} names no host; expected falkordb://host:port[/graph]")
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    if password is None:  # e.g. the address `pipeline store status` prints: the embedded server's own users
        creds = embedded.credentials_for(parts.hostname, port or 6379)
        if creds is not None:
            user, password = creds.user, creds.password
    return FalkorDBStore(
        parts.hostname, port or 6379, graph or parts.path.strip("/") or DEFAULT_GRAPH, password, username=user
    )


def open_bolt(uri: str, parts: SplitResult, graph: str | None) -> Store:
    from pipeline.store.bolt_store import BoltStore

    _port(uri, parts)
    return BoltStore(uri, database=graph)
