"""Unit tests of storm_queue.core.names: the allow-list and the escaping of outside text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from storm_queue.core import names


@pytest.mark.parametrize("text", ["a", "A.b_c-1", "0", "9lives", "x" * 200, "a.b.c", "lane-7_rc.2"])
def test_is_name_accepts(text):
    assert names.is_name(text)


@pytest.mark.parametrize(
    "text",
    [
        "", "../x", "a*", "x;y", "-a", ".hidden", "_a", "a..b", "a/b", "a b", "a\nb", "a\n",
        "x" * 201, "é", "a$", "a`b`", "a\x00", "٣", "a\u2028",
    ],
)
def test_is_name_refuses(text):
    assert not names.is_name(text)


def test_is_name_length_boundary():
    assert names.is_name("a" * names.MAX_NAME)
    assert names.MAX_NAME == 200
    assert not names.is_name("a" * 201)


@pytest.mark.parametrize("text", ["-", "0123", "0", "26", "1" * 20])
def test_is_issue_accepts(text):
    assert names.is_issue(text)


@pytest.mark.parametrize("text", ["", "٣", "²", "12a", "--", "-1", "+1", "1.0", " 1", "1\n", "１", "x"])
def test_is_issue_refuses(text):
    assert not names.is_issue(text)


@pytest.mark.parametrize(
    "text, why",
    [("", "empty"), ("x" * 201, "longer than 200"), ("a..b", "'..'"), ("a*", "letters, digits")],
)
def test_why_not_name_says_why(text, why):
    assert not names.is_name(text)
    assert why in names.why_not_name(text)


@pytest.mark.parametrize(
    "raw, escaped",
    [
        ("a\nb", "a\\x0ab"),
        ("a\rb", "a\\x0db"),
        ("a\x1b[31mb", "a\\x1b[31mb"),
        ("a\u2028b", "a\\u2028b"),
        ("a\u0085b", "a\\x85b"),
        ("a\\b", "a\\\\b"),
        ("tab\there", "tab\\x09here"),
        ("\U000e0001", "\\U000e0001"),
    ],
)
def test_escape_makes_control_characters_visible(raw, escaped):
    out = names.escape(raw)
    assert out == escaped
    assert out.isprintable()
    assert "\n" not in out and "\r" not in out


def test_escape_leaves_printable_text_alone():
    assert names.escape("plain words, émoji ✓") == "plain words, émoji ✓"


def test_escape_backslash_cannot_forge_an_escape():
    # A literal backslash-x in the input must not look like an escaped newline.
    assert names.escape("\\x0a") != names.escape("\n")
    assert names.escape("\\x0a") == "\\\\x0a"


@pytest.mark.parametrize(
    "raw",
    ["", "x", "a\nb", "\r\n", "\x1b]0;title\x07", "\u2028\u2029\u0085", "\\", '"', "\udcff", "a\x00b", "\x7f"],
)
def test_escape_and_quote_are_always_printable_one_line(raw):
    for out in (names.escape(raw), names.quote(raw)):
        assert out.isprintable()
        assert out.splitlines() == [out] or out == ""


def test_quote_wraps_and_escapes_double_quotes():
    assert names.quote('say "hi"\n') == '"say \\"hi\\"\\x0a"'
    q = names.quote('x" injected')
    # The only unescaped quotes are the two delimiters.
    inner = q[1:-1]
    assert q[0] == q[-1] == '"'
    assert all(inner[i - 1] == "\\" for i, ch in enumerate(inner) if ch == '"')


def test_as_text_passes_valid_text_through():
    assert names.as_text("bump é ✓") == "bump é ✓"


def test_as_text_turns_surrogate_escapes_into_visible_bytes():
    raw = b"ok\xff\xfe-\xc3\xa9"  # invalid bytes then valid UTF-8 (é)
    arg = raw.decode("utf-8", "surrogateescape")
    out = names.as_text(arg)
    assert out == "ok\\xff\\xfe-é"
    out.encode("utf-8")  # storable
    assert names.escape(out).isprintable()


# The allow-list is written with string methods (a compiled pattern costs
# every command's start-up); it is exactly the pattern it stands for.
TRICKY = st.sampled_from(list("aZz09._-/ \n\t\x00\x1cé٣²１\u2028,*"))


@given(st.text(TRICKY | st.characters(), max_size=12))
def test_is_name_is_exactly_its_pattern(text):
    expected = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text, re.ASCII) is not None and ".." not in text
    assert names.is_name(text) == expected
    assert not names.is_name("a" * (names.MAX_NAME + 1 - len(text)) + text)  # too long, whatever it holds


@given(st.text(TRICKY | st.characters(), max_size=12))
def test_is_issue_is_exactly_its_pattern(text):
    assert names.is_issue(text) == (text == "-" or re.fullmatch(r"[0-9]+", text, re.ASCII) is not None)


@pytest.mark.parametrize("arg, stored", [("\ud800", "\\ud800"), ("a\udfffb", "a\\udfffb"),
                                         ("\ud83d\ude00", "\\ud83d\\ude00"), ("\udcff\ud800", "\\udcff\\ud800")])
def test_as_text_makes_any_other_lone_surrogate_visible(arg, stored):
    """A Python caller's text may hold a surrogate no byte stands for (a
    JSON "\\ud800" decoded, a pair split in two): it raised
    UnicodeEncodeError from every request on a directory storm."""
    assert names.as_text(arg) == stored
    stored.encode("utf-8")


@pytest.mark.parametrize("arg", [5, 1.5, True, b"a", ["a"], {"a": 1}])
def test_as_text_refuses_what_is_not_text_with_a_type_error(arg):
    with pytest.raises(TypeError, match=f"expected text \\(a str\\), not {type(arg).__name__}"):
        names.as_text(arg)


def test_a_python_caller_passing_no_text_gets_a_type_error_and_nothing_is_recorded(tmp_path):
    from storm_queue import Storm
    from tests.conftest import make_storm

    make_storm(tmp_path / "s", "a 1\n")
    storm = Storm.find(str(tmp_path / "s"), env={})
    log = tmp_path / "s" / "priority.log"
    before = log.read_bytes() if log.exists() else None
    for call in (lambda: storm.bump(5), lambda: storm.bump("a", reason=b"why"), lambda: storm.claim(holder=7),
                 lambda: storm.finish("a", 1, result=1), lambda: storm.push("b", 2)):
        with pytest.raises(TypeError, match="expected text"):
            call()
    assert (log.read_bytes() if log.exists() else None) == before


def _whole(n: int) -> str:
    """``str(n)`` with str's digit limit lifted for the call."""
    import sys

    was = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return str(n)
    finally:
        sys.set_int_max_str_digits(was)


