"""Issue 6 item 1: many claimers at once never get the same lane.

Eight concurrent loops, each a stream of real ``storm-queue`` processes,
``claim`` and then ``finish`` the lane they got with the token they got, on
one storm of thirty lanes (some waiting on others, some failing on their
first attempt) with fewer slots than claimers. Afterwards the log proves, line
by line: no lane was claimed while it was leased, no more lanes were leased
at once than there are slots, each lane's tokens are unique and strictly
increasing, every lane was claimed exactly once per attempt it needed (once,
or twice for a lane that failed its first attempt), every finish presented
the live token, and ``storm-queue verify`` finds the log sound. On a
directory storm and on a database storm alike (the ``store`` fixture).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor


CLAIMERS = 8
SLOTS = 4
LANES = [f"l{n:02d}" for n in range(1, 31)]
# l11..l15 wait on l01..l05, l26..l30 on l21 and l22: claimers meet `wait`.
DEPS = {**{f"l{n:02d}": [f"l{n - 10:02d}"] for n in range(11, 16)},
        **{f"l{n:02d}": ["l21", "l22"] for n in range(26, 31)}}
FAIL_ONCE = {"l03", "l08", "l14", "l22", "l27"}  # report `failed` for token 1
DEADLINE = 600  # seconds, for the whole contest on a loaded machine


def queue_text() -> str:
    return "".join(f"{slug} {n} {','.join(DEPS.get(slug, []))}".rstrip() + "\n"
                   for n, slug in enumerate(LANES, start=1))


class Reviewer:
    """The claimers' shared review step: settle each finished lane once."""

    def __init__(self, store) -> None:
        self.store, self.lock, self.settled = store, threading.Lock(), []

    def settle(self, slugs: list[str]) -> None:
        with self.lock:
            for slug in slugs:
                if slug in self.settled:
                    continue
                result = self.store.result(slug)
                assert (result["completed"], result["status"]) == (True, "ok"), (slug, result)
                self.store.settle([slug])
                self.settled.append(slug)


def claimer(store, reviewer: Reviewer, n: int, stop_at: float, failed: threading.Event) -> list[dict]:
    """Loop: claim; on `run` finish with the token got; until `empty`. When
    one claimer fails, the others stop too (instead of waiting on the
    leases it will never finish)."""
    try:
        return _claim_until_empty(store, reviewer, f"w{n}", stop_at, failed)
    except BaseException:
        failed.set()
        raise


def _claim_until_empty(store, reviewer: Reviewer, holder: str, stop_at: float,
                       failed: threading.Event) -> list[dict]:
    got: list[dict] = []
    while True:
        assert not failed.is_set(), "another claimer failed"
        assert time.monotonic() < stop_at, f"{holder} still claiming at the deadline"
        done = store.cli("claim", "--holder", holder, "--json", timeout=180, process=True)
        if done.returncode == 5:  # busy: nothing was recorded; ask again
            continue
        assert done.returncode == 0, (holder, done.stdout, done.stderr)
        doc = json.loads(done.stdout)
        verb, *rest = doc["decision"].split()
        if verb == "run":
            slug, issue, token = rest[0], rest[1], int(rest[2])
            assert (doc["slug"], doc["token"]) == (slug, token), doc
            result = "failed" if slug in FAIL_ONCE and token == 1 else "ok"
            got.append({"holder": holder, "slug": slug, "token": token, "result": result})
            while True:
                fin = store.cli("finish", slug, "--token", str(token), "--result", result, "--json", timeout=180,
                                process=True)
                if fin.returncode != 5:
                    break
            assert fin.returncode == 0, (holder, slug, token, fin.stdout, fin.stderr)
        elif verb == "review":
            reviewer.settle(rest)
        elif verb == "wait":
            time.sleep(0.05)
        else:
            assert verb == "empty", doc
            return got


def test_many_concurrent_claimers_never_share_a_lane(store) -> None:
    """Real processes: eight claimers at once, from threads."""
    store.make(queue_text(), toml=f"[runner]\nslots = {SLOTS}\n")
    reviewer, failed = Reviewer(store), threading.Event()
    stop_at = time.monotonic() + DEADLINE
    with ThreadPoolExecutor(CLAIMERS) as pool:
        futures = [pool.submit(claimer, store, reviewer, n, stop_at, failed) for n in range(CLAIMERS)]
        errors = [f.exception() for f in futures]
    first = next((e for e in errors if e is not None and "another claimer failed" not in str(e)), None)
    if first is not None:
        raise first
    got = [g for f in futures for g in f.result()]

    # What the claimers were handed: no (lane, token) twice, every lane once
    # per attempt it needed, tokens 1 then 2.
    pairs = [(g["slug"], g["token"]) for g in got]
    assert len(pairs) == len(set(pairs))
    tokens: dict[str, list[int]] = {}
    for slug, token in sorted(pairs):
        tokens.setdefault(slug, []).append(token)
    assert tokens == {slug: [1, 2] if slug in FAIL_ONCE else [1] for slug in LANES}
    assert len({g["holder"] for g in got}) > 1, "a real contest: more than one claimer ran lanes"

    # What the log says, line by line.
    events = [e for e in store.events() if e["action"] != "init"]  # a database storm's line 1
    leased: dict[str, int] = {}
    last: dict[str, int] = {}
    most = 0
    claims = finishes = 0
    for e in events:
        action = e["action"]
        assert action in ("claim", "finish"), e  # no expiry, refusal, quarantine
        slug, token = e["slug"], e["token"]
        if action == "claim":
            claims += 1
            assert slug not in leased, f"{slug} claimed while leased: {e}"
            assert token > last.get(slug, 0), f"token of {slug} did not increase: {e}"
            leased[slug] = last[slug] = token
            assert len(leased) <= SLOTS, f"{len(leased)} leases at once: {e}"
            most = max(most, len(leased))
        else:
            finishes += 1
            assert leased.get(slug) == token, f"finish without the live token: {e}"
            del leased[slug]
    assert leased == {}
    assert claims == finishes == len(LANES) + len(FAIL_ONCE)
    assert most >= 2, "leases overlapped: the claimers really ran at once"
    by_claim = {(e["slug"], e["token"]): e["holder"] for e in events if e["action"] == "claim"}
    assert by_claim == {(g["slug"], g["token"]): g["holder"] for g in got}

    # Every lane settled once; the storm is empty; the log is sound.
    assert sorted(reviewer.settled) == LANES
    assert sorted(store.settled()) == LANES
    assert store.cli("next").stdout == "empty\n"
    verified = store.cli("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["sound"] is True
