"""A boundary that holds (issue 30, store/postgres/sql/): what the schema
itself promises, asked of the catalog and tried as each role would.

- every function the storm defines resolves its names in pg_catalog alone
  (a fixed search_path, or an SQL-standard body bound when it was made),
  and none is PUBLIC's to execute (items 1, 4);
- the storm's lock is a table lock only the operator may take: a runner,
  a reader and a stranger cannot, and the advisory keys of earlier
  versions no longer stop a write (item 5);
- ``grant runner`` bounds the role's transactions (or says the statement a
  role that may must run), and ``doctor`` names what is left unbounded, a
  session holding the lock, and a schema others may create in on the
  operator's search_path (items 4, 5);
- a runner request is timed by the server's clock, moved only by the
  operator's table (item 3)."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.postgresql


def ok(url: str, *args: str) -> dict:
    done = run_cli(url, *args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def dbname(url: str) -> str:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    return conninfo_to_dict(url)["dbname"]


def operator_of(url: str) -> str:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    return conninfo_to_dict(url)["user"]


def doctor(url: str) -> tuple[int, list[dict]]:
    done = run_cli(url, "doctor", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)["findings"]


@pytest.fixture
def db(pg_url: str, tmp_path) -> str:
    assert run_cli(None, "init", pg_url).returncode == 0
    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nttl_min = 1\nslots = 2\nunattended = true\n")
    for args in (("add", "a", "1"), ("add", "b", "2"), ("declare", str(toml))):
        ok(pg_url, *args)
    return pg_url


@pytest.fixture
def runner(pg_server, db, pg_role) -> str:
    """The URL of a role the operator granted as a runner."""
    role = pg_role(prefix="runner")
    ok(db, "grant", "runner", role)
    return pg_server.url_as(db, role)


def test_every_storm_function_resolves_its_names_in_pg_catalog_and_none_is_public(pg_server, db) -> None:
    with pg_server.admin(dbname(db)) as conn:
        functions = conn.execute(
            "SELECT p.oid::regprocedure::text, p.proconfig, p.prosqlbody IS NOT NULL, p.proacl::text[] "
            "FROM pg_proc p WHERE p.pronamespace = 'storm_queue'::regnamespace ORDER BY 1").fetchall()
        assert len(functions) > 20
        for name, config, standard, acl in functions:
            if standard:  # bound when made: every object it names is pg_catalog's (unrecorded) or the storm's own
                deps = conn.execute(
                    "SELECT pg_describe_object(refclassid, refobjid, refobjsubid) FROM pg_depend "
                    "WHERE classid = 'pg_proc'::regclass AND objid = %s::regprocedure AND deptype = 'n'",
                    (name,)).fetchall()
                assert all(d.startswith(("schema storm_queue", "function storm_queue.")) for d, in deps), (name, deps)
            else:  # and what a runner calls, or a commit fires, reads its literals as written whatever the session's
                assert config in (["search_path=pg_catalog, pg_temp"],
                                  ["search_path=pg_catalog, pg_temp", "standard_conforming_strings=on"]), name
            assert acl is not None and not any(item.startswith("=") for item in acl), (name, acl)  # no PUBLIC
        operator = operator_of(db)
        default = conn.execute("SELECT defaclacl::text[] FROM pg_default_acl WHERE defaclrole = %s::regrole "
                               "AND defaclobjtype = 'f' AND defaclnamespace = 0", (operator,)).fetchone()
        assert default is not None and not any(item.startswith("=") for item in default[0]), default


def test_the_small_helpers_give_the_same_answer_under_any_search_path(pg_server, db, pg_role) -> None:
    """json_str, stamp and result_token carry a fixed search_path, as every
    server function does (issue 31, item 1: sql/functions/; they are no
    longer inlined, a cost bench/database.py measures): a schema first on
    the caller's path, holding functions and an operator that would shadow
    theirs, is not seen."""
    with pg_server.admin(dbname(db)) as conn:
        conn.execute("CREATE SCHEMA hostile")
        for sql in ("CREATE FUNCTION hostile.lpad(text, integer, text) RETURNS text LANGUAGE sql RETURN 'owned'",
                    "CREATE FUNCTION hostile.to_char(timestamp, text) RETURNS text LANGUAGE sql RETURN 'owned'",
                    "CREATE FUNCTION hostile.textcat(text, text) RETURNS text LANGUAGE sql RETURN 'owned'",
                    "CREATE OPERATOR hostile.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = hostile.textcat)",
                    "CREATE FUNCTION hostile.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql RETURN 'number'"):
            conn.execute(sql)
        asked = ("SELECT storm_queue.json_str('a\"b'), storm_queue.stamp(1800000000.5), "
                 "storm_queue.result_token('{\"token\": \"7\"}')")
        conn.execute("SET search_path = pg_catalog, public")
        expected = conn.execute(asked).fetchone()
        conn.execute("SET search_path = hostile, pg_catalog")
        assert conn.execute(asked).fetchone() == expected == ('"a\\"b"', "2027-01-15T08:00:00.500000Z", None)
        pinned = conn.execute("SELECT array_agg(p.proname ORDER BY p.proname) FROM pg_proc p "
                              "WHERE p.pronamespace = 'storm_queue'::regnamespace "
                              "AND p.proconfig = '{\"search_path=pg_catalog, pg_temp\"}' "
                              "AND p.proname IN ('json_str', 'stamp', 'result_token')").fetchone()[0]
        assert pinned == ["json_str", "result_token", "stamp"]


def test_a_runners_function_in_a_schema_on_the_operators_path_never_runs_as_the_operator(pg_server, db, runner,
                                                                                          tmp_path) -> None:
    """Issue 30, attack 3: where a runner may CREATE in a schema on the
    operator's search_path (public, before PostgreSQL 15), its
    ``public.nextval(text)`` would run as the operator in the row trigger
    of the next ``add`` and grant it every table. Now: the trigger and
    every function resolve in pg_catalog, storm-queue's own sessions fix
    their path, and a hand edit in a session that uses the path is safe
    too; doctor reports the schema as an error."""
    from storm_queue.store.postgres import driver

    role = operator_of(runner)
    with pg_server.admin(dbname(db)) as conn:
        conn.execute(f"GRANT CREATE ON SCHEMA public TO {role}")
    attack = ("CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN "
              f"EXECUTE 'GRANT ALL ON ALL TABLES IN SCHEMA storm_queue TO {role}'; "
              "RETURN pg_catalog.nextval($1::regclass); END $$")
    with driver.connect(runner) as conn:
        conn.execute(attack)
        conn.execute("CREATE FUNCTION public.convert_to(text, text) RETURNS bytea LANGUAGE plpgsql AS $$ BEGIN "
                     f"EXECUTE 'GRANT ALL ON ALL TABLES IN SCHEMA storm_queue TO {role}'; "
                     "RETURN pg_catalog.convert_to($1, $2::name); END $$")
    ok(db, "add", "c", "3")  # the row trigger's nextval, and the requests' own statements
    toml = tmp_path / "other.toml"
    toml.write_text("[runner]\nslots = 3\n")
    ok(db, "declare", str(toml))  # its statement converts text: convert_to(text, name) is pg_catalog's
    with driver.connect(db) as conn:  # the operator's hand edit, on the default search_path
        assert conn.execute("SHOW search_path").fetchone()[0] == '"$user", public'
        conn.execute("INSERT INTO storm_queue.lane (slug, issue) VALUES ('d', '4')")
    with pg_server.admin(dbname(db)) as conn:
        granted = conn.execute("SELECT count(*) FROM information_schema.role_table_grants "
                               "WHERE grantee = %s AND privilege_type <> 'SELECT'", (role,)).fetchone()[0]
    assert granted == 0
    rc, findings = doctor(db)
    exposed = [f for f in findings if f["code"] == "search_path_exposed"]
    assert rc == 1 and [(f["severity"], f["subject"]) for f in exposed] == [("error", "public")], findings
    assert role in exposed[0]["message"] and exposed[0]["fix"].startswith(f"REVOKE CREATE ON SCHEMA public FROM {role}")


def test_only_the_operator_may_take_the_storms_lock_and_the_old_advisory_keys_hold_nothing(pg_server, db, runner,
                                                                                           pg_role) -> None:
    """Issue 30, attack 6: any role that could connect held the storm's
    advisory lock and stopped every write. The lock is a table only its
    owner may lock in EXCLUSIVE MODE (a SELECT's ACCESS SHARE does not
    conflict with it)."""
    from storm_queue.store.postgres import driver
    from storm_queue.store.postgres.queries import lock_keys

    reader_role, stranger_role = pg_role(prefix="reader"), pg_role()
    ok(db, "grant", "reader", reader_role)
    with pg_server.admin() as conn:
        conn.execute(f"GRANT CONNECT ON DATABASE {dbname(db)} TO {stranger_role}")
    holders = []
    try:
        for url in (runner, pg_server.url_as(db, reader_role), pg_server.url_as(db, stranger_role)):
            conn = driver.connect(url)
            holders.append(conn)
            took = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", lock_keys()).fetchone()[0]
            assert took is (len(holders) == 1)  # the old keys: anyone may hold them (the first here does)
            conn.execute("BEGIN")
            for mode in ("EXCLUSIVE", "SHARE ROW EXCLUSIVE", "ROW SHARE"):
                with pytest.raises(driver.errors.InsufficientPrivilege):
                    conn.execute(f"LOCK TABLE storm_queue.lock IN {mode} MODE")
                conn.execute("ROLLBACK")
                conn.execute("BEGIN")
            if url != pg_server.url_as(db, stranger_role):
                conn.execute("SELECT * FROM storm_queue.lane")  # a reader's open transaction: ACCESS SHARE
        done = run_cli(db, "bump", "b", "--wait", "5")
        assert done.returncode == 0, done.stderr  # a lock they held would answer exit 5
    finally:
        for conn in holders:
            conn.close()


def test_grant_bounds_a_runners_transactions_or_says_what_a_role_that_may_must_run(pg_server, db, pg_role) -> None:
    operator = operator_of(db)

    def settings(role: str) -> list[str]:
        with pg_server.admin(dbname(db)) as conn:
            row = conn.execute("SELECT setconfig FROM pg_db_role_setting WHERE setrole = %s::regrole "
                               "AND setdatabase = (SELECT oid FROM pg_database WHERE datname = %s)",
                               (role, dbname(db))).fetchone()
        return sorted(row[0]) if row else []

    bare = pg_role(prefix="runner")
    done = ok(db, "grant", "runner", bare)
    assert done["outcome"] == "done" and done["recorded"] is True
    statements = [f'ALTER ROLE "{bare}" IN DATABASE "{dbname(db)}" SET idle_in_transaction_session_timeout = \'10s\';',
                  f'ALTER ROLE "{bare}" IN DATABASE "{dbname(db)}" SET lock_timeout = \'5s\';']
    assert done["message"].endswith(" ".join(statements)), done["message"]  # the operator may not: it says what to run
    assert settings(bare) == []
    rc, findings = doctor(db)
    assert [(f["severity"], f["code"], f["subject"]) for f in findings] == [("warning", "runner_unbounded", bare)]
    assert findings[0]["fix"].endswith(" ".join(statements))

    with pg_server.admin() as conn:
        conn.execute(f"ALTER ROLE {operator} CREATEROLE")
    bounded = pg_role(prefix="runner")
    done = ok(db, "grant", "runner", bounded)
    assert done["message"] == f"role {bounded} is a runner of the storm now", done["message"]
    assert settings(bounded) == ["idle_in_transaction_session_timeout=10s", "lock_timeout=5s"]
    ok(db, "revoke", "runner", bounded)
    assert settings(bounded) == []
    ok(db, "revoke", "runner", bare)
    assert doctor(db) == (0, [])


def test_doctor_names_a_session_holding_the_storms_lock_with_the_command_that_ends_it(pg_server, db) -> None:
    from storm_queue.store.postgres import driver

    holder = driver.connect(db)  # the operator's own session, in psql say
    try:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE")
        pid = holder.info.backend_pid
        time.sleep(5.2)
        rc, findings = doctor(db)
        held = [f for f in findings if f["code"] == "lock_held"]
        assert rc == 1 and [(f["severity"], f["subject"]) for f in held] == [("error", f"pid {pid}")], findings
        assert held[0]["fix"].endswith(f"SELECT pg_terminate_backend({pid})")
        assert operator_of(db) in held[0]["message"]
        with pg_server.admin() as conn:
            conn.execute(f"SELECT pg_terminate_backend({pid})")
    finally:
        holder.close()
    assert doctor(db) == (0, [])


def test_a_runner_request_is_timed_by_the_servers_clock_never_its_own(pg_server, db, runner) -> None:
    """Issue 30, attack 5: a clock ten years ahead passed to serve_claim
    expired every live lease. A runner passes no time: its process's
    clock is nothing to the server; the storm's clock (a table only the
    operator may write) is what a lease is judged by."""
    from storm_queue.store.postgres import driver
    from storm_queue import wall
    from storm_queue.service.storm import Storm

    held = ok(db, "claim", "--holder", "h1", "--ttl", "60")
    assert held["decision"] == "run a 1 1"
    was = wall.clock
    wall.clock = lambda: was() + 10 * 365 * 86400  # this process, ten years ahead
    try:
        storm = Storm.find(runner)
        try:
            out = storm.claim(holder="h2", ttl=60).check()
            assert out.decision == "run b 2 1", out.decision  # a's lease stands: the server's clock says so
            from storm_queue.core.clock import seconds

            assert abs(seconds(out.expires) - (time.time() + 60)) < 30  # the server's time, not the process's
        finally:
            storm.close()
    finally:
        wall.clock = was
    with driver.connect(runner) as conn:
        with pytest.raises(driver.errors.InsufficientPrivilege):
            conn.execute("UPDATE storm_queue.clock SET ahead = '10 years'")
        with pytest.raises(driver.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM storm_queue.clock")
    with driver.connect(db) as conn:  # the operator's (a test's) clock: the storm's time moves
        conn.execute("UPDATE storm_queue.clock SET ahead = '120 seconds'")
    taken = ok(runner, "claim", "--holder", "h3", "--ttl", "60")
    assert taken["decision"] == "run a 1 2", taken  # a's lease is past on the storm's clock, taken back
    rc, findings = doctor(db)
    assert ("warning", "clock_moved") in [(f["severity"], f["code"]) for f in findings], findings


# -- the server's twins of the Python rules it writes by (sql/functions/) ------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: text a request may carry to the server (no NUL, no lone surrogate: not_carried refuses those)
CARRIED = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
NAMEISH = st.one_of(CARRIED, st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,12}", fullmatch=True),
                    st.sampled_from(["a..b", "-a", ".hidden", "x" * 200, "x" * 201, "caf\u00e9", "a b", ""]))


@pytest.fixture(scope="module")
def server(pg_server):
    """A storm's database and a connection to it as its owner, for the module."""
    import secrets

    from storm_queue.store.postgres import driver
    from storm_queue.store.postgres.connect import create

    name = f"twins_{secrets.token_hex(4)}"
    pg_server.create_database(name, "postgres")
    url = pg_server.url(name, "postgres")
    create(url)
    conn = driver.connect(url)
    yield conn
    conn.close()
    pg_server.drop_database(name)


