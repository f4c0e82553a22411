"""Where a storm is: a directory holding one of its files, or a
PostgreSQL URL."""

from __future__ import annotations

import os

from .core.errors import NoStorm
from .core.names import printable, quote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

#: a directory is a storm when it holds one of these; ``init`` makes one
STORM_FILES = ("queue.txt", "storm.toml", "priority.log", ".priority.log.witness")


def find_root(root: str | None, env: Mapping[str, str], cwd: str | None = None) -> str:
    """The storm root: ``root``, else ``$STORM_QUEUE_ROOT`` (either must be
    a storm: a directory holding one of ``STORM_FILES``; a PostgreSQL URL is
    returned as it is), else the nearest directory at or above ``cwd``
    holding one of ``STORM_FILES`` (a storm whose queue.txt is gone is
    still a storm: its readers say so)."""
    given = root or env.get("STORM_QUEUE_ROOT")
    if given and is_url(given):
        SEEN.append(given)
        return given
    if given:
        if not os.path.lexists(given):
            raise NoStorm(f"storm root {quote(shown(given))} does not exist; pass --root for an existing storm "
                          "(a directory or a postgresql:// URL), or make one there with storm-queue init")
        if not os.path.isdir(given):
            raise NoStorm(f"storm root {quote(shown(given))} is not a directory; pass --root DIR for an existing storm")
        if os.access(given, os.X_OK) and not any(os.path.lexists(os.path.join(given, f)) for f in STORM_FILES):
            from shlex import quote as sh

            raise NoStorm(f"{printable(given)} is not a storm (no queue.txt or storm.toml): "
                          f"create one with storm-queue init {sh(printable(given))}")
        return os.path.abspath(given)
    here = os.path.abspath(cwd or os.getcwd())
    while True:
        if any(os.path.lexists(os.path.join(here, f)) for f in STORM_FILES):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise NoStorm(
                "no storm here: no queue.txt or storm.toml in this directory or above it; "
                "cd into a storm, pass --root DIR, or set STORM_QUEUE_ROOT"
            )
        here = parent


#: each store, and what makes a storm there, as ``module:name``: a
#: directory's, and the database's a URL names (loaded only for such a
#: storm, so a directory's command never imports the database's modules)
DIRECTORY = {"open": "storm_queue.store.directory.store:Directory", "create": "storm_queue.ops.init:create"}
DATABASE = {"open": "storm_queue.store.postgres.store:Database",
            "create": "storm_queue.store.postgres.connect:create"}


def _named(where: str):
    module, name = where.split(":")
    return getattr(__import__(module, fromlist=[name]), name)


def opened(root: str | None, env: Mapping[str, str], wait: float):
    """The one factory that looks at a root to choose a store: the store of
    the storm at ``root`` (else as ``find_root`` finds it), a directory's,
    or the database's for a URL (``store.interface.Store``)."""
    found = find_root(root, env)
    return _named((DATABASE if is_url(found) else DIRECTORY)["open"])(found, env, wait)


def create(target: str):
    """Make a storm at ``target`` (``init``): the schema and first line in
    the database a URL names, else a directory's files."""
    return _named((DATABASE if is_url(target) else DIRECTORY)["create"])(target)


def is_url(root: str) -> bool:
    """Whether ``root`` names a database storm (a libpq URL) rather than a directory."""
    return root.startswith(("postgresql://", "postgres://"))


# -- passwords: never printed, never recorded ---------------------------------

#: the query parameters that carry a secret (libpq's names, in any case)
SECRET_PARAMS = ("password", "sslpassword")
MASK = "***"


def _is_secret(param: str) -> bool:
    """Whether the query parameter ``param`` (``key=value``) carries a secret."""
    from urllib.parse import unquote

    key, eq, _ = param.partition("=")
    return bool(eq) and unquote(key).strip().lower() in SECRET_PARAMS


def _secrets(url: str) -> list[tuple[int, int]]:
    """The (start, end) spans of every password in ``url``, in order: the
    userinfo's, then each secret query parameter's value. The userinfo ends
    at the last ``@`` before the first ``/`` after the scheme (libpq stops
    at the first ``@``; the last masks more, never less), and its password
    starts after its first ``:``."""
    start = url.find("://")
    if start < 0:
        return []
    start += 3
    slash = url.find("/", start)
    at = url.rfind("@", start, len(url) if slash < 0 else slash)
    colon = url.find(":", start, at) if at >= 0 else -1
    spans = [(colon + 1, at)] if colon >= 0 else []
    q = url.find("?", max(at, start))
    if q >= 0:
        pos = q + 1
        for param in url[q + 1:].split("&"):
            if _is_secret(param):
                spans.append((pos + param.index("=") + 1, pos + len(param)))
            pos += len(param) + 1
    return spans


def shown(url: str) -> str:
    """``url`` as it may be printed: every password in it, in the userinfo
    (``user:pw@``) or in a ``password`` or ``sslpassword`` query parameter
    (any case), replaced by ``***``; the rest as given."""
    for begin, end in reversed(_secrets(url)):
        url = url[:begin] + MASK + url[end:]
    return url


def without_password(url: str) -> str:
    """``url`` as it may be recorded: its userinfo's password and its
    secret query parameters removed (``.pgpass``, ``PGPASSFILE`` or a
    service file give the password to whoever uses it next)."""
    spans = _secrets(url)
    if spans and url[spans[0][1]:spans[0][1] + 1] == "@":  # the userinfo's: drop it with its ":"
        url = url[:spans[0][0] - 1] + url[spans[0][1]:]
    base, q, query = url.partition("?")
    kept = [p for p in query.split("&") if not _is_secret(p)]
    return base + ("?" + "&".join(kept) if q and kept else "")


def passwords(url: str | None, env: Mapping[str, str] | None = None) -> list[str]:
    """Every password ``url`` carries (as written and percent-decoded) and
    ``$PGPASSWORD`` from ``env`` (default: this process's environment, which
    libpq reads), longest first: the strings a message must never show."""
    from urllib.parse import unquote

    found = [url[b:e] for b, e in _secrets(url)] if url else []
    pgpassword = (os.environ if env is None else env).get("PGPASSWORD")
    if pgpassword:
        found.append(pgpassword)
    out = {form for pw in found for form in (pw, unquote(pw), unquote(pw.replace("+", " "))) if form}
    return sorted(out, key=len, reverse=True)  # a password inside another is masked after it


#: the URLs ``find_root`` has returned in this process: ``hide`` masks
#: their passwords in every message, whoever words it
SEEN: list[str] = []


def hide(text: str, url: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """``text`` (a message, the driver's or the server's words) with ``url``
    and every URL of ``SEEN`` shown as ``shown`` shows them, and every
    password of theirs and ``$PGPASSWORD`` (``passwords``) replaced by ``***``."""
    urls = ([url] if url else []) + [u for u in SEEN if u != url]
    found = set(passwords(None, env))
    for u in urls:
        text = text.replace(u, shown(u))
        found.update(passwords(u, {}))
    for pw in sorted(found, key=len, reverse=True):
        text = text.replace(pw, MASK)
    return text
