"""Issue 30 as an attacker tries it: logged in as a runner role, as a
reader role and as a stranger with CONNECT only, every function the role
may execute that touches the storm (found from the catalog, not a list:
the storm's schema, and pg_catalog's advisory-lock functions) is called
with hostile arguments, one argument at a time and some all at once:
injected JSON and duplicate keys, unicode escapes and control characters,
names that are not names, huge texts, NULLs, negative and huge tokens and
TTLs, another holder's token. After each call, as the operator: ``next``
exits 0, the run order and the halt are as they were, no lane is leased,
finished, quarantined or marked but as the one documented runner action
the call was entitled to, ``verify`` is sound, and no session holds the
storm's lock. Then each attack the issue lists, as a regression test of
its own (the catalog's, the lock's and the search_path's are in
test_boundary.py)."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest

from tests.conftest import clean_env, run_cli

pytestmark = pytest.mark.postgresql

#: hostile values of each argument type the storm's functions take
HOSTILE = {
    "text": [None, "", "a", "e", "../x", 'a","action":"halt","by":"operator:op","x":"',
             '{"v":1,"action":"adopt","action":"halt","lane":[]}', "\\u0000 \\ud800 \u2028\u0085\x1b[31m", "x" * 5000,
             "y" * 300_000, "runner:other"],
    "numeric": [None, -1, 0, 1, 9223372036854775807, Decimal("9223372036854775808"), Decimal("1.5"), Decimal("1e30"),
                Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity")],
    "integer": [None, -1, 0, 2147483647],
    "bigint": [None, -1, 0, 9223372036854775807],
    "boolean": [None, True, False],
}
#: the storm's advisory lock keys before schema version 9, and the catch-up's: what an attacker would hold
OLD_KEYS = ((1937010546, 28017), (1937010546, 25461))


def ok(url: str, *args: str) -> dict:
    done = run_cli(url, *args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def dbname(url: str) -> str:
    from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

    return conninfo_to_dict(url)["dbname"]


@pytest.fixture
def storm(pg_server, pg_url, pg_role, tmp_path) -> dict:
    """A storm with a priority lane, a dependency, a lane blocked on an
    abandoned one, a lease held by another runner role (e, token 1), one
    held by the attacker (a, token 1); the attacker, that other runner, a
    reader and a stranger with CONNECT only."""
    assert run_cli(None, "init", pg_url).returncode == 0
    toml = tmp_path / "storm.toml"
    toml.write_text("[runner]\nttl_min = 60\nslots = 3\nattempts = 2\nunattended = true\n")
    for args in (("declare", str(toml)), ("add", "a", "1"), ("add", "b", "2"), ("add", "c", "3", "--deps", "a"),
                 ("add", "gone", "7"), ("add", "d", "4", "--deps", "gone"), ("add", "e", "5"), ("add", "f", "6"),
                 ("settle", "gone", "abandoned"), ("bump", "e", "--reason", "first")):
        ok(pg_url, *args)
    roles = {kind: pg_role(prefix=kind) for kind in ("attacker", "other", "reader", "stranger")}
    ok(pg_url, "grant", "runner", roles["attacker"])
    ok(pg_url, "grant", "runner", roles["other"])
    ok(pg_url, "grant", "reader", roles["reader"])
    with pg_server.admin() as conn:
        conn.execute(f"GRANT CONNECT ON DATABASE {dbname(pg_url)} TO {roles['stranger']}")
    assert ok(pg_server.url_as(pg_url, roles["other"]), "claim", "--holder", "b-host")["decision"] == "run e 5 1"
    assert ok(pg_server.url_as(pg_url, roles["attacker"]), "claim", "--holder", "a-host")["decision"] == "run a 1 1"
    return {"url": pg_url, "roles": roles, "urls": {k: pg_server.url_as(pg_url, r) for k, r in roles.items()}}


def seen(url: str) -> dict:
    """What the operator sees of the storm: the run order, the halt, each lease (its token and principal),
    the lanes finished, quarantined and marked blocked, the decision next would give, the lanes it would
    mark blocked, and whether verify finds the storm sound."""
    from storm_queue.service.storm import Storm

    storm = Storm.find(url, env=clean_env())
    try:
        listing = storm.listing(waits=False)
        log = storm.store.read(storm.declaration())
        results = dict(storm.store.conn.execute("SELECT slug, body FROM storm_queue.result").fetchall())
        return {"order": [r.slug for r in listing.view.rows] + [r.slug for r in listing.view.settled],
                "halt": listing.view.halt,
                "leases": {s: (r.lease.token, r.lease.by) for s, r in log.state.runs.items() if r.lease is not None},
                "finished": {s for s, b in results.items() if b.get("completed") is True},
                "marked": {s for s, b in results.items() if b.get("status") == "blocked"},
                "quarantined": {s for s, r in log.state.runs.items() if r.quarantined is not None},
                "decision": listing.view.decision, "to_block": {r.slug for r in listing.view.to_block},
                "claims": _claims(storm, log), "sound": storm.verify().sound}
    finally:
        storm.close()


def _claims(storm, log) -> str | None:
    """The lane a claim would lease now, as the Python twin of the server's decides it (orphaned leases taken
    back first)."""
    from storm_queue import wall
    from storm_queue.core.runs import plan_claim

    decl = storm.declaration()
    return plan_claim(storm.store.snapshot(log), decl.runner, "h", decl.runner.ttl, wall.seconds()).slug


def entitled(before: dict, after: dict, function: str, by: str) -> list[str]:
    """What changed that the call was not entitled to (empty: nothing). A
    runner's claim may lease the lane next decided, to itself, and mark
    blocked the lanes met before it; its renew, finish or release may end
    its own lease on a (finished ok, or claimable again); nothing else
    changes for anyone."""
    wrong = []
    if after["order"] != before["order"]:
        wrong.append(f"the run order moved: {before['order']} -> {after['order']}")
    if after["halt"] != before["halt"]:
        wrong.append("the halt changed")
    taken = {s: v for s, v in after["leases"].items() if before["leases"].get(s) != v}
    for slug, (token, holder) in taken.items():
        if not (function.endswith("serve_claim") and holder == by and before["claims"] == slug):
            wrong.append(f"{slug} leased to {holder} under token {token}")
    for slug in set(before["leases"]) - set(after["leases"]):
        if before["leases"][slug][1] != by:
            wrong.append(f"the lease of {before['leases'][slug][1]} on {slug} ended")
    for slug in after["finished"] - before["finished"]:
        if before["leases"].get(slug, (None, None))[1] != by:
            wrong.append(f"{slug} finished without its lease")
    for slug in after["quarantined"] - before["quarantined"]:
        wrong.append(f"{slug} quarantined")
    for slug in after["marked"] - before["marked"] - before["to_block"]:
        wrong.append(f"{slug} marked blocked")
    if not after["sound"]:
        wrong.append("verify is not sound")
    return wrong


def executable(pg_server, url: str, role: str) -> list[tuple[str, list[str], list[str]]]:
    """Every function the role may execute that touches the storm: the
    storm's schema's (where it may use the schema), and pg_catalog's
    advisory-lock functions: (name, argument names, argument types)."""
    with pg_server.admin(dbname(url)) as conn:
        rows = conn.execute(
            "SELECT p.oid::regproc::text, coalesce(p.proargnames, '{}'), "
            "       ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t) "
            "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE has_function_privilege(%s, p.oid, 'EXECUTE') AND has_schema_privilege(%s, n.oid, 'USAGE') "
            "  AND p.prokind = 'f' "
            "  AND (n.nspname = 'storm_queue' OR (n.nspname = 'pg_catalog' AND p.proname LIKE 'pg%%advisory%%')) "
            "ORDER BY 1, 3", (role, role)).fetchall()
    return [(name, list(names), list(types)) for name, names, types in rows]


#: an argument by name that a call is plausible with (the one a hostile value replaces)
BASELINE = {"p_slug": "a", "p_token": 1, "p_holder": "h", "p_default_holder": "h", "p_result": "failed",
            "p_wait_ms": 2000, "p_force": False}


def calls(name: str, names: list[str], types: list[str]):
    """The argument lists a function is called with: each argument in turn
    given each hostile value of its type (the rest plausible), then every
    argument hostile at once, then every one NULL; for an advisory-lock
    function, the storm's old keys too."""
    if not types:
        yield []
        return
    if name.startswith("pg_"):
        pairs = [tuple(k) for k in OLD_KEYS]
        yield from ([k[0] << 32 | k[1]] if types == ["bigint"] else list(k) for k in pairs)
        yield [None] * len(types)
        yield [-1] * len(types)
        return
    base = [BASELINE.get(n) for n in names]
    for i, kind in enumerate(types):
        for value in HOSTILE.get(kind, [None]):
            yield base[:i] + [value] + base[i + 1:]
    yield [HOSTILE.get(kind, [None])[5 % len(HOSTILE.get(kind, [None]))] for kind in types]
    yield [None] * len(types)