QUICK = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@QUICK
@given(text=st.one_of(CARRIED, st.sampled_from(["\u00a0", "\u2028", "\x7f", "\U0001f600", "\u0378", "\ue000", "a\\\"b",
                                                "\U000e0001", "\u061c"])))
def test_the_servers_quoting_is_core_names_quote(server, text) -> None:
    from storm_queue.core.names import quote

    assert server.execute("SELECT storm_queue.quoted(%s::text)", (text,)).fetchone()[0] == quote(text)


@QUICK
@given(text=NAMEISH)
def test_the_servers_names_are_core_names(server, text) -> None:
    from storm_queue.core.names import is_name, why_not_name

    got = server.execute("SELECT storm_queue.is_name(%s::text), storm_queue.why_not_name(%s::text)", (text, text)).fetchone()
    assert got[0] is is_name(text)
    if not is_name(text):
        assert got[1] == why_not_name(text)


@QUICK
@given(verb=st.sampled_from(["claim", "renew", "finish", "release", "recover"]), slug=st.one_of(st.none(), NAMEISH),
       reason=st.one_of(st.none(), CARRIED), source=st.one_of(st.none(), NAMEISH),
       args=st.lists(st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), CARRIED), max_size=3))
def test_the_servers_fingerprint_is_core_outcomes(server, verb, slug, reason, source, args) -> None:
    """The server computes a request's fingerprint (its key's proof) as
    ``Request.fingerprint`` does: the JSON of the request as core/jsoncodec
    writes it, hashed."""
    from storm_queue.core.jsoncodec import dumps
    from storm_queue.core.outcome import Request

    items = ", ".join(dumps(a) for a in args)
    got = server.execute("SELECT storm_queue.fingerprint(%s::text, %s::text, %s::text, %s::text, %s::text)",
                         (verb, slug, reason, source, items)).fetchone()[0]
    assert got == Request(verb, slug, reason, source, None, tuple(args)).fingerprint()


