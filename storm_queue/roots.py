"""Where a storm is: a directory holding one of its files, or a
PostgreSQL URL."""

from __future__ import annotations

import os

from .core.errors import NoStorm, StormError
from .core.names import printable, quote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

#: a directory is a storm when it holds one of these; ``init`` makes one
STORM_FILES = ("queue.txt", "storm.toml", "priority.log", ".priority.log.witness")


def find_root(root: str | None, env: Mapping[str, str], cwd: str | None = None) -> str:
    """The storm root: ``root`` (a str or a ``pathlib.Path``; empty:
    ``NoStorm``), else
    ``$STORM_QUEUE_ROOT`` (empty: unset; either must be a storm: a
    directory holding one of ``STORM_FILES``; a PostgreSQL URL is
    returned as it is), else the nearest directory at or above ``cwd``
    holding one of ``STORM_FILES`` (a storm whose queue.txt is gone is
    still a storm: its readers say so)."""
    if root is not None and not isinstance(root, str):
        root = os.fspath(root)  # a pathlib.Path; anything else is os.fspath's TypeError
        if not isinstance(root, str):
            raise TypeError("a storm's root is a str or a path of one (os.PathLike[str]), not bytes")
    if root == "":  # given, and empty: a script's unset variable, never the storm around the working directory
        raise NoStorm("the storm root given is empty (an unset shell variable?): name the storm's directory or its "
                      "postgresql:// URL, or give no root at all to use $STORM_QUEUE_ROOT or the storm around the "
                      "working directory")
    given = root or env.get("STORM_QUEUE_ROOT")
    if given and is_url(given):
        SEEN.append(given)
        return given
    if given:
        if not os.path.lexists(given):
            refusal = not_a_url(given)
            if refusal is not None:
                raise refusal
            raise NoStorm(f"storm root {quote(shown(given))} does not exist; pass --root for an existing storm "
                          "(a directory or a postgresql:// URL), or make one there with storm-queue init")
        if not os.path.isdir(given):
            raise NoStorm(f"storm root {quote(shown(given))} is not a directory; pass --root DIR for an existing storm")
        if os.access(given, os.X_OK) and not any(os.path.lexists(os.path.join(given, f)) for f in STORM_FILES):
            from shlex import quote as sh

            raise NoStorm(f"{printable(shown(given))} is not a storm (no queue.txt or storm.toml): "
                          f"create one with storm-queue init {sh(printable(shown(given)))}")
        return absolute(given)
    here = absolute(cwd or ".")
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


def absolute(path: str, error: type[StormError] = NoStorm,
             advice: str = "cd into a storm, pass --root with an absolute path, or set STORM_QUEUE_ROOT") -> str:
    """``path`` made absolute; ``error`` (with ``advice``, what to do
    next) when it is relative and the current directory was removed (it
    has no name to start from)."""
    try:
        return os.path.abspath(path)
    except FileNotFoundError:
        raise error(f"the current directory no longer exists (it was removed), so {quote(shown(path))} names "
                    f"nothing: {advice}") from None


def _named(where: str):
    module, name = where.split(":")
    return getattr(__import__(module, fromlist=[name]), name)


def opened(root: str | None, env: Mapping[str, str], wait: float):
    """The one factory that looks at a root to choose a store: the store of
    the storm at ``root`` (else as ``find_root`` finds it), a directory's,
    or the database's for a URL (``store.interface.Store``)."""
    from .core.clock import wait_seconds

    wait = wait_seconds(wait)
    found = find_root(root, env)
    return _named((DATABASE if is_url(found) else DIRECTORY)["open"])(found, env, wait)


def create(target: str):
    """Make a storm at ``target`` (``init``): the schema and first line in
    the database a URL names, else a directory's files; never a directory
    named after what looks like a database (``not_a_url``)."""
    refusal = None if is_url(target) else not_a_url(target, "init target")
    if refusal is not None:
        raise refusal
    return _named((DATABASE if is_url(target) else DIRECTORY)["create"])(target)


def is_url(root: str) -> bool:
    """Whether ``root`` names a database storm (a libpq URL) rather than a directory."""
    return root.startswith(("postgresql://", "postgres://"))


# -- passwords: never printed, never recorded ---------------------------------


def shown(root: str) -> str:
    """``root`` as it may be printed: each password in it (a URL's, however
    mistyped, or a keyword/value string's) masked ``***`` by its position
    (``core.passwords.shown``); the rest as given."""
    if "@" not in root and "=" not in root and "%3" not in root:  # no password without one (%3D is "="): nothing to load
        return root
    from .core.passwords import shown as masked

    return masked(root)


def without_password(url: str) -> str:
    """``url`` as it may be recorded: its passwords cut out (``core.passwords``)."""
    from .core.passwords import without_password as cut

    return cut(url)


#: the URLs ``find_root`` has returned in this process: ``hide`` shows
#: each as ``shown`` does in every message, whoever words it
SEEN: list[str] = []


def hide(text: str, url: str | None = None) -> str:
    """``text`` (a message, the driver's or the server's words) with
    ``url`` and every URL of ``SEEN`` shown as ``shown`` shows them. The
    server never quotes a password, and libpq quotes one only in a URL it
    reads otherwise than ``shown`` masks it, which ``store.postgres.connect``
    refuses before it connects: no password is searched for by its text."""
    for u in ([url] if url else []) + [u for u in SEEN if u != url]:
        if u in text:
            text = text.replace(u, shown(u))
    return text


def must_be_url(text: str) -> None:
    """``NoStorm`` (exit 2, any password masked) unless ``text`` is a
    ``postgresql://`` (or ``postgres://``) URL: the target of ``migrate``,
    whatever connects to a database."""
    if not is_url(text):
        raise not_a_url(text, "database URL") or NoStorm(
            f"{quote(shown(text))} is not a database URL: write postgresql://USER@HOST:PORT/DBNAME; nothing was done")


def must_be_directory(text: str) -> None:
    """``NoStorm`` (exit 2, any password masked) when ``text`` is a
    database URL: the source of ``migrate``, given where its target goes."""
    if is_url(text):
        raise NoStorm(f"{quote(shown(text))} is a database: migrate carries a directory storm into one, the directory "
                      "first (storm-queue migrate DIR URL); nothing was migrated")


def not_a_url(root: str, role: str = "storm root") -> NoStorm | None:
    """The refusal (exit 2, its password masked) of a ``root`` that looks
    like a database's but is not a URL libpq takes as one: a libpq
    keyword/value string (``host=... password=...``), or a URL whose
    scheme is mistyped (``postgresql:/``, ``postgresql//``, none); None
    for any other."""
    from .core import passwords

    kind = passwords.form(root)
    if kind == passwords.KEYWORDS:
        return NoStorm(f"{role} {quote(shown(root))} is a libpq keyword/value string, which storm-queue does not take "
                       f"as a root: write it as a URL, {quote(passwords.as_url(root))}, and keep the password in "
                       "~/.pgpass (or the file PGPASSFILE names), or percent-encoded in the URL "
                       "(postgresql://USER:PASSWORD@HOST:PORT/DBNAME); nothing was done")
    if kind == passwords.MISTYPED:
        return NoStorm(f"{role} {quote(shown(root))} looks like a database URL, but a database storm's URL begins with "
                       "postgresql:// (or postgres://): postgresql://USER@HOST:PORT/DBNAME; nothing was done")
    return None