def call(conn, name: str, types: list[str], args: list) -> str:
    """``name(args)`` as the role, each argument cast to its type; what it
    answered or the error the server raised, in a few words."""
    from storm_queue.store.postgres import driver

    sql = f"SELECT {name}({', '.join(f'%s::{t}' for t in types)})"
    try:
        row = conn.execute(sql, args).fetchone()
        return f"answered {str(row[0])[:60]}"
    except driver.Error as exc:
        return f"raised {type(exc).__name__}"


def lock_free(pg_server, url: str) -> bool:
    with pg_server.admin(dbname(url)) as conn:
        return conn.execute("SELECT NOT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'storm_queue.lock'::regclass "
                            "AND granted)").fetchone()[0]


@pytest.mark.parametrize("kind", ["attacker", "reader", "stranger"])
def test_every_function_a_role_may_execute_called_with_hostile_arguments_changes_nothing_it_may_not(
        pg_server, storm, kind) -> None:
    from storm_queue.store.postgres import driver

    url, role = storm["url"], storm["roles"][kind]
    functions = executable(pg_server, url, role)
    mine = sorted(name for name, _, _ in functions if name.startswith("storm_queue."))
    assert mine == ({"attacker": ["storm_queue.serve_claim", "storm_queue.serve_decided", "storm_queue.serve_finish",
                                  "storm_queue.serve_finish_claim", "storm_queue.serve_recover",
                                  "storm_queue.serve_release", "storm_queue.serve_renew"]}
                    .get(kind, [])), mine
    assert any(name.startswith("pg_catalog.pg_advisory") or name.startswith("pg_advisory") for name, _, _ in functions)
    for _, _, types in functions:  # no function a role may execute takes a time, a line or a body from it
        assert not {"double precision", "timestamp with time zone", "bytea", "bytea[]", "jsonb", "json"} & set(types)
    by = f"runner:{role}"
    made = 0
    with driver.connect(storm["urls"][kind]) as conn:
        after = seen(url)
        for name, names, types in functions:
            for args in calls(name, names, types):
                before = after
                what = call(conn, name, types, args)
                made += 1
                after = seen(url)
                wrong = entitled(before, after, name, by)
                assert not wrong, (name, [a if not isinstance(a, str) or len(a) < 80 else f"{a[:20]}...({len(a)})"
                                          for a in args], what, wrong)
                assert lock_free(pg_server, url), (name, args, what)
                nxt = run_cli(url, "next", env=clean_env())
                assert nxt.returncode == 0, (name, args, what, nxt.stderr)
                after = seen(url)  # (next marked what it met: the storm the next call meets)
        held = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
                            ).fetchone()[0]
        assert held >= 1  # the old keys, held all the while by this role: they stop no write
        assert ok(url, "bump", "b", "--wait", "5")["outcome"] == "done"  # a held lock would answer exit 5
    assert made > (200 if kind == "attacker" else 5)