def test_the_servers_unprintable_table_is_this_pythons(server) -> None:
    """unprintable.txt (what init fills storm_queue.unprintable from) is
    this Python's str.isprintable, when this Python's Unicode is the
    file's; another Python's differs only on characters assigned between
    the two versions (those it calls printable that the file does not)."""
    import unicodedata

    from storm_queue.store.postgres.unicode import computed, kept

    version, ranges = kept()
    assert server.execute("SELECT array_agg(ARRAY[lo, hi] ORDER BY lo) FROM storm_queue.unprintable").fetchone()[0] == \
        [list(r) for r in ranges]
    if version == unicodedata.unidata_version:
        assert computed() == ranges
    else:  # a newer Unicode assigns characters the file left unassigned: only those may differ
        unprintable = {c for lo, hi in ranges for c in range(lo, hi + 1)}
        mine = {c for lo, hi in computed() for c in range(lo, hi + 1)}
        assert mine <= unprintable and all(unicodedata.category(chr(c)) != "Cn" for c in unprintable - mine)


#: a value of every kind a line's field may be given, of the right kind or not
VALUE = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([2**60, 1.5, 1.0]), st.just("a"),
                  st.just("../x"), st.just("ok"), st.just("2026-12-02T00:00:00.000000Z"),
                  st.lists(st.sampled_from(["a", "b", "../c"]), max_size=2), st.just({"x": 1}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=st.sampled_from(["claim", "renew", "finish", "expire", "recover", "release", "refused", "push", "bump",
                               "settle", "adopt", "upgrade", "quarantine", "schedule", "cancel", "halt", "nosuch"]),
       fields=st.dictionaries(st.sampled_from(["slug", "issue", "holder", "token", "ttl", "expires", "attempt", "result",
                                               "note", "reason", "key", "requested", "code", "message", "authorised",
                                               "deps", "moved", "removed", "appended", "ledger", "marker", "lane",
                                               "from", "to", "rederived", "attempts", "budget", "not_before", "noop"]),
                              VALUE, max_size=9),
       drop=st.sampled_from([None, "v", "seq", "at", "by", "prev"]))
