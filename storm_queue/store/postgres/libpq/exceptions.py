"""The driver's errors: the DB-API classes, and the server's errors as the
class of their SQLSTATE (``errors``); libpq's words after their severity."""

from __future__ import annotations

class Error(Exception):
    """Anything the server or libpq refused; ``sqlstate`` is the server's code, if it gave one."""

    sqlstate: str | None = None


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


#: the DB-API class of each SQLSTATE class (its first two characters), as psycopg maps them
_BY_CLASS = {"08": OperationalError, "0A": NotSupportedError, "20": ProgrammingError, "21": ProgrammingError,
             "22": DataError, "23": IntegrityError, "24": InternalError, "25": InternalError, "26": InternalError,
             "27": InternalError, "28": OperationalError, "2B": InternalError, "2D": InternalError,
             "2F": InternalError, "34": ProgrammingError, "38": InternalError, "39": InternalError,
             "3B": InternalError, "3D": ProgrammingError, "3F": ProgrammingError, "40": OperationalError,
             "42": ProgrammingError, "44": ProgrammingError, "53": OperationalError, "54": OperationalError,
             "55": OperationalError, "57": OperationalError, "58": OperationalError, "F0": InternalError,
             "HV": OperationalError, "P0": InternalError, "XX": InternalError}


class errors:
    """The server errors the store tells apart, by SQLSTATE."""

    class InsufficientPrivilege(ProgrammingError):
        sqlstate = "42501"

    class UndefinedTable(ProgrammingError):
        sqlstate = "42P01"

    class UndefinedColumn(ProgrammingError):
        sqlstate = "42703"

    class UndefinedFunction(ProgrammingError):
        sqlstate = "42883"

    class DuplicateSchema(ProgrammingError):
        sqlstate = "42P06"

    class InvalidSchemaName(ProgrammingError):
        sqlstate = "3F000"

    class LockNotAvailable(OperationalError):
        sqlstate = "55P03"

    class SerializationFailure(OperationalError):
        sqlstate = "40001"

    class DeadlockDetected(OperationalError):
        sqlstate = "40P01"

    class QueryCanceled(OperationalError):
        sqlstate = "57014"

    class AdminShutdown(OperationalError):
        sqlstate = "57P01"

    class DependentObjectsStillExist(InternalError):
        sqlstate = "2BP01"

    class RaiseException(InternalError):
        sqlstate = "P0001"

    class DataCorrupted(InternalError):
        sqlstate = "XX001"

    class CheckViolation(IntegrityError):
        sqlstate = "23514"


_BY_STATE = {cls.sqlstate: cls for cls in vars(errors).values() if isinstance(cls, type)}


def _server_error(state: str | None, message: str) -> Error:
    cls = _BY_STATE.get(state or "") or _BY_CLASS.get((state or "")[:2], DatabaseError if state else OperationalError)
    exc = cls(message)
    exc.sqlstate = state
    return exc


def _after_severity(raw: bytes | None) -> str:
    """libpq's message without the severity it may begin with (``ERROR:``, ``FATAL:``)."""
    text = (raw or b"").decode("utf-8", "replace").strip()
    word, colon, rest = text.partition(":")
    return rest.strip() if colon and word.isupper() and word.isalpha() else text
