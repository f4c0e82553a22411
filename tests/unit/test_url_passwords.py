"""A storm URL's passwords as ``roots`` hides them: ``shown`` (what is
printed), ``without_password`` (what is recorded), ``hide`` (any message),
checked against libpq's own reading of the same URLs."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import conninfo

from storm_queue import roots


#: passwords of any characters, behind a prefix no other part of the URLs holds
passwords = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(lambda c: c != "\x00"),
                    max_size=24).map(lambda tail: "sEcR" + tail)


def url_forms(pw: str) -> list[str]:
    """The forms libpq accepts a password in, as a user would write them."""
    enc = quote(pw, safe="")
    return [f"postgresql://op:{enc}@db.example:5432/storm",
            f"postgresql://op@db.example/storm?password={enc}",
            f"postgresql://op@/storm?host=/tmp/sock&password={enc}&sslmode=disable",
            f"postgresql://op:{enc}@db.example/storm?sslpassword={enc}",
            f"postgres://op@db.example/storm?PassWord={enc}"]


@given(passwords)
@settings(max_examples=200, deadline=None)
def test_no_form_of_a_password_survives_shown_without_password_or_hide(pw):
    for url in url_forms(pw):
        enc = quote(pw, safe="")
        for text in (roots.shown(url), roots.without_password(url),
                     roots.hide(f"could not connect to {url}: password {pw!s} for {enc} refused", url, {})):
            assert "sEcR" not in text, (url, text)  # no part of it, written or encoded


@given(passwords)
@settings(max_examples=100, deadline=None)
def test_what_is_recorded_is_the_same_connection_without_the_password(pw):
    for url in url_forms(pw)[:4]:  # libpq refuses PassWord= (a parameter it does not know)
        given_info = conninfo.conninfo_to_dict(url)
        kept = conninfo.conninfo_to_dict(roots.without_password(url))
        assert "password" not in kept and "sslpassword" not in kept
        assert kept == {k: v for k, v in given_info.items() if k not in ("password", "sslpassword")}


def test_shown_keeps_everything_but_the_password():
    assert roots.shown("postgresql://op:pw@db:5432/storm?sslmode=verify-full") == \
        "postgresql://op:***@db:5432/storm?sslmode=verify-full"
    assert roots.shown("postgresql://op@/storm?host=/tmp/s&password=pw&port=5432") == \
        "postgresql://op@/storm?host=/tmp/s&password=***&port=5432"
    assert roots.shown("postgresql://op@db/storm?PASSWORD=pw") == "postgresql://op@db/storm?PASSWORD=***"
    assert roots.shown("postgresql://db/storm") == "postgresql://db/storm"
    assert roots.shown("postgresql://op:@db/storm") == "postgresql://op:***@db/storm"
    # libpq stops the userinfo at the first "@"; the mask takes up to the last one, never less
    assert "p@ss" not in roots.shown("postgresql://op:p@ss@db/storm")


def test_without_password_drops_the_password_and_keeps_the_rest():
    assert roots.without_password("postgresql://op:pw@db:5432/storm?sslmode=require") == \
        "postgresql://op@db:5432/storm?sslmode=require"
    assert roots.without_password("postgresql://op@db/storm?password=pw") == "postgresql://op@db/storm"
    assert roots.without_password("postgresql://op@/s?host=/tmp&Password=pw&port=1") == "postgresql://op@/s?host=/tmp&port=1"


def test_hide_masks_pgpassword_and_every_url_the_process_was_given(monkeypatch):
    monkeypatch.setattr(roots, "SEEN", [])
    url = "postgresql://op:first-secret@db/storm"
    assert roots.find_root(url, {}) == url
    said = roots.hide(f"FATAL: no such host in {url}; PGPASSWORD env-secret", env={"PGPASSWORD": "env-secret"})
    assert "first-secret" not in said and "env-secret" not in said
    assert "postgresql://op:***@db/storm" in said
    monkeypatch.setenv("PGPASSWORD", "from-the-environment")
    assert roots.hide("the password from-the-environment failed") == "the password *** failed"