def test_a_line_the_insert_check_admits_the_python_decoder_reads(server, action, fields, drop) -> None:
    """The insert check (line_refusal) admits no line framing.decode would
    refuse: random lines, of every action and none, their fields of the
    right kind or not."""
    from storm_queue.core.framing import Malformed, decode, encode

    event = {"v": 1, "seq": 5, "at": "2026-12-02T00:00:00.000000Z", "action": action, "by": "operator:op",
             "prev": "0" * 64, **fields}
    if drop:
        del event[drop]
    line = encode(event)
    why = server.execute("SELECT storm_queue.line_refusal(%s::bytea, 5, %s)", (line, "0" * 64)).fetchone()[0]
    if why is None:
        decode(line)  # never Malformed
    else:
        try:
            decode(line)
        except Malformed:
            pass  # refused by both; else the check is stricter than the decoder (its ints, its stamps, its principals)


def test_the_line_table_of_the_insert_check_is_framings(server) -> None:
    """storm_queue.line_field holds core/framing.py's SCHEMA, OPTIONAL,
    OPTIONAL_OF and NAMED: a field added there must be added here."""
    from storm_queue.core import framing

    rows = set(server.execute("SELECT action, field, kind, need, named FROM storm_queue.line_field").fetchall())
    expected = {("*", f, k, "required", False) for f, k in framing._COMMON.items()}
    expected |= {("*", f, k, "optional", False) for f, k in framing.OPTIONAL.items()}
    for action, fields in framing.SCHEMA.items():
        named = framing.NAMED.get(action, ("slug",)) if action not in ("refused", "reset", "repair") else ()
        expected |= {(action, f, k, "required", f in named) for f, k in fields.items()}
        expected |= {(action, f, k, "optional", f in named) for f, k in framing.OPTIONAL_OF.get(action, {}).items()}
    assert rows == expected, rows ^ expected


