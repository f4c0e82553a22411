"""storm_queue.core.jsoncodec answers exactly as the standard library's json does:
the same text for every value, the same value for every text, and the same
exception (type and words) for everything json refuses, but one: arrays or
objects nested deeper than json's parser goes are a ValueError, as every
other text that is not JSON, where json raises RecursionError."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from storm_queue.core import jsoncodec

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                            max_size=4), max_leaves=20)


def same(a, b) -> bool:
    """Equal values, with NaN equal to NaN and lists/dicts compared inside."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def outcome(call, *args, **kwargs):
    try:
        return "value", call(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- the exception is what is compared
        return "raised", (type(exc), str(exc))


def agree(text) -> None:
    mine, theirs = outcome(jsoncodec.loads, text), outcome(json.loads, text)
    assert mine[0] == theirs[0], (text, mine, theirs)
    if mine[0] == "value":
        assert same(mine[1], theirs[1]), (text, mine, theirs)
    elif theirs[1][0] is RecursionError:  # the one difference: nesting too deep is a ValueError, as all bad JSON is
        assert mine[1] == (ValueError, "arrays or objects are nested too deeply to be read")
    else:
        assert mine == theirs


@settings(max_examples=400)
@given(values, st.sampled_from([jsoncodec.SPACED, jsoncodec.COMPACT]), st.booleans())
def test_dumps_is_json_dumps(value, separators, sort_keys):
    expected = outcome(json.dumps, value, ensure_ascii=True, separators=separators, sort_keys=sort_keys)
    assert outcome(jsoncodec.dumps, value, separators=separators, sort_keys=sort_keys) == expected


@settings(max_examples=400)
@given(values, st.sampled_from(["", " ", "\n", " \t\r\n"]), st.sampled_from(["", " ", "\n", "\r\n\t "]))
def test_loads_reads_what_json_wrote(value, before, after):
    text = before + json.dumps(value) + after
    agree(text)
    agree(text.encode())


def _damaged(draw_text: str, cut: int, junk: str) -> str:
    return draw_text[:cut] + junk + draw_text[cut:]


@settings(max_examples=400)
@given(values, st.integers(min_value=0, max_value=40),
       st.sampled_from(["", "x", ",", "}", "]", '"', "\\", "\x00", "\ufeff", "1", " 2", "\n{}", "NaN", "-", "tru"]))
def test_loads_refuses_what_json_refuses_in_its_words(value, cut, junk):
    agree(_damaged(json.dumps(value), cut, junk))


def test_the_odd_inputs_json_knows():
    for text in ["", "  ", "\ufeff{}", "[1,]", '{"a" 1}', '"\x01"', "1 2", "[" * 100_000, "Infinity", "-Infinity",
                 b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00", b'{"a": "\xc3\xa9"}', b"\xc3", bytearray(b"[1]"), 12, None]:
        agree(text)
    nan = jsoncodec.loads("NaN")  # one NaN, as json's: values read twice compare equal
    assert jsoncodec.loads('[NaN]')[0] is nan and jsoncodec.scanner()('NaN', 0)[0] is nan
    circular: list = []
    circular.append(circular)
    assert outcome(jsoncodec.dumps, circular) == outcome(json.dumps, circular)
    assert outcome(jsoncodec.dumps, {1j: 1}) == outcome(json.dumps, {1j: 1})
    assert outcome(jsoncodec.dumps, [object()])[1][0] is TypeError
    assert outcome(jsoncodec.dumps, [object()]) == outcome(json.dumps, [object()])


def test_it_does_not_import_json_or_re_until_asked_to_refuse():
    """A real process: which modules it imports is tested (this one has the test runner's)."""
    code = ("import sys; from storm_queue.core import jsoncodec as j\n"
            "assert j.loads(j.dumps({'a': [1, 2.5, None, 'x\\u00e9\\n']})) == {'a': [1, 2.5, None, 'x\\u00e9\\n']}\n"
            "assert j.loads(b' [true] ') == [True]\n"
            "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))\n"
            "try:\n    j.loads('{')\nexcept ValueError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out == "[]\nJSONDecodeError Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\n"
