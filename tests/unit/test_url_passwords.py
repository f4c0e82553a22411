"""A storm root's passwords as ``core.passwords`` finds them by their
position (issue 33, item 9): ``shown`` (what is printed) masks exactly the
password, whatever its characters, in every form a user writes one (a
URL's userinfo and query, percent-encoded or not, a mistyped scheme, a
libpq keyword/value string, quoted or not), and leaves the rest of the
root as written; ``without_password`` (what is recorded) is the same
connection to libpq, less the password; ``connect.readable`` refuses a
URL whose password libpq would read elsewhere, saying so masked."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from storm_queue import roots
from storm_queue.core import passwords
from storm_queue.core.errors import NoStorm
from storm_queue.store.postgres.driver import conninfo

#: the characters that break a URL or a keyword/value string, and quotes
SPECIAL = "@/:?&=%'\"\\# \t"
#: passwords of any characters (the special ones often), behind a prefix no other part of a root holds
any_password = st.text(st.one_of(st.sampled_from(SPECIAL), st.characters(codec="utf-8", exclude_categories=("Cs",))
                                 .filter(lambda c: c != "\x00")), max_size=24).map(lambda tail: "sEcR" + tail)


def kv_quoted(pw: str) -> str:
    return "'" + pw.replace("\\", "\\\\").replace("'", "\\'") + "'"


def position_forms(pw: str) -> list[tuple[str, str, str]]:
    """(before, the password as written, after): every form a root carries
    a password in, as a user writes it, well or badly."""
    enc = quote(pw, safe="")
    return [
        ("postgresql://op:", enc, "@db.example:5432/storm?sslmode=disable"),  # userinfo, percent-encoded
        ("postgresql://op:", pw, "@db.example:5432/storm?sslmode=disable"),  # userinfo, as typed
        ("postgres://op:", pw, "@db.example/storm"),
        ("postgresql://op@db.example/storm?sslmode=disable&password=", enc, "&application_name=sq"),  # query
        ("postgresql://op@db.example/storm?sslmode=disable&password=", pw, "&application_name=sq"),
        ("postgresql://op@/storm?host=/tmp/sock&PassWord=", pw, ""),
        ("postgresql://op@db.example/storm?sslpassword=", enc, ""),
        ("postgresql:/op:", pw, "@db.example/storm"),  # mistyped schemes
        ("postgresql//op:", pw, "@db.example/storm"),
        ("postgresql:op:", pw, "@db.example/storm"),
        ("op:", pw, "@db.example/storm"),  # no scheme at all
        ("host=db.example port=5432 password=", kv_quoted(pw), " dbname=storm"),  # keyword/value, quoted
        # keyword/value, as typed (white space ends an unquoted value: the password's own at its end is not its)
        ("host=db.example password=", pw.rstrip(), "   dbname=storm user=op"),
        ("host=/tmp sslpassword=", kv_quoted(pw), ""),
    ]


@given(any_password)
@settings(max_examples=300, deadline=None)
@example("sEcR@/:?&=%'\"")
@example("sEcR p@ss/w?rd&x=1")
@example("sEcR%zz")
def test_shown_masks_the_whole_password_by_its_position_in_every_form(pw):
    for before, written, after in position_forms(pw):
        root = before + written + after
        assert passwords.shown(root) == before + "***" + after, root  # nothing of it, the rest as written
        assert roots.shown(root) == before + "***" + after


@given(any_password, any_password)
@settings(max_examples=100, deadline=None)
def test_two_passwords_in_one_url_are_each_masked(pw, other):
    url = f"postgresql://op:{quote(pw, safe='')}@db/storm?password={quote(other, safe='')}&sslmode=disable"
    assert passwords.shown(url) == "postgresql://op:***@db/storm?password=***&sslmode=disable"


@given(any_password)
@settings(max_examples=100, deadline=None)
def test_a_message_quoting_the_url_shows_it_masked(pw):
    url = f"postgresql://op:{quote(pw, safe='')}@db.example/storm"
    said = roots.hide(f"could not connect to {url}: no such host", url)
    assert said == "could not connect to postgresql://op:***@db.example/storm: no such host"


def test_a_short_password_masks_only_itself():
    """Never by searching for its text: a password of one letter, or one
    that is also the host's name, masks its own place and nothing else."""
    assert roots.shown("postgresql://op:o@db/storm") == "postgresql://op:***@db/storm"
    assert roots.shown("postgresql://db:db@db/db?password=db") == "postgresql://db:***@db/db?password=***"
    assert roots.hide("storm root postgresql://op:o@db/storm: role op is unknown", "postgresql://op:o@db/storm") == \
        "storm root postgresql://op:***@db/storm: role op is unknown"