#: lines as the serving functions and the operator's request path write them, each admitted by the quick yes
PLAIN = [
    {"action": "claim", "slug": "l1", "issue": "1", "holder": "vm-1", "token": 3, "ttl": 600,
     "expires": "2026-12-05T11:01:33.164631Z", "attempt": 1, "key": "k/then-claim", "fingerprint": "ab" * 16},
    {"action": "finish", "slug": "l1", "token": 3, "result": "ok", "key": "k", "fingerprint": "ab" * 16},
    {"action": "finish", "slug": "l1", "token": 3, "result": "failed", "note": "ValueError", "reason": "it broke"},
    {"action": "renew", "slug": "l1", "token": 3, "ttl": 600, "expires": "2026-12-05T11:01:33.164631Z"},
    {"action": "release", "slug": "l1", "token": 3, "holder": "vm-1"},
    {"action": "expire", "slug": "l1", "token": 3, "expired": "2026-12-05T11:01:33.164631Z"},
    {"action": "refused", "requested": "finish", "slug": "l1", "code": "stale_fence",
     "message": "l1 holds no lease; a runner that lost its lease may not finish the lane: stop its work and claim again",
     "authorised": True},
    {"action": "refused", "requested": "claim", "slug": None, "code": "not_operator", "message": "no", "authorised": False},
    {"action": "push", "slug": "a", "issue": "7", "deps": ["b", "c"], "moved": [], "removed": [], "appended": True},
]