# -- each attack of the issue, as a regression test ----------------------------


def insert_line(conn, body: dict, by: str = "operator:x", raw: str | None = None) -> None:
    """A line after the head, as the operator's hand would insert it (``raw``: its text, else ``body`` framed)."""
    from storm_queue.core.framing import frame

    seq, digest = conn.execute("SELECT seq, digest FROM storm_queue.state").fetchone()
    line = raw.encode() if raw is not None else frame([body], seq, digest, "2026-12-02T00:00:00.000000Z", by)[0][1]
    conn.execute("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", (seq + 1, line))


def test_attack_1_a_line_is_folded_as_the_python_decoder_reads_it(pg_server, storm) -> None:
    """A line whose first "action" is adopt and whose last is refused (a
    duplicate key) was folded by the server as an adopt, read by Python as
    a refusal. Such a line (no role but the operator may insert one now)
    is read as Python reads it, once, by the checked jsonb: nothing moves.
    And a line written with a space after a colon is folded by both."""
    from storm_queue.store.postgres import driver

    url = storm["url"]
    before = seen(url)
    with driver.connect(url) as conn:
        seq, digest = conn.execute("SELECT seq, digest FROM storm_queue.state").fetchone()
        raw = ('{"v":1,"seq":%d,"at":"2026-12-02T00:00:00.000000Z","action":"adopt","lane":[],"by":"operator:x",'
               '"prev":"%s","action":"refused","requested":"bump","slug":"a","code":"x","message":"y","authorised":false}\n'
               % (seq + 1, digest))
        conn.execute("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", (seq + 1, raw.encode()))
        seq, digest = conn.execute("SELECT seq, digest FROM storm_queue.state").fetchone()
        spaced = ('{"v": 1, "seq": %d, "at": "2026-12-02T00:00:00.000000Z", "action": "quarantine", "by": "operator:x", '
                  '"prev": "%s", "slug": "f", "attempts": 2, "budget": 2}\n' % (seq + 1, digest))
        conn.execute("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", (seq + 1, spaced.encode()))
    after = seen(url)
    assert (after["order"], after["halt"], after["sound"]) == (before["order"], before["halt"], True)
    assert after["quarantined"] == before["quarantined"] | {"f"}  # as Python folds it: verify finds the server agrees
    claimed = ok(storm["urls"]["attacker"], "claim", "--holder", "x")
    assert claimed["slug"] == before["claims"], (claimed, before["claims"])


