"""Who may use the embedded FalkorDB server (design section 4, "What the store promises").

The server reads its users from a Redis ACL file, never from its command line (``/proc/PID/cmdline`` is
readable by every local user). Both files live in the store folder, which is made 0700:

- ``credentials.json`` (0600): the plain passwords, generated at the first start, read by every command
  of the project (and by a person pointing another client at the store);
- ``users.acl`` (0600): what the server loads; it holds only SHA-256 hashes of the passwords.

Users:

- ``default``: off. A client that does not authenticate can run nothing (not even PING);
- ``pipeline`` (:data:`DATA_USER`): every connection the project makes for data, and the one a browsing
  client gets: the FalkorDB graph commands (read and write Cypher, bulk load, graph list, explain,
  profile, delete of a graph) and connection housekeeping; no server command (no FLUSHALL, FLUSHDB,
  CONFIG, DEBUG, MODULE, SHUTDOWN, SAVE, ACL, KEYS, DEL, GRAPH.CONFIG, ...);
- ``admin`` (:data:`ADMIN_USER`): everything; used only by ``pipeline store stop|start`` to shut the
  server down or switch on its append-only file.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import pipeline.store.private as private
from pipeline.core import jsontext
from pipeline.core.errors import StoreUnavailable

CREDENTIALS_FILE = "credentials.json"
ACL_FILE = "users.acl"
DATA_USER = "pipeline"
ADMIN_USER = "admin"
# The data user's commands, by name (no category: a category like @write also grants FLUSHALL).
# GRAPH.* are the module's commands the client and the project use; the rest is what a Redis client sends
# to open, name and check a connection; INFO (read-only) because the falkordb client asks it whether the
# server is a cluster or a sentinel before anything else.
DATA_COMMANDS = (
    "GRAPH.QUERY", "GRAPH.RO_QUERY", "GRAPH.EXPLAIN", "GRAPH.PROFILE", "GRAPH.LIST", "GRAPH.DELETE",
    "GRAPH.BULK", "GRAPH.CONSTRAINT", "GRAPH.INFO", "GRAPH.MEMORY", "GRAPH.SLOWLOG",
    "PING", "ECHO", "HELLO", "AUTH", "EXISTS", "TYPE", "CLIENT|SETNAME", "CLIENT|SETINFO", "CLIENT|ID",
    "INFO",
)  # fmt: skip


@dataclass(frozen=True)
class Credentials:
    """The two users of one embedded server (passwords in plain text: never print them)."""

    user: str
    password: str
    admin_user: str
    admin_password: str

    def __repr__(self) -> str:  # a traceback or a log line must not show the passwords
        return f"Credentials(user={self.user!r}, admin_user={self.admin_user!r})"


def credentials_path(folder: Path) -> Path:
    return Path(folder) / CREDENTIALS_FILE


def private_folder(folder: Path) -> Path:
    """Create or check ``folder``: a real folder of this user's, made 0700, holding only entries of this
    user's (see :mod:`pipeline.store.private`; UnsafeStorePath otherwise): the store's data, its log and its
    passwords are its owner's alone."""
    return private.private_folder(folder)


def ensure(folder: Path) -> Credentials:
    """The credentials of the server whose data is in ``folder``: read them, or generate them at the first
    start; (re)write the ACL file the server loads. Makes the folder 0700 and both files 0600; a folder or
    file of another user, or a symlink in their place, is refused (UnsafeStorePath) before anything is
    read or written."""
    folder = private_folder(folder)
    creds = read(folder)
    if creds is None:
        creds = Credentials(DATA_USER, secrets.token_urlsafe(32), ADMIN_USER, secrets.token_urlsafe(32))
        doc = {"user": creds.user, "password": creds.password,
               "admin_user": creds.admin_user, "admin_password": creds.admin_password}
        private.write_file(folder, CREDENTIALS_FILE, (json.dumps(doc, indent=1) + "\n").encode())
    acl = acl_text(creds).encode()
    if private.read_file(folder, ACL_FILE) != acl:  # unchanged: not written again (a start on a full disk)
        private.write_file(folder, ACL_FILE, acl)
    return creds


def read(folder: Path) -> Credentials | None:
    """The credentials kept in ``folder``, or None when there are none (a store never started). Raises
    StoreUnavailable when the file is unreadable, UnsafeStorePath when it or its folder is not this user's
    alone (another owner, a symlink, readable by others: then it is no secret any more)."""
    path = credentials_path(folder)
    data = private.read_file(Path(folder), CREDENTIALS_FILE, secret=True)
    if data is None:
        return None
    try:
        doc = jsontext.loads(data)
        return Credentials(str(doc["user"]), str(doc["password"]), str(doc["admin_user"]),
                           str(doc["admin_password"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreUnavailable(f"cannot read the store's credentials {path}: {exc}") from None


def acl_text(creds: Credentials) -> str:
    """The ACL file: hashes only, so the server's own files never hold a password."""
    allowed = " ".join(f"+{c.lower()}" for c in DATA_COMMANDS)
    return (
        "user default off resetpass -@all\n"
        f"user {creds.user} on #{_sha256(creds.password)} ~* resetchannels -@all {allowed}\n"
        f"user {creds.admin_user} on #{_sha256(creds.admin_password)} ~* &* +@all\n"
    )


def _sha256(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()