def refusal_and_quick_yes(server, line: bytes) -> tuple[str | None, bool]:
    """line_refusal's and line_admitted's verdicts on ``line`` as line 5, after a line of digest 0...0."""
    return tuple(server.execute("SELECT storm_queue.line_refusal(%s::bytea, 5, %s), "
                                "storm_queue.line_admitted(%s::bytea, 5, %s)", (line, "0" * 64) * 2).fetchone())


def test_the_quick_yes_admits_the_lines_storms_write(server) -> None:
    """line_admitted says yes, alone, to the plain lines served requests
    write (else the insert check reads each one twice), and its table
    (line_check) is line_field compiled, as line_checks compiles it."""
    from storm_queue.core.framing import decode

    for fields in PLAIN:
        line = plain_line(fields).encode()
        decode(line)
        assert refusal_and_quick_yes(server, line) == (None, True), line
    compiled = server.execute("SELECT action, test::text, named FROM storm_queue.line_check ORDER BY action").fetchall()
    assert compiled == server.execute("SELECT action, test::text, named FROM storm_queue.line_checks() ORDER BY action"
                                      ).fetchall()
    assert {a for a, _, _ in compiled} == {a for (a,) in server.execute(
        "SELECT DISTINCT action FROM storm_queue.line_field WHERE action <> '*'").fetchall()}