@pytest.mark.parametrize("harm", [
    "slug", "seq as text", "version 2", "deep", "array", "not after the head", "a float", "by no one", "at no time",
    "not ascii", "two lines"])
def test_attack_2_a_line_the_python_decoder_refuses_never_enters_the_log(pg_server, storm, harm) -> None:
    """The insert check refuses, for every role (here the operator, who
    alone may insert), a line the Python decoder would refuse; the log,
    and every command, stay as they were."""
    from storm_queue.store.postgres import driver
    from storm_queue.core.framing import Malformed, decode, frame

    url = storm["url"]
    with driver.connect(url) as conn:
        seq, digest = conn.execute("SELECT seq, digest FROM storm_queue.state").fetchone()
        body = {"action": "claim", "slug": "f", "issue": "6", "holder": "h", "token": 9, "ttl": 60,
                "expires": "2026-12-02T00:01:00.000000Z", "attempt": 1}
        (event, line), = frame([body], seq, digest, "2026-12-02T00:00:00.000000Z", "operator:x")
        text = line.decode()
        bad = {"slug": text.replace('"slug":"f"', '"slug":"../f"'),
               "seq as text": text.replace(f'"seq":{seq + 1}', f'"seq":"{seq + 1}"'),
               "version 2": text.replace('"v":1', '"v":2'),
               "deep": text[:-2] + ',"x":' + "[" * 5000 + "]" * 5000 + "}\n",
               "array": "[" + text[:-1] + "]\n",
               "not after the head": text.replace(f'"prev":"{digest}"', '"prev":"' + "0" * 64 + '"'),
               "a float": text.replace('"token":9', '"token":9.0'),
               "by no one": text.replace('"by":"operator:x"', '"by":""'),
               "at no time": text.replace('"at":"2026-12-02T00:00:00.000000Z"', '"at":"2026-02-30T00:00:00.000000Z"'),
               "not ascii": text.replace('"holder":"h"', '"holder":"h","note":"caf\u00e9"'),
               "two lines": text[:-2] + ',\n"note":"x"}\n'}[harm]
        if harm not in ("not after the head", "a float", "by no one", "at no time", "not ascii", "two lines"):
            with pytest.raises((Malformed, RecursionError, ValueError)):  # what Python refuses too
                decode(bad.encode())
        before = conn.execute("SELECT count(*) FROM storm_queue.event").fetchone()[0]
        with pytest.raises(driver.errors.CheckViolation):
            conn.execute("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", (seq + 1, bad.encode()))
        assert conn.execute("SELECT count(*) FROM storm_queue.event").fetchone()[0] == before
    for args in (("next",), ("list",), ("verify",), ("log",)):
        assert run_cli(url, *args, env=clean_env()).returncode == 0, args


def test_attack_2_a_runners_claim_writes_its_holder_only_as_a_name(storm) -> None:
    for holder in ("../x", "a b", "-h", "x" * 201):
        done = run_cli(storm["urls"]["attacker"], "claim", "--holder", holder, "--json")
        doc = json.loads(done.stdout)
        assert (done.returncode, doc["code"], doc["recorded"]) == (2, "invalid_holder", True), doc
    assert seen(storm["url"])["sound"]