@given(any_password)
@settings(max_examples=100, deadline=None)
def test_what_is_recorded_is_the_same_connection_without_the_password(pw):
    enc = quote(pw, safe="")
    for url in (f"postgresql://op:{enc}@db.example:5432/storm", f"postgresql://op@db.example/storm?password={enc}",
                f"postgresql://op@/storm?host=/tmp/sock&password={enc}&sslmode=disable",
                f"postgresql://op:{enc}@db.example/storm?sslpassword={enc}"):
        given_info = conninfo(url)
        kept = conninfo(roots.without_password(url))
        assert "password" not in kept and "sslpassword" not in kept
        assert kept == {k: v for k, v in given_info.items() if k not in ("password", "sslpassword")}
    keywords = f"host=db.example password={kv_quoted(pw)} dbname=storm"
    assert "sEcR" not in roots.without_password(keywords)
    assert conninfo(roots.without_password(keywords)) == {"host": "db.example", "dbname": "storm"}


@given(any_password)
@settings(max_examples=200, deadline=None)
@example("sEcR/x")
@example("sEcR@x")
@example("sEcR&x")
@example("sEcR%80")  # percent-encoded, not UTF-8 once decoded: refused, not a traceback
def test_libpq_reads_the_password_where_it_is_masked_or_the_url_is_refused_masked(pw):
    """A password as typed into a URL: either libpq reads that password
    (and nothing of it as the host, port or database), or the URL is
    refused (exit 2) with no part of the password in the words."""
    from storm_queue.store.postgres.connect import readable

    for before, written, after in position_forms(pw)[:6]:
        url = before + written + after
        try:
            read = readable(url)
        except NoStorm as exc:
            assert exc.exit_code == 2
            assert "sEcR" not in str(exc) and before.split("//")[1][:2] in str(exc), str(exc)
        else:
            assert unquote(written) in (read.get("password"), read.get("sslpassword")), (url, read)
            assert all("sEcR" not in v for k, v in read.items() if k not in ("password", "sslpassword")), read


@pytest.mark.parametrize("root", ["host=/tmp password=pw dbname=x", "postgresql:/op:pw@db/x", "postgresql//op:pw@db",
                                  "op:pw@db/x", "/no/such/dir/x", "pgdata//x"])
def test_readable_refuses_anything_but_a_url_with_the_password_masked(root):
    from storm_queue.store.postgres.connect import readable

    with pytest.raises(NoStorm) as refused:
        readable(root)
    assert ":pw@" not in str(refused.value) and "=pw " not in str(refused.value)


def test_libpqs_words_on_a_url_it_cannot_read_are_one_line():
    from storm_queue.store.postgres.connect import readable

    with pytest.raises(NoStorm) as refused:
        readable("postgresql://op@[::1/x")
    assert 'in URI: "postgresql://op@[::1/x"; if it carries a password' in str(refused.value)


def test_the_forms_of_a_root():
    form = passwords.form
    assert [form(r) for r in ("postgresql://db/x", "postgres://db/x")] == [passwords.URL] * 2
    assert [form(r) for r in ("postgresql:/db/x", "postgresql//db/x", "postgres:db", "pg://x", "op:pw@db/x",
                              "POSTGRESQL://db/x")] == [passwords.MISTYPED] * 6
    assert [form(r) for r in ("host=/tmp dbname=x", " dbname = x", "password=x")] == [passwords.KEYWORDS] * 3
    assert [form(r) for r in ("storms/first", "/srv/storm", "pgdata//x", "a=b", "a:b", "C:/x")] == [passwords.PATH] * 6


def test_a_keyword_string_becomes_the_url_it_means_without_its_password():
    assert passwords.as_url("host=/tmp port=5433 password='x y' dbname=storm user=op sslmode=disable") == \
        "postgresql://op@/storm?host=%2Ftmp&port=5433&sslmode=disable"
    assert passwords.as_url("host=db.example port=5433 dbname=st user=op") == "postgresql://op@db.example:5433/st"
    url = passwords.as_url("host=db.example port=5433 password=pw dbname=s user=op application_name='a b'")
    assert conninfo(url) == {"host": "db.example", "port": "5433", "dbname": "s", "user": "op",
                                              "application_name": "a b"}