#: a line's text changed as no encoder writes it, where a quick reading could go wrong
TWISTS = [
    ('"token":3', '"token":3e0'), ('"token":3', '"token":3.0'), ('"token":3', '"token":03'), ('"token":3', '"token":-3'),
    ('"token":3', '"token":1234567890123456'), ('"token":3', '"token":"3"'), ('"token":3', '"token":0'),
    ('"v":1', '"v":1,"v":2'), ('"v":1', '"v":"1"'), ('"v":1', '"v":true'), ('"seq":5', '"seq":6'),
    ('"slug":"l1"', '"slug":"l1","slug":"../x"'), ('"slug":"l1"', '"slug":"a..b"'), ('"slug":"l1"', '"slug":"\\u006c1"'),
    ('"slug":"l1"', '"slug":["l1"]'), ('"slug":"l1"', '"slug":{"x":1}'), ('"slug":"l1"', '"slug":null'),
    ('"slug":"l1"', '"slug":"' + "x" * 201 + '"'), ('"slug":"l1"', '"slug":"caf\u00e9"'),
    ('"holder":"vm-1"', '"holder":"vm 1"'), ('"holder":"vm-1"', '"holder": "vm-1"'),
    ('"at":"2026-12-02T00:00:00.000000Z"', '"at":"2026-02-30T00:00:00.000000Z"'),
    ('"at":"2026-12-02T00:00:00.000000Z"', '"at":"2026-12-31T23:59:60.000000Z"'),
    ('"at":"2026-12-02T00:00:00.000000Z"', '"at":"2026-12-02T24:00:00.000000Z"'),
    ('"at":"2026-12-02T00:00:00.000000Z"', '"at":"0999-12-02T00:00:00.000000Z"'),
    ('"at":"2026-12-02T00:00:00.000000Z"', '"at":"2026-13-02T00:00:00.000000Z"'),
    ('"at":"2026-12-02T00:00:00.000000Z"', '"at":"2026-12-02 00:00:00.000000Z"'),
    ('"by":"runner:r1"', '"by":"lane:\\"x\\""'), ('"by":"runner:r1"', '"by":"nobody"'), ('"by":"runner:r1"', '"by":"runner:"'),
    ('"prev":"' + "0" * 64 + '"', '"prev":null'), ('"prev":"' + "0" * 64 + '"', '"prev":"' + "1" * 64 + '"'),
    ('"result":"ok"', '"result":"fine"'), ('"action":"claim"', '"action":"nosuch"'), ('"action":"claim"', '"action":null'),
    ('"issue":"1"', '"issue":1'), ('"attempt":1', '"attempt":null'), ('"ttl":600', '"ttl":[]'),
    ('"deps":["b","c"]', '"deps":["b",1]'), ('"deps":["b","c"]', '"deps":["b","../c"]'), ('"deps":["b","c"]', '"deps":[["b"]]'),
    ('"deps":["b","c"]', '"deps":"b"'), ('"appended":true', '"appended":1'), ('"note":"ValueError"', '"note":null'),
    ('"note":"ValueError"', '"note":7'),
    ('"authorised":true', '"authorised":"yes"'), ("}\n", "}"), ("}\n", "}\n\n"), ("}\n", "} \n"), ("{", "[{"),
]


def plain_line(plain: dict) -> str:
    """``plain``'s line as the encoder writes it, as line 5 after a line of digest 0...0, by a runner."""
    from storm_queue.core.framing import encode

    return encode({"v": 1, "seq": 5, "at": "2026-12-02T00:00:00.000000Z", "by": "runner:r1", "prev": "0" * 64,
                   **plain}).decode()


def judged_alike(server, line: bytes) -> None:
    """The quick yes to ``line`` only where line_refusal admits it and
    framing.decode reads it; line_refusal's admission only where the
    decoder reads it."""
    from storm_queue.core.framing import Malformed, decode

    why, quick = refusal_and_quick_yes(server, line)
    if quick:
        assert why is None, (line, why)
        decode(line)
    elif why is None:
        try:
            decode(line)
        except Malformed:
            raise AssertionError(f"the insert check admits {line!r}, which the decoder refuses") from None


