"""JSON text from values and values from JSON text, exactly as the standard
library's ``json`` module makes and reads them, without importing it on the
way: ``json`` imports ``re`` (and ``enum`` with it), which is a quarter of a
request's start-up. These call the same C codec ``json`` calls (``_json``)
with ``json``'s own options. Whatever they cannot answer themselves (an
error to report, bytes in another encoding, an interpreter without
``_json``) is handed to ``json`` itself, so every answer and every error is
``json``'s, word for word."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

try:
    from _json import encode_basestring_ascii as _ascii
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover -- an interpreter without the C codec: json's own pure Python
    _make_scanner = _make_encoder = _ascii = None

#: what JSON calls whitespace around a value
_SPACE = " \t\n\r"
#: ``json.dumps``' separators: the default and the compact one
SPACED, COMPACT = (", ", ": "), (",", ":")


class _Options:
    """The options of ``json.JSONDecoder()`` that its C scanner reads. One
    instance: every NaN read is the same object, as with ``json``, so two
    values read from the same text compare equal."""

    strict = True
    object_hook = None
    object_pairs_hook = None

    def __init__(self) -> None:
        self.parse_float, self.parse_int = float, int
        self.parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_OPTIONS = _Options()


def scanner() -> Callable[[str, int], tuple[Any, int]]:
    """The parser ``json.loads`` uses, called at an index of a longer text:
    it returns the value there and the index where it ends, and raises (some
    exception) when there is no valid value there."""
    if _make_scanner is None:  # pragma: no cover
        import json
        from json.scanner import make_scanner

        return make_scanner(json.JSONDecoder())
    return _make_scanner(_OPTIONS)


_scan = scanner() if _make_scanner is not None else None


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``: the value, or the exception ``json`` raises (a
    ``ValueError``; arrays or objects nested deeper than the parser goes
    are one too, where ``json`` raises RecursionError)."""
    if type(text) is not str and isinstance(text, (bytes, bytearray)) and b"\x00" not in text[:4] \
            and not text.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        text = text.decode("utf-8", "surrogatepass")  # the encoding json.detect_encoding finds for it
    if _scan is not None and type(text) is str:
        try:
            value, end = _scan(text, len(text) - len(text.lstrip(_SPACE)))
        except Exception:  # noqa: BLE001 -- json says what is wrong, below
            pass
        else:
            if len(text.rstrip(_SPACE)) == end:
                return value
    import json

    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("arrays or objects are nested too deeply to be read") from None


def _unknown(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps(value: Any, *, separators: tuple[str, str] = SPACED, sort_keys: bool = False) -> str:
    """``json.dumps(value, ensure_ascii=True, separators=separators,
    sort_keys=sort_keys)``: ASCII text, or the exception ``json`` raises."""
    if _make_encoder is not None:
        if type(value) is str:
            return _ascii(value)
        try:
            encode = _make_encoder({}, _unknown, _ascii, None, separators[1], separators[0], sort_keys, False, True)
            return "".join(encode(value, 0))
        except Exception:  # noqa: BLE001 -- json says what is wrong, below
            pass
    import json

    return json.dumps(value, ensure_ascii=True, separators=separators, sort_keys=sort_keys)
