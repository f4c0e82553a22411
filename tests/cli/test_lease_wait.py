"""A runner's wait for the end of its lease (issue 33, item 4): ``lease
SLUG --token TOKEN [--wait SECONDS]`` on both stores (tests/stores.py).
It says live (exit 6) exactly while a renew of the token would be
admitted, and otherwise how the lease ended (exit 0), for every ending;
a halt ends none. With ``--wait`` it is woken by a cancel made by
another process, as ``claim --wait`` is, with a 600 s TTL, and at the
lease's expiry; a wait that runs out answers 6 and records nothing. It
reads only: a database storm's runner and reader roles may ask it.

The waiting call runs in a thread through the library, its store's
``changes`` spied on so the test acts only once it really waits
(``test_claim_wait.Waiting``); the cancel that wakes it is a real
process. The timeouts here only catch a hang: the latency is measured
in bench/cancel.py."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_claim_wait import LONG, Waiting
from tests.conftest import run_cli

TTL = "[runner]\nttl = 600\nttl_min = 1\n"


class LeaseWaiting(Waiting):
    """``Storm.tenure(slug, token, wait)`` in a thread; ``ready`` once it waits for a change."""

    def _run(self, wait: float, kwargs: dict) -> None:
        try:
            self.out = self.storm.tenure(kwargs["slug"], kwargs["token"], wait=wait)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test's thread
            self.error = exc
            self.ready.set()
        finally:
            self.storm.close()


def lease(store, slug: str, token: int, *args: str, root: str | None = None):
    """``lease SLUG --token TOKEN --json`` (as ROOT names the storm: another role's URL): exit code, document."""
    done = run_cli(root or store.root, "lease", slug, "--token", str(token), *args, "--json")
    assert done.returncode in (0, 6), (done.stdout, done.stderr)
    doc = json.loads(done.stdout)
    assert doc["live"] == (done.returncode == 6) == (doc["ended"] is None)
    return done.returncode, doc


def ok(store, *args: str) -> dict:
    done = store.cli(*args, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_a_live_lease_is_6_and_its_plain_line_names_holder_and_expiry(store):
    store.make("a 1\n", toml=TTL)
    claim = ok(store, "claim", "--holder", "r1")
    code, doc = lease(store, "a", 1)
    assert code == 6
    assert {k: doc[k] for k in ("slug", "token", "holder", "expires", "ended", "newer", "moved")} == {
        "slug": "a", "token": 1, "holder": "r1", "expires": claim["expires"], "ended": None, "newer": None, "moved": None}
    done = store.cli("lease", "a", "--token", "1")
    assert (done.returncode, done.stdout) == (6, f"live a 1: held by r1 until {claim['expires']}\n")
    ok(store, "halt", "--reason", "maintenance")  # a halt ends no lease
    assert lease(store, "a", 1)[0] == 6
    ok(store, "renew", "a", "--token", "1")
    assert lease(store, "a", 1)[0] == 6


#: how each ending is made on a storm where r1 holds a's lease under token 1, and what lease says of it
ENDINGS = {
    "cancelled": [("cancel", "a", "--reason", "wrong branch")],
    "finished": [("finish", "a", "--token", "1", "--result", "failed")],
    "released": [("release", "a", "--token", "1")],
    "recovered": [("recover", "a", "--force", "--reason", "host lost")],
    "settled": [("settle", "a", "abandoned", "--force")],
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_every_ending_is_0_and_says_how(store, ending):
    store.make("a 1\n", toml=TTL)
    ok(store, "claim", "--holder", "r1")
    for args in ENDINGS[ending]:
        ok(store, *args)
    seen = len(store.events())
    code, doc = lease(store, "a", 1)
    assert (code, doc["ended"]) == (0, ending)
    assert doc["at"] and doc["message"]
    if ending == "cancelled":
        cancel = store.events()[-1]
        assert (doc["by"], doc["reason"], doc["at"], doc["ledger"]) == (cancel["by"], "wrong branch", cancel["at"],
                                                                        "abandoned")
        line = store.cli("lease", "a", "--token", "1").stdout
        assert line == f'cancelled a 1: by {cancel["by"]} at {cancel["at"]} ("wrong branch"); a is settled abandoned\n'
    if ending == "finished":
        assert doc["result"] == "failed"
    renew = store.cli("renew", "a", "--token", "1", "--json")  # ended: exactly what the fence refuses
    assert renew.returncode == 2 and json.loads(renew.stdout)["code"] in ("stale_fence", "lane_cancelled")
    assert len(store.events()) == seen + 1  # lease recorded nothing; the refused renew one line


def test_an_expired_lease_has_ended_before_and_after_it_is_taken_back(store, clock):
    store.make("a 1\n", toml=TTL)
    ok(store, "claim", "--holder", "r1", "--ttl", "5")
    clock.advance(6)
    code, doc = lease(store, "a", 1)
    assert (code, doc["ended"], doc["newer"]) == (0, "expired", None)
    assert "not yet taken back" in doc["message"]
    assert ok(store, "claim", "--holder", "r2")["decision"] == "run a 1 2"  # taken back, leased anew
    code, doc = lease(store, "a", 1)
    assert (code, doc["ended"], doc["newer"]) == (0, "expired", 2)
    assert doc["message"].endswith("; a is now leased to r2 under token 2")
    assert lease(store, "a", 2)[0] == 6


def test_a_wait_that_runs_out_is_6_and_records_nothing(store):
    store.make("a 1\n", toml=TTL)
    ok(store, "claim", "--holder", "r1")
    seen = store.lines()
    code, doc = lease(store, "a", 1, "--wait", "0.3")
    assert (code, doc["ended"]) == (6, None)
    assert store.lines() == seen


def test_a_slug_or_token_never_leased_is_2_saying_so(store):
    store.make("a 1\n", toml=TTL)
    ok(store, "claim", "--holder", "r1")
    for args, words in ((("a", "--token", "2"), "no lease of token 2 on a was ever taken (its last token is 1)"),
                        (("b", "--token", "1"), "no lease of token 1 on b was ever taken (b has never been claimed)"),
                        (("../x", "--token", "1"), "is not a name")):
        done = store.cli("lease", *args)
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
        assert done.stdout == ""
    assert store.cli("lease", "a", "--token", "0").returncode == 2  # a usage error
    done = store.cli("lease", "a", "--token", "2", "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["outcome"] == "error"


def test_a_cancel_by_another_process_wakes_a_wait_at_once_whatever_the_ttl(store):
    store.make("a 1\nb 2\n", toml=TTL)
    assert ok(store, "claim", "--holder", "r1", "--ttl", "600")["token"] == 1
    waiting = LeaseWaiting(store.root, LONG, slug="a", token=1)
    other = store.cli("bump", "b", process=True)  # a change that ends no lease: it waits on
    assert other.returncode == 0, other.stderr
    done = store.cli("cancel", "a", "--reason", "superseded", process=True)  # another process
    assert done.returncode == 0, done.stderr
    out = waiting.answer()  # within WOKEN_WITHIN, not the 600 s it may wait: it was woken
    assert (out.ended, out.reason) == ("cancelled", "superseded")
    assert waiting.calls >= 1


def test_a_wait_ends_when_the_lease_expires_with_no_change_to_the_storm(store, clock):
    store.make("a 1\n", toml=TTL)
    ok(store, "claim", "--holder", "r1", "--ttl", "30")
    seen = store.lines()
    waiting = LeaseWaiting(store.root, LONG, slug="a", token=1)
    clock.advance(31)  # time alone ends it: the wait re-reads the clock at least every second
    out = waiting.answer()
    assert out.ended == "expired"
    assert store.lines() == seen


@pytest.mark.postgresql
def test_a_runner_role_and_a_reader_role_may_wait_on_a_lease(pg_server, pg_url, pg_role, tmp_path):
    from tests.cli.test_runner_roles import granted_runner, storm

    store = storm(pg_url, tmp_path, "a 1\n", TTL)
    role, url = granted_runner(pg_server, store, pg_role, "host")
    reader = pg_role(prefix="eyes")
    assert run_cli(store.root, "grant", "reader", reader).returncode == 0
    reader_url = pg_server.url_as(store.root, reader)
    claimed = run_cli(url, "claim", "--holder", "host", "--json")
    assert claimed.returncode == 0 and json.loads(claimed.stdout)["token"] == 1, claimed.stderr
    for root in (url, reader_url):
        assert lease(store, "a", 1, root=root)[0] == 6
    waiting = LeaseWaiting(url, LONG, slug="a", token=1)  # the runner role's own connection LISTENs
    assert run_cli(store.root, "cancel", "a", "--reason", "not now", process=True).returncode == 0
    assert waiting.answer().ended == "cancelled"
    code, doc = lease(store, "a", 1, root=reader_url)
    assert (code, doc["ended"], doc["reason"]) == (0, "cancelled", "not now")
    assert not [e for e in store.events() if e["by"] in (f"runner:{role}", f"reader:{reader}")
                and e["action"] != "claim"]  # they recorded nothing
