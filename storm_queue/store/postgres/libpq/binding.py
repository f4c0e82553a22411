"""libpq itself: found (the system's, or a psycopg-binary wheel's), loaded
once and its functions typed (``library``), and its parser of connection
strings (``conninfo``)."""

from __future__ import annotations

import ctypes
import os
import sys

from .exceptions import ProgrammingError, _after_severity
from .values import _text

_c = ctypes.c_char_p
_p = ctypes.c_void_p
_i = ctypes.c_int


class _PGnotify(ctypes.Structure):
    _fields_ = [("relname", _c), ("be_pid", _i), ("extra", _c)]


class _ConninfoOption(ctypes.Structure):
    _fields_ = [("keyword", _c), ("envvar", _c), ("compiled", _c), ("val", _c), ("label", _c),
                ("dispchar", _c), ("dispsize", _i)]


_PROTOTYPES = {
    "PQconnectStartParams": (_p, [ctypes.POINTER(_c), ctypes.POINTER(_c), _i]), "PQconnectPoll": (_i, [_p]),
    "PQstatus": (_i, [_p]), "PQerrorMessage": (_c, [_p]), "PQfinish": (None, [_p]),
    "PQsocket": (_i, [_p]), "PQbackendPID": (_i, [_p]), "PQtransactionStatus": (_i, [_p]),
    "PQsendQuery": (_i, [_p, _c]),
    "PQsendQueryParams": (_i, [_p, _c, _i, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(_c),
                               ctypes.POINTER(_i), ctypes.POINTER(_i), _i]),
    "PQsendPrepare": (_i, [_p, _c, _c, _i, ctypes.POINTER(ctypes.c_uint)]),
    "PQsendQueryPrepared": (_i, [_p, _c, _i, ctypes.POINTER(_c), ctypes.POINTER(_i), ctypes.POINTER(_i), _i]),
    "PQconsumeInput": (_i, [_p]), "PQisBusy": (_i, [_p]), "PQgetResult": (_p, [_p]),
    "PQresultStatus": (_i, [_p]), "PQresultErrorMessage": (_c, [_p]), "PQresultErrorField": (_c, [_p, _i]),
    "PQntuples": (_i, [_p]), "PQnfields": (_i, [_p]), "PQftype": (ctypes.c_uint, [_p, _i]),
    "PQgetvalue": (_p, [_p, _i, _i]), "PQgetlength": (_i, [_p, _i, _i]), "PQgetisnull": (_i, [_p, _i, _i]),
    "PQcmdTuples": (_c, [_p]), "PQclear": (None, [_p]),
    "PQnotifies": (ctypes.POINTER(_PGnotify), [_p]), "PQfreemem": (None, [_p]),
    "PQgetCancel": (_p, [_p]), "PQcancel": (_i, [_p, _c, _i]), "PQfreeCancel": (None, [_p]),
    "PQconninfoParse": (ctypes.POINTER(_ConninfoOption), [_c, ctypes.POINTER(_c)]),
    "PQconninfoFree": (None, [_p]), "PQlibVersion": (_i, []),
    "PQgetCopyData": (_i, [_p, ctypes.POINTER(_p), _i]),
}

_lib = None
#: libpq's notices and warnings (a server's FATAL on an idle connection among them) go nowhere:
#: by default libpq prints them on stderr, and the storm's own errors say what happened
_NOTICES = ctypes.CFUNCTYPE(None, _p, _c)
_quiet = _NOTICES(lambda arg, message: None)


def _candidates() -> list[str]:
    """Where libpq may be: the system's, then a psycopg-binary wheel's on ``sys.path``."""
    found = ["libpq.5.dylib" if sys.platform == "darwin" else "libpq.so.5"]
    for place in sys.path:
        for libs in (os.path.join(place or ".", "psycopg_binary.libs"), os.path.join(place or ".", "psycopg_binary", ".dylibs")):
            try:
                names = sorted(os.listdir(libs))
            except OSError:
                continue
            found += [os.path.join(libs, n) for n in names if n.startswith("libpq")]
    return found


def library():
    """libpq, loaded on first use, its functions typed. ``ImportError``
    saying what to install when there is none."""
    global _lib
    if _lib is None:
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError:
                continue
        else:
            from ctypes.util import find_library

            path = find_library("pq")
            if path is None:
                raise ImportError("libpq, PostgreSQL's client library, is not installed")
            lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        lib.PQsetNoticeProcessor.restype, lib.PQsetNoticeProcessor.argtypes = _p, [_p, _NOTICES, _p]
        _lib = lib
    return _lib


def conninfo(text: str) -> dict[str, str]:
    """The parameters a connection string or URL sets (libpq's parser);
    ``ProgrammingError`` with libpq's words for one that is not."""
    lib = library()
    err = _c()
    opts = lib.PQconninfoParse(_text(text), ctypes.byref(err))
    if not opts:
        message = _after_severity(err.value) if err.value else "out of memory"
        if err.value:
            lib.PQfreemem(ctypes.cast(err, _p))
        raise ProgrammingError(f"invalid connection string: {message}" if "invalid" not in message else message)
    try:
        found, n = {}, 0
        while opts[n].keyword is not None:
            if opts[n].val is not None:
                found[opts[n].keyword.decode()] = opts[n].val.decode("utf-8", "replace")
            n += 1
        return found
    finally:
        lib.PQconninfoFree(ctypes.cast(opts, _p))