def test_libpqs_words_keep_only_what_the_masked_root_shows():
    url = "postgresql://op@db/x?password=a%zzb&sslmode=on"
    assert passwords.kept_words('invalid percent-encoded token: "a%zzb"', url) == 'invalid percent-encoded token: "..."'
    assert passwords.kept_words(f'bad URI "{url}": separator "="', url) == \
        'bad URI "postgresql://op@db/x?password=***&sslmode=on": separator "="'


def test_hide_shows_every_url_the_process_was_given_masked(monkeypatch):
    monkeypatch.setattr(roots, "SEEN", [])
    url = "postgresql://op:first-secret@db/storm"
    assert roots.find_root(url, {}) == url
    said = roots.hide(f"FATAL: no such host in {url}")
    assert said == "FATAL: no such host in postgresql://op:***@db/storm"


#: (a root that is slightly malformed, as it must be shown): a query whose first parameter libpq does not know,
#: a second "?", a percent-encoded "=", a URL nested in a parameter, no scheme, a misspelled first keyword
MALFORMED = [
    ("postgresql://u@db.example/storm?sslmod=require&password=S3cret",
     "postgresql://u@db.example/storm?sslmod=require&password=***"),
    ("postgresql://u@db.example/storm?sslmode=require?password=S3cret",
     "postgresql://u@db.example/storm?sslmode=require?password=***"),
    ("postgresql://u@db.example/storm?x&password=S3cret", "postgresql://u@db.example/storm?x&password=***"),
    ("postgresql://u@db.example/storm?=x&password=S3cret", "postgresql://u@db.example/storm?=x&password=***"),
    ("postgresql://u@db.example/storm?password%3DS3cret", "postgresql://u@db.example/storm?password%3D***"),
    ("postgresql://u@db.example/storm?pass%77ord=S3cret", "postgresql://u@db.example/storm?pass%77ord=***"),
    ("postgresql://u@db.example/storm?dbname=postgresql://u:S3cret@h/d",
     "postgresql://u@db.example/storm?dbname=postgresql://u:***@h/d"),
    ("u@h/db?password=S3cret", "u@h/db?password=***"),
    ("/srv/storm?password%3DS3cret", "/srv/storm?password%3D***"),
    ("hostt=h dbname=d password=S3cret", "hostt=h dbname=d password=***"),
    ("hostt=h sslpassword='S3 cret' dbname=d", "hostt=h sslpassword=*** dbname=d"),
]


@pytest.mark.parametrize("root, masked", MALFORMED)
def test_a_slightly_malformed_roots_password_is_masked_and_the_rest_shown(root, masked):
    assert passwords.shown(root) == masked
    assert roots.shown(root) == masked
    assert passwords.hidden(root) == masked
    assert "S3" not in roots.without_password(root)


@pytest.mark.parametrize("text, masked", [
    ("Got unexpected extra argument (postgresql://u:S3cret@db.example/storm)",
     "Got unexpected extra argument (postgresql://u:***@db.example/storm)"),
    ("No such command 'postgres://u:S3cret@h/d'.", "No such command 'postgres://u:***@h/d'."),
    ("--from postgresql://u:S3cret@h/d: cannot read it", "--from postgresql://u:***@h/d: cannot read it"),
    ("moved by op:S3cret@db/x today", "moved by op:***@db/x today"),
    ("note: the host is a@b", "note: the host is a@b"),  # "note:" is a word, not a user
    ("rotate ?password=S3cret now", "rotate ?password=*** now"),
    ("keys host=h password=S3cret", "keys host=h password=***"),
    ("nothing secret here", "nothing secret here"),
] + MALFORMED)
def test_free_text_has_each_password_masked_wherever_it_sits(text, masked):
    assert passwords.hidden(text) == masked


@given(any_password)
@settings(max_examples=100, deadline=None)
def test_free_text_quoting_a_root_never_shows_its_password(pw):
    """As click quotes an argument (in brackets, or as Python's repr); a
    ``user:password@host`` without a scheme is one word in free text."""
    for before, written, after in position_forms(pw):
        root = before + (written.split()[0] if before == "op:" and written.split() else written) + after
        for text in (f"Got unexpected extra argument ({root})", f"No such command {root!r}."):
            assert "sEcR" not in passwords.hidden(text), text