def test_attack_4_a_runner_marks_blocked_only_what_next_would(pg_server, storm) -> None:
    """runner_mark_blocked wrote a "finished, awaits review" body on any
    slug. A runner's next now asks the server, which computes the marks as
    the claim's walk does: d (its dependency abandoned), and nothing else."""
    from storm_queue.store.postgres import driver

    url = storm["url"]
    assert ok(storm["urls"]["attacker"], "claim", "--holder", "h2")["slug"] == "b"  # now d comes before a ready lane
    assert seen(url)["to_block"] == {"d"}  # as the operator's next would mark it
    assert run_cli(storm["urls"]["attacker"], "next", env=clean_env()).returncode == 0
    with driver.connect(url) as conn:
        marked = conn.execute("SELECT slug, body->>'blocked_on' FROM storm_queue.result WHERE body->>'status' = 'blocked'"
                              ).fetchall()
    assert marked == [("d", "gone")]
    with driver.connect(storm["urls"]["attacker"]) as conn:
        for body in ('{"status": "blocked", "completed": false}', '{"completed": true}'):
            with pytest.raises(driver.errors.UndefinedFunction):
                conn.execute("SELECT storm_queue.runner_mark_blocked('b', %s::jsonb)", (body,))
        with pytest.raises(driver.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO storm_queue.result (slug, body) VALUES ('b', '{}')")


def test_attack_5_a_runner_finishes_expires_or_quarantines_only_its_own_live_lease(pg_server, storm) -> None:
    attacker, url = storm["urls"]["attacker"], storm["url"]
    before = seen(url)
    for args, code in ((("finish", "b", "--token", "1", "--result", "ok"), "stale_fence"),  # never claimed
                       (("finish", "e", "--token", "1", "--result", "ok"), "not_holder"),  # another's, its live token
                       (("release", "e", "--token", "1"), "not_holder"),
                       (("renew", "e", "--token", "1"), "not_holder"),
                       (("recover", "e"), "not_operator"),  # naming a lane: the operator's
                       (("recover", "e", "--force", "--reason", "x"), "not_operator")):
        done = run_cli(attacker, *args, "--json")
        assert json.loads(done.stdout)["code"] == code, (args, done.stdout)
    assert json.loads(run_cli(attacker, "recover", "--json").stdout)["outcome"] == "noop"  # no lease expired
    after = seen(url)
    assert (after["leases"], after["finished"], after["quarantined"]) == (
        before["leases"], before["finished"], before["quarantined"])
    longest = max(len(line) for line in storm_lines(url))
    assert longest < 20_000, longest  # what a runner writes is bounded by what the server composes


def test_attack_5_a_token_or_ttl_that_is_not_a_number_is_refused_by_its_shape_before_anything_is_asked(
        pg_server, storm) -> None:
    """numeric holds NaN and the infinities, whose scale is NULL: a renew
    of token NaN passed the shape check and was recorded as an authorised
    stale_fence (its words "token NaN is newer than the live lease's").
    Such a token or TTL is what no client asks: refused as a fractional one
    is, nothing recorded, the lease untouched."""
    from storm_queue.store.postgres import driver

    ask = "0" * 32
    asks = {"serve_renew": ("e", "{n}", None, None, None, None, None, 1000, ask),
            "serve_release": ("e", "{n}", None, None, None, None, 1000, ask),
            "serve_finish": ("e", "{n}", "ok", None, None, None, None, None, 1000, ask),
            "serve_finish_claim": ("e", "{n}", "ok", None, "h", "h", None, None, None, None, None, 1000, ask)}
    before, lines = seen(storm["url"]), storm_lines(storm["url"])
    with driver.connect(storm["urls"]["attacker"]) as conn:
        for name, args in asks.items():
            for n in ("NaN", "Infinity", "-Infinity"):
                given = [n if a == "{n}" else a for a in args]
                with pytest.raises(driver.Error) as refused:
                    conn.execute(f"SELECT storm_queue.{name}({', '.join(['%s'] * len(given))})", given)
                assert refused.value.pgcode == "22023", (name, n, refused.value)
        for ttl in ("NaN", "Infinity"):
            with pytest.raises(driver.Error) as refused:
                conn.execute("SELECT storm_queue.serve_claim(%s, %s, %s::numeric, %s, %s, %s, %s, %s, %s)",
                             ("h", "h", ttl, None, None, None, None, 1000, ask))
            assert refused.value.pgcode == "22023", (ttl, refused.value)
    assert storm_lines(storm["url"]) == lines
    assert seen(storm["url"])["leases"] == before["leases"]


def test_a_session_whose_string_literals_read_backslashes_as_escapes_is_served_as_any_other(pg_server, storm) -> None:
    """standard_conforming_strings = off (a role's, a database's, or the
    caller's own SET) read the storm's functions' regular expressions and
    escapes otherwise: every write failed inside the insert check, and the
    JSON escaping of a caller's text changed. The serving functions fix
    the setting for their call, and every storm-queue connection for its
    session: a runner's own SET, then a database set so, change nothing."""
    from storm_queue.store.postgres import driver

    reason = 'a "quoted" reason \\ with a backslash\nand a newline'
    with driver.connect(storm["urls"]["attacker"]) as conn:
        conn.execute("SET standard_conforming_strings = off")
        answer = conn.execute("SELECT storm_queue.serve_renew(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                              ("a", 1, None, reason, None, None, None, 1000, "1" * 32)).fetchone()[0]
    assert answer["outcome"] == "done", answer
    assert json.loads(storm_lines(storm["url"])[-1])["reason"] == reason
    with pg_server.admin() as admin:
        admin.execute(f"ALTER DATABASE {dbname(storm['url'])} SET standard_conforming_strings = off")
    try:
        assert ok(storm["url"], "add", "x", "9", "--reason", reason)["outcome"] == "done"
        assert json.loads(storm_lines(storm["url"])[-1])["reason"] == reason
        assert ok(storm["urls"]["attacker"], "renew", "a", "--token", "1")["outcome"] == "done"
        assert ok(storm["url"], "verify")["sound"] is True
    finally:
        with pg_server.admin() as admin:
            admin.execute(f"ALTER DATABASE {dbname(storm['url'])} RESET standard_conforming_strings")


def storm_lines(url: str) -> list[bytes]:
    from storm_queue.store.postgres import driver

    with driver.connect(url) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT line FROM storm_queue.event ORDER BY seq")]


def test_attack_5_a_claim_takes_only_the_lane_the_run_order_gives_and_a_huge_reason_is_never_kept(storm) -> None:
    attacker, url = storm["urls"]["attacker"], storm["url"]
    expected = seen(url)["claims"]
    done = json.loads(run_cli(attacker, "claim", "--holder", "h2", "--ttl", "600", "--json").stdout)
    assert done["slug"] == expected == "b"
    big = "r" * 70_000
    refused = json.loads(run_cli(attacker, "renew", "b", "--token", "1", "--reason", big, "--json").stdout)
    assert (refused["code"], refused["recorded"]) == ("reason_too_long", True)
    assert big not in storm_lines(url)[-1].decode()
    assert json.loads(run_cli(attacker, "claim", "--json").stdout)["decision"].startswith("wait")  # slots full


def test_attack_6_a_runner_inside_a_transaction_it_never_ends_is_ended_by_its_timeout(pg_server, storm) -> None:
    """A runner that calls a serving function in a transaction and never
    ends it held the storm's lock for good. ``grant runner`` (by an
    operator that may: CREATEROLE) sets the role's
    idle_in_transaction_session_timeout in the storm's database: the
    server ends that session, and the operator's next write goes through."""
    from storm_queue.store.postgres import driver
    from storm_queue.store.postgres.members import RUNNER_SETTINGS

    url = storm["url"]
    with pg_server.admin() as conn:
        conn.execute(f"ALTER ROLE {dbname(url).replace('storm_', 'op_')} CREATEROLE")
    role = storm["roles"]["other"]
    ok(url, "revoke", "runner", role)
    assert ok(url, "grant", "runner", role)["message"] == f"role {role} is a runner of the storm now"
    idle = dict(RUNNER_SETTINGS)["idle_in_transaction_session_timeout"]
    hung = driver.connect(storm["urls"]["other"])  # a new session: the role's settings in this database
    try:
        hung.execute("BEGIN")
        assert hung.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == idle
        hung.execute("SELECT storm_queue.serve_claim('h', NULL, NULL, NULL, NULL, NULL, NULL, 1000, NULL)")
        assert not lock_free(pg_server, url)  # it holds the storm's lock, and hangs
        assert ok(url, "bump", "f", "--wait", "30")["outcome"] == "done"  # waits for the server to end it (else exit 5)
        with pytest.raises(driver.Error):  # the server ended it: idle in a transaction for too long
            hung.execute("SELECT 1")
    finally:
        hung.close()
    assert seen(url)["sound"]


def test_attack_7_verify_names_a_deleted_or_edited_last_line_and_no_claim_runs_on_it(pg_server, storm) -> None:
    from storm_queue.store.postgres import driver

    url, attacker = storm["url"], storm["urls"]["attacker"]
    last = len(storm_lines(url))
    with driver.connect(url) as conn:
        conn.execute("ALTER TABLE storm_queue.event DISABLE TRIGGER event_append_only")
        line = conn.execute("SELECT line FROM storm_queue.event WHERE seq = %s", (last,)).fetchone()[0]
        conn.execute("DELETE FROM storm_queue.event WHERE seq = %s", (last,))
    audit = json.loads(run_cli(url, "verify", "--json").stdout)
    assert audit["sound"] is False and audit["problem"]["line"] == last and "missing" in audit["problem"]["what"], audit
    refused = run_cli(attacker, "claim", "--json")
    assert refused.returncode == 3 and f"line {last}" in refused.stderr + refused.stdout, refused
    with driver.connect(url) as conn:  # put back (past the insert check, off)
        conn.execute("ALTER TABLE storm_queue.event DISABLE TRIGGER event_well_formed")
        conn.execute("INSERT INTO storm_queue.event (seq, line) VALUES (%s, %s)", (last, line))
        conn.execute("ALTER TABLE storm_queue.event ENABLE TRIGGER event_well_formed")
    assert run_cli(None, "upgrade", url).returncode == 0  # the log whole again: the server's tables folded again
    assert json.loads(run_cli(url, "verify", "--json").stdout)["sound"] is True
    last += 1  # the upgrade's line, now the last: edited (no line after it, so no chain breaks: only the head knows)
    with driver.connect(url) as conn:
        line = bytes(conn.execute("SELECT line FROM storm_queue.event WHERE seq = %s", (last,)).fetchone()[0])
        from storm_queue.store.postgres.queries import schema_version

        now = schema_version()  # (the upgrade from this version to itself)
        edited = line.replace(b'"from":%d' % now, b'"from":%d' % (now - 1))
        assert edited != line
        conn.execute("UPDATE storm_queue.event SET line = %s WHERE seq = %s", (edited, last))
    audit = json.loads(run_cli(url, "verify", "--json").stdout)
    assert audit["sound"] is False and audit["problem"]["line"] == last, audit
    assert "digest differs" in audit["problem"]["what"], audit
    assert run_cli(attacker, "claim").returncode == 3
    doctor = json.loads(run_cli(url, "doctor", "--json").stdout)
    assert any(f["code"] == "not_append_only" for f in doctor["findings"]), doctor  # the trigger it took to do so
    assert len(storm_lines(url)) == last  # nothing after the damage


@pytest.mark.parametrize("table", ["run", "priority", "runs_at", "state"])
def test_attack_7_a_hand_edit_of_what_the_server_decides_by_withdraws_it_until_upgrade(pg_server, storm, table) -> None:
    """A runner's claim no longer leases on a state row, run, priority or
    runs_at table edited by hand: it answers that the order is unknown
    (exit 3), saying what the operator does; upgrade folds the tables
    again from the log, recorded (the state row is the log's head: no
    upgrade mends it, as verify says)."""
    from storm_queue.store.postgres import driver

    url, attacker = storm["url"], storm["urls"]["attacker"]
    edit = {"run": "UPDATE storm_queue.run SET lease_token = NULL, holder = NULL WHERE slug = 'e'",
            "priority": "DELETE FROM storm_queue.priority",
            "runs_at": "UPDATE storm_queue.runs_at SET token_floor = 9223372036854775806",
            "state": "UPDATE storm_queue.state SET digest = repeat('0', 64)"}[table]
    lines = len(storm_lines(url))
    with driver.connect(url) as conn:
        conn.execute(edit)
    refused = run_cli(attacker, "claim", "--json")
    assert refused.returncode == 3, (refused.stdout, refused.stderr)
    assert "upgrade" in refused.stderr and ("verify" in refused.stderr), refused.stderr
    assert len(storm_lines(url)) == lines  # nothing recorded
    if table == "state":
        assert json.loads(run_cli(url, "verify", "--json").stdout)["sound"] is False
        return
    doctor = json.loads(run_cli(url, "doctor", "--json").stdout)
    assert [f["code"] for f in doctor["findings"] if f["severity"] == "error"] == ["withdrawn"], doctor
    done = run_cli(None, "upgrade", url, "--reason", "a hand edit", "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    upgraded = json.loads(done.stdout)
    event = json.loads(storm_lines(url)[-1])
    assert (upgraded["outcome"], event["action"], event["rederived"]) == ("done", "upgrade", lines)
    assert json.loads(run_cli(url, "verify", "--json").stdout)["sound"] is True
    assert ok(attacker, "claim", "--holder", "x")["slug"] == "b"


def test_attack_7_a_served_call_that_waits_too_long_for_the_lock_is_exit_5_nothing_recorded(pg_server, storm) -> None:
    from storm_queue.store.postgres import driver

    url = storm["url"]
    lines = storm_lines(url)
    with driver.connect(url) as holder:  # the operator's session, holding the storm's lock
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE")
        done = run_cli(storm["urls"]["attacker"], "renew", "a", "--token", "1", "--wait", "1", "--json")
        holder.execute("ROLLBACK")
    doc = json.loads(done.stdout)
    assert done.returncode == 5 and doc.get("recorded") is not True, (done.stdout, done.stderr)
    assert "nothing was recorded" in doc["message"]
    assert storm_lines(url) == lines


def test_attack_7_a_served_call_whose_connection_is_lost_asks_whether_its_lines_were_written(pg_server, storm) -> None:
    """Ended while it waited for the storm's lock (its backend terminated):
    the client asks the server, on a new connection, once that backend is
    gone, whether the call's lines were written: not (recorded false).
    And a call the server did write (its token among the asked), named."""
    import threading

    from storm_queue.store.postgres import driver
    from storm_queue.core.errors import RecordFailed
    from storm_queue.service.storm import Storm
    from storm_queue.store.postgres.faults import lost_served

    url = storm["url"]
    runner = Storm.find(storm["urls"]["attacker"], env=clean_env())
    try:
        pid = runner.store.conn.info.backend_pid
        with driver.connect(url) as holder, pg_server.admin(dbname(url)) as killer:
            holder.execute("BEGIN")
            holder.execute("LOCK TABLE storm_queue.lock IN EXCLUSIVE MODE")

            def end_it() -> None:
                deadline = time.monotonic() + 20
                while not killer.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
                                         (pid,)).fetchone():
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))

            ender = threading.Thread(target=end_it)
            ender.start()
            with pytest.raises(RecordFailed) as lost:
                runner.renew("a", 1)
            ender.join(timeout=30)
            holder.execute("ROLLBACK")
        assert lost.value.recorded is False and "did not happen; ask again" in str(lost.value), lost.value
        with driver.connect(url) as conn:
            conn.execute("INSERT INTO storm_queue.asked (ask, seq, at) VALUES (%s, 7, now())", ("ab" * 16,))
        answer = lost_served(runner.store, "renew", driver.OperationalError("gone"), "ab" * 16, pid)
        assert answer.recorded is True and "line 7" in str(answer) and "do not ask again" in str(answer)
    finally:
        runner.close()