def test_the_quick_yes_is_never_said_to_a_plain_line_twisted_once(server) -> None:
    """Every plain line with every twist alone (a float, an exponent, a
    duplicate key, an escape, a day no month has, a leap second, another
    principal, a value of another kind): judged alike by the quick yes and
    the full reading."""
    for plain in PLAIN:
        for old, new in TWISTS:
            text = plain_line(plain)
            if old in text:
                judged_alike(server, text.replace(old, new, 1).encode())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plain=st.sampled_from(PLAIN), twists=st.lists(st.sampled_from(TWISTS), max_size=3),
       raw=st.lists(st.sampled_from([b"\xff", b"\x00", b"\\", b"\t", "\u00e9".encode(), b'"', b"\n"]), max_size=1),
       at=st.integers(0, 300))
def test_the_quick_yes_is_never_said_to_a_line_the_insert_check_refuses(server, plain, twists, raw, at) -> None:
    """The same, for the plain lines twisted several times over, a byte put anywhere."""
    text = plain_line(plain)
    for old, new in twists:
        text = text.replace(old, new, 1)
    line = text.encode()
    for byte in raw:
        line = line[:at % (len(line) + 1)] + byte + line[at % (len(line) + 1):]
    judged_alike(server, line)


def test_keys_are_forgotten_as_the_python_fold_forgets_them(pg_server, db, runner, clock) -> None:
    """A key binds its principal's first request under it (the operator's
    through the request path, a runner's through the server), and is
    forgotten KEY_DAYS after, at the log's first line of a later day, on
    both sides: verify holds the server's keys to the Python fold's."""
    from storm_queue.store.postgres import driver
    from storm_queue.core.fold import KEY_DAYS

    ok(db, "bump", "b", "--key", "op-1")
    first = ok(runner, "claim", "--holder", "h", "--key", "run-1")
    again = ok(runner, "claim", "--holder", "h", "--key", "run-1")
    assert again["repeat"] and again["decision"] == first["decision"] and again["recorded"] is False
    conflict = run_cli(runner, "claim", "--holder", "other", "--key", "run-1", "--json")
    assert json.loads(conflict.stdout)["code"] == "idempotency_conflict"
    with driver.connect(db) as conn:
        assert {k for k, in conn.execute("SELECT key FROM storm_queue.keyed")} == {"op-1", "run-1"}
    assert json.loads(run_cli(db, "verify", "--json").stdout)["sound"] is True
    clock.advance((KEY_DAYS + 1) * 86400)
    ok(db, "add", "z", "9", "--key", "op-2")  # the operator's line of a later day: the old keys go
    with driver.connect(db) as conn:
        assert {k for k, in conn.execute("SELECT key FROM storm_queue.keyed")} == {"op-2"}
    assert json.loads(run_cli(db, "verify", "--json").stdout)["sound"] is True
    fresh = ok(runner, "claim", "--holder", "h", "--key", "run-1")  # a new request now
    assert "repeat" not in fresh


def test_the_docs_say_the_grants_timeouts_and_every_finding_doctor_gives_a_database() -> None:
    """Issue 30, item 8: docs/many-hosts.md and SECURITY.md give the
    timeouts ``grant runner`` sets, as members.RUNNER_SETTINGS sets them;
    docs/doctor.md's table has every code store/postgres/checkup.py finds."""
    import re
    from pathlib import Path

    from storm_queue.store.postgres import checkup as dbdoctor
    from storm_queue.store.postgres.members import RUNNER_SETTINGS

    root = Path(__file__).resolve().parents[2]
    for page in ("docs/many-hosts.md", "SECURITY.md"):
        text = " ".join((root / page).read_text().split())
        for setting, value in RUNNER_SETTINGS:
            assert re.search(rf"`{setting}`? \({value.rstrip('s')} s\)|{setting} = '{value}'", text), (page, setting)
    codes = set(re.findall(r'Finding\(\s*\w+,\s*"(\w+)"', Path(dbdoctor.__file__).read_text()))
    assert {"search_path_exposed", "lock_held", "runner_unbounded", "clock_moved", "withdrawn"} <= codes, codes
    table = (root / "docs/doctor.md").read_text()
    assert [c for c in sorted(codes) if f"| `{c}` |" not in table] == []
