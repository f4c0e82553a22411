"""The version of a database storm's schema against this storm-queue's
(``queries.schema_version``, the number of its last migration): read once
a connection (``read``), a newer one refused for every command
(``not_newer``), an older one for every write until ``upgrade`` carries
it forward (``current``, ``migrate``)."""

from __future__ import annotations

from ...core.errors import NotHere
from . import libpq
from .queries import migrations, q, schema_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .store import Database


def read(store: Database, fresh: bool = False) -> int:
    """The version of the storm's schema (0: made before the schema
    recorded one), read once a connection unless ``fresh``."""
    if store._version is None or fresh:
        with store._errors():  # a role that may not read it, a lost connection: the storm's errors
            conn = store.conn
            try:
                if conn.status == libpq.IDLE:
                    row = conn.execute(q("read_schema_version")).fetchone()
                else:
                    with conn.transaction():  # a savepoint: a storm of version 0 must not abort the transaction
                        row = conn.execute(q("read_schema_version")).fetchone()
            except libpq.errors.UndefinedTable:
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
    (each records the version it carries the schema to)."""
    for n, script in migrations():
        if n > was:
            store.conn.execute(script)
    if was < 8:  # the runner policy the server serves runners by (0005.sql; its backoff keys, 0008.sql), of the
        from .policy import write_policy  # declaration in force

        write_policy(store.conn, store.conn.execute(q("read_declaration")).fetchone()[0])
    store._version = None  # read again once this transaction ends