def test_attack_7_a_hand_edited_lane_row_is_skipped_and_reported_never_leased_or_printed_raw(pg_server, storm) -> None:
    from storm_queue.store.postgres import driver

    url, attacker = storm["url"], storm["urls"]["attacker"]
    with pg_server.admin(dbname(url)) as conn:
        conn.execute("ALTER TABLE storm_queue.lane ALTER COLUMN deps DROP NOT NULL")
    with driver.connect(url) as conn:
        conn.execute("UPDATE storm_queue.lane SET slug = '../b' WHERE slug = 'b'")
        conn.execute("UPDATE storm_queue.lane SET issue = E'6\\nrun f 6 9' WHERE slug = 'f'")
        conn.execute("INSERT INTO storm_queue.lane (slug, issue, deps) VALUES ('g', '8', NULL), ('h', '9', '{{a,b},{c,d}}'), "
                     "('i', '10', '{a,NULL}')")
    listing = json.loads(run_cli(url, "list", "--json", env=clean_env()).stdout)
    skipped = {s["text"].split(" ")[0]: s["why"] for s in listing["skipped"]}
    assert set(skipped) == {"../b", "f", "g", "h", "i"}, listing["skipped"]
    assert not {r["slug"] for r in listing["rows"]} & {"../b", "f", "g", "h", "i"}
    plain = run_cli(url, "list", "--plain", env=clean_env()).stdout
    assert "run f 6 9" not in plain.splitlines() and "\nrun f" not in plain
    for _ in range(3):  # the runner's claims never lease them: there is nothing else to run but c (waiting)
        decision = ok(attacker, "claim", "--holder", "x")["decision"]
        assert decision.startswith("wait"), decision
    doctor = json.loads(run_cli(url, "doctor", "--json").stdout)
    assert sum(f["code"] == "skipped_line" for f in doctor["findings"]) == 5, doctor
    assert seen(url)["sound"]