@given(st.integers(0, 5200).flatmap(lambda d: st.integers(10 ** max(d - 1, 0), 10**d))
       .flatmap(lambda n: st.sampled_from([n, -n])))
def test_figure_writes_any_int_whole_or_as_its_first_digits_and_length(n):
    """``str`` raised ValueError past 4,300 digits (a caller's token, TTL or
    wait in a message); ``figure`` writes every int: whole as ``str`` does
    up to ``FIGURE_DIGITS`` digits, else its first ten and its length."""
    whole = _whole(n)
    digits = whole.lstrip("-")
    if len(digits) <= names.FIGURE_DIGITS:
        assert names.figure(n) == whole
    else:
        assert names.figure(n) == f"{whole[:len(whole) - len(digits)]}{digits[:10]}...({len(digits):,} digits)"


def test_figure_under_a_lower_limit_of_str_still_writes():
    import sys

    was = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        assert names.figure(10**700) == "1000000000...(701 digits)" and names.figure(True) == "True"
    finally:
        sys.set_int_max_str_digits(was)


def test_a_fingerprint_of_an_argument_json_cannot_write():
    """A key's fingerprint of a request whose argument JSON cannot write
    (a ``Decimal`` token, an int of more than 4,300 digits) is a
    fingerprint, the same for the same arguments, not the encoder's
    TypeError or ValueError; one JSON can write is as it always was."""
    from decimal import Decimal

    from storm_queue.core.framing import sha256
    from storm_queue.core.outcome import Request

    def asked(token):
        return Request("renew", "a", None, None, "k", (token, None))

    assert asked(1).fingerprint() == sha256(b'["renew", "a", null, null, [1, null]]').hexdigest()[:32]
    assert asked(Decimal(1)).fingerprint() == asked(Decimal(1)).fingerprint() != asked(Decimal(2)).fingerprint()
    assert asked(10**5000).fingerprint() == asked(10**5000).fingerprint() != asked(-10**5000).fingerprint()
    assert len({asked(t).fingerprint() for t in (1, "1", Decimal(1), 10**5000, [1], object())}) == 6
