"""The version of a database storm's schema against this storm-queue's
(``queries.schema_version``, the number of its last migration): read once
a connection (``read``), a newer one refused for every command
(``not_newer``), an older one for every write until ``upgrade`` carries
it forward (``current``, ``migrate``)."""

from __future__ import annotations

from ...core.errors import NotHere
from . import driver
from .queries import function_names, pending, q, schema_version, upgradable

#: the version from which the boundary holds (issue 30; sql/migrations/0009.sql carries a storm to it): the storm's lock is a table only the
#: operator may lock, a runner writes only through the serving functions, the server quotes outside text itself
BOUNDARY = 9

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .session import Session as Database  # what it asks of store.Database, without importing it


def read(store: Database, fresh: bool = False) -> int:
    """The version of the storm's schema (0: made before the schema
    recorded one), read once a connection unless ``fresh``."""
    if store._version is None or fresh:
        with store._errors():  # a role that may not read it, a lost connection: the storm's errors
            conn = store.conn
            try:
                if conn.status == driver.IDLE:
                    row = conn.execute(q("read_schema_version")).fetchone()
                else:
                    with conn.transaction():  # a savepoint: a storm of version 0 must not abort the transaction
                        row = conn.execute(q("read_schema_version")).fetchone()
            except driver.errors.UndefinedTable:
                row = (0,)
        store._version = row[0]
    return store._version


def not_newer(store: Database) -> None:
    """``NotHere`` (exit 2) for a schema newer than this storm-queue's:
    every command is refused, reads too."""
    version = read(store)
    if version > schema_version():
        raise NotHere(f"the storm in {store.root} has schema version {version}, newer than this storm-queue's "
                      f"{schema_version()}: use the storm-queue that upgraded it; nothing was done")


def current(store: Database, nothing: str) -> None:
    """``NotHere`` (exit 2) unless the schema is this storm-queue's: a
    storm an earlier one made is read, and written once upgraded."""
    version = read(store)
    if version < schema_version():
        raise NotHere(f"the storm in {store.root} has schema version {version}, older than this storm-queue's "
                      f"{schema_version()}: reads work, and the operator's storm-queue upgrade URL carries it "
                      f"forward; {nothing}")


def migrate(store: Database, was: int) -> None:
    """In the upgrade's transaction: the migrations after version ``was``
    (tables and data; each records the version it carries the schema to),
    the tree's functions applied again (sql/functions/: code, not state),
    the functions the tree no longer defines dropped, none PUBLIC's; each
    runner role granted the tree's serving functions, and each role that
    reads the storm's tables every table of the tree, as ``grant`` gives
    them. ``NotHere`` (exit 2) for a version no migration carries forward."""
    conn = store.conn
    if not upgradable(was):
        raise NotHere(f"the storm in {store.root} has schema version {was}, which only a development build of "
                      f"storm-queue made and no release carries forward: make a new storm (storm-queue init) and "
                      f"move its lanes over; nothing was done")
    for script in pending(was):
        conn.execute(script)
    for (stale,) in conn.execute(q("stale_functions"), (" ".join(function_names()),)).fetchall():
        conn.execute(q("drop_function").format(stale))  # (a regprocedure's text: quoted by the server)
    conn.execute(q("revoke_public_execute"))
    from .driver import quote_ident

    for (role,) in conn.execute(q("runner_roles")).fetchall():  # the serving functions as this tree has them
        conn.execute(q("grant_runner_functions").format(role=quote_ident(role)))
    for (role,) in conn.execute(q("reading_roles")).fetchall():  # the tables as this tree has them, as grant gives them
        for statement in (q("grant_select"), q("revoke_operators_tables")):
            conn.execute(statement.format(role=quote_ident(role)))
    if was < BOUNDARY:  # the runner policy the server serves runners by, of the declaration in force
        from .policy import write_policy
        from .unicode import write_unprintable

        write_policy(conn, conn.execute(q("read_declaration")).fetchone()[0])
        write_unprintable(conn)  # what the server's refusals quote outside text by
    store._version = None  # read again once this transaction ends


def withdrawn(store: Database) -> str | None:
    """Why the server no longer decides by its folded tables (from version 9), or None."""
    if read(store) < BOUNDARY:
        return None
    return store.conn.execute(q("read_withdrawn")).fetchone()[0]


def rederive(store: Database) -> int:
    """In the upgrade's transaction: the server's folded tables derived again from the log; how many lines."""
    return store.conn.execute(q("rederive")).fetchone()[0]
