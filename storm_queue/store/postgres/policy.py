"""The declaration's ``[runner]`` policy as a database storm's server reads
it (``storm_queue.storm.runner``, sql/schema.sql): written beside
the declaration whenever the storm row's declaration is (init, declare,
migrate, upgrade), by the Python that parses storm.toml, so the server's
runner functions decide by the same policy the request path would.
Every key of ``config.Policy`` is written; a policy written before a key
existed lacks it, and the server reads the key's default then (the
backoff's ``retry_delay`` 0 and ``retry_max`` 600, sql/functions/backoff.sql);
``upgrade`` writes the policy again."""

from __future__ import annotations

from .queries import q

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def policy(text: str | None) -> dict[str, Any] | None:
    """The ``[runner]`` policy of the declaration ``text`` (None: no
    declaration, the default policy) as the server reads it; None when the
    declaration cannot be read (every request then takes the Python path,
    which refuses it)."""
    from ...core import config
    from ...core.records import fields

    decl = config.Declaration(False) if text is None else config.parse(text)
    if decl.error:
        return None
    return {name: getattr(decl.runner, name) for name in fields(decl.runner)}


def write_policy(conn: Any, text: str | None) -> None:
    """Record, beside the declaration the storm row holds (``text``), its runner policy."""
    from .driver import Jsonb

    found = policy(text)
    conn.execute(q("write_runner_policy"), (None if found is None else Jsonb(found),))
