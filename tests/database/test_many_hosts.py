"""Many hosts for real (issue 11): two runners, each in a network namespace
of its own joined to the server's by a veth pair, reach a PostgreSQL server
over TCP with scram-sha-256 passwords. One runner's link is cut in the
middle of its lease: while cut, its requests fail with a clear exit-2
message (no traceback, no password); its lease expires and the other runner
takes the lane back under a greater token; once the link is back, the cut-off
runner's late finish is refused ``stale_fence``. The log verifies after.

It needs root and ``ip netns`` (CI runs as root): without them it skips, or
under CI fails, as every database test does without a server."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime

import pytest

from tests.conftest import clean_env, skip_or_fail
from tests.database.test_database_faults import assert_sound_and_derived, dbname, events

pytestmark = pytest.mark.postgresql

TTL = 2  # seconds: the cut-off runner's lease
CONNECT_TIMEOUT = 3  # seconds: in every runner's URL, so a cut link fails fast


def ip(*args: str) -> subprocess.CompletedProcess:
    """``ip ARGS``; AssertionError with its words when it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr.strip()}"
    return done


@dataclass
class Host:
    """A runner's host: namespace NS, whose interface ``inner`` (address
    ``addr``) is joined to ``outer`` (address ``server``) in the root namespace."""

    ns: str
    outer: str
    inner: str
    server: str
    addr: str

    def cut(self) -> None:
        """The link goes down at the server's side, as a pulled cable or a dead switch port."""
        ip("link", "set", self.outer, "down")

    def mend(self) -> None:
        ip("link", "set", self.outer, "up")


class Network:
    """Two hosts on 10.X.Y.0/29 (two /30s), made by ``add`` and removed by ``remove``."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.hosts: list[Host] = []
        self.prefix = self._free_prefix()
        self.subnet = f"{self.prefix}.0/29"

    @staticmethod
    def _free_prefix() -> str:
        taken = ip("-4", "addr").stdout
        for _ in range(50):
            prefix = f"10.{secrets.randbelow(50) + 200}.{secrets.randbelow(256)}"
            if f" {prefix}." not in taken:
                return prefix
        raise AssertionError("no free 10.x.y.0/29 for the test's network")

    def add(self, name: str) -> Host:
        i = len(self.hosts)
        host = Host(ns=f"sq-{self.tag}-{name}", outer=f"sq{self.tag}{name}0", inner=f"sq{self.tag}{name}1",
                    server=f"{self.prefix}.{4 * i + 1}", addr=f"{self.prefix}.{4 * i + 2}")
        self.hosts.append(host)  # before it exists: remove() takes away whatever part was made
        ip("netns", "add", host.ns)
        ip("link", "add", host.outer, "type", "veth", "peer", "name", host.inner)
        ip("link", "set", host.inner, "netns", host.ns)
        ip("addr", "add", f"{host.server}/30", "dev", host.outer)
        ip("link", "set", host.outer, "up")
        ip("-n", host.ns, "addr", "add", f"{host.addr}/30", "dev", host.inner)
        ip("-n", host.ns, "link", "set", host.inner, "up")
        ip("-n", host.ns, "link", "set", "lo", "up")
        return host

    def remove(self) -> None:
        """Delete every link and namespace made (deleting one end of a veth deletes both)."""
        for host in self.hosts:
            subprocess.run(["ip", "link", "del", host.outer], capture_output=True, timeout=30)
            subprocess.run(["ip", "netns", "del", host.ns], capture_output=True, timeout=30)
        self.hosts.clear()


def _can_make_namespaces() -> None:
    """Skip (under CI: fail) unless this process may make network namespaces."""
    if os.geteuid() != 0:
        skip_or_fail("the many-hosts test makes network namespaces and veth pairs: it runs as root")
    if shutil.which("ip") is None:
        skip_or_fail("the many-hosts test needs `ip` (iproute2) for `ip netns`")
    probe = f"sq-probe-{secrets.token_hex(3)}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    if done.returncode != 0:
        skip_or_fail(f"`ip netns add` does not work here: {done.stderr.strip()}")


@pytest.fixture
def network():
    _can_make_namespaces()
    net = Network()
    try:
        yield net
    finally:
        names = [host.ns for host in net.hosts]
        net.remove()
        left = [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.split()[0] in names]
        assert left == [], f"the test's namespaces outlived it: {left}"


@pytest.fixture
def tcp_server(network):
    """Two hosts, A and B, and a server of our own listening on TCP on both
    root-side addresses, scram-sha-256 for the hosts' subnet only."""
    from tests.pgserver import PgServer, find_bindir, free_port

    try:
        import psycopg2  # noqa: F401
    except ImportError as e:
        skip_or_fail(f"psycopg2 is not importable ({e}); pip install -e '.[test,postgresql]' installs it")
    if find_bindir() is None:
        skip_or_fail("no PostgreSQL server binaries (initdb and pg_ctl); apt-get install postgresql")
    a, b = network.add("a"), network.add("b")
    server = PgServer(tcp=(f"{a.server},{b.server}", free_port("0.0.0.0")), networks=(network.subnet,))
    try:
        server.start()
        yield server, a, b
    finally:
        server.stop()


def runner(host: Host, url: str | None, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The real CLI on HOST: ``ip netns exec NS python -m storm_queue ARGS --root URL``."""
    argv = ["ip", "netns", "exec", host.ns, sys.executable, "-m", "storm_queue", *args, *(["--root", url] if url else [])]
    return subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=timeout)


def answer(done: subprocess.CompletedProcess, code: int = 0) -> dict:
    assert done.returncode == code, (done.args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def test_a_runner_cut_off_mid_lease_loses_the_lane_and_its_late_finish_is_refused(tcp_server, tmp_path) -> None:
    """Real processes, each in a network namespace of its own (ip netns exec)."""
    from tests.pgserver import make_url

    server, a, b = tcp_server
    password = secrets.token_urlsafe(18)
    role = server.create_role(f"op_{secrets.token_hex(3)}", password=password)
    db = server.create_database(f"storm_{secrets.token_hex(3)}", owner=role)
    with server.admin() as conn:  # the role authenticates by scram, and only over the hosts' subnet
        assert conn.execute("SELECT rolpassword LIKE 'SCRAM-SHA-256$%%' FROM pg_authid WHERE rolname = %s",
                            (role,)).fetchone()[0] is True
        rules = conn.execute("SELECT type, address, netmask, auth_method FROM pg_hba_file_rules "
                             "WHERE type = 'host'").fetchall()
    assert rules == [("host", a.server.rsplit(".", 1)[0] + ".0", "255.255.255.248", "scram-sha-256")], rules

    def url(host: Host) -> str:
        return make_url(role, db, password=password, host=host.server, port=server.port,
                        connect_timeout=str(CONNECT_TIMEOUT))

    url_a, url_b = url(a), url(b)
    wrong = make_url(role, db, password=password + "x", host=b.server, port=server.port)
    refused = runner(b, wrong, "list", "--json")  # the password is checked, and never echoed
    assert refused.returncode == 2 and "password authentication failed" in refused.stdout + refused.stderr, refused
    assert password not in refused.stdout + refused.stderr and "Traceback" not in refused.stderr

    # the operator (over TCP, from host B) makes the storm
    made = runner(b, None, "init", url_b)
    assert made.returncode == 0, made.stdout + made.stderr
    toml = tmp_path / "storm.toml"
    toml.write_text(f"[runner]\nslots = 2\nttl_min = 1\nttl = {TTL}\n")
    assert answer(runner(b, url_b, "declare", str(toml), "--json"))["outcome"] == "done"
    for slug, issue in (("a", "1"), ("b", "2"), ("c", "3")):
        answer(runner(b, url_b, "add", slug, issue, "--json"))

    # each host's runner claims a lane: A the first, B the second
    first = answer(runner(a, url_a, "claim", "--holder", "host-a", "--ttl", str(TTL), "--json"))
    assert first["decision"].startswith("run a 1 ") and first["holder"] == "host-a", first
    token = first["token"]
    other = answer(runner(b, url_b, "claim", "--holder", "host-b", "--ttl", "60", "--json"))
    assert other["decision"].startswith("run b 2 "), other

    a.cut()
    try:
        # cut off: A cannot renew, says why in one clear line, exit 5 (nothing changed, a retry is
        # safe: the server is away, it did not refuse), and never shows the password
        started = time.monotonic()
        lost = runner(a, url_a, "renew", "a", "--token", str(token), "--json")
        took = time.monotonic() - started
        assert lost.returncode == 5, (lost.stdout, lost.stderr)
        said = lost.stdout + lost.stderr
        assert "Traceback" not in said and password not in said, said
        assert "cannot connect to the database storm" in said and f"{role}:***@{a.server}" in said, said
        assert "nothing changed, a retry is safe" in said and json.loads(lost.stdout)["recorded"] is False, said
        assert took < CONNECT_TIMEOUT + 4, took  # the URL's connect_timeout bounds the wait
        # the lease runs out while A is away; B takes the lane back, under a greater token
        expires = datetime.fromisoformat(first["expires"]).timestamp()
        time.sleep(max(0.0, expires - time.time()) + 1.1)  # real processes on two hosts: the real clock
        back = answer(runner(b, url_b, "recover", "--json"))
        assert back["outcome"] == "done" and "took back a" in back["message"], back
        again = answer(runner(b, url_b, "claim", "--holder", "host-b", "--ttl", "60", "--json"))
        assert again["decision"].startswith("run a 1 ") and again["holder"] == "host-b", again
        assert again["token"] > token, (again, token)
    finally:
        a.mend()

    # A is back, late: its finish under the old token is refused, recorded, and changes nothing
    deadline = time.monotonic() + 30
    while (late := runner(a, url_a, "finish", "a", "--token", str(token), "--result", "ok", "--json")).returncode == 2 \
            and "cannot connect" in late.stderr and time.monotonic() < deadline:
        time.sleep(0.5)  # the link may take a moment to carry traffic again
    refusal = answer(late, 2)
    assert refusal["code"] == "stale_fence" and refusal["recorded"] is True, refusal
    assert password not in late.stdout + late.stderr

    # B's runs end; the storm is sound, the chain whole, the lane its derivation
    assert answer(runner(b, url_b, "finish", "a", "--token", str(again["token"]), "--result", "ok",
                         "--json"))["outcome"] == "done"
    assert answer(runner(b, url_b, "finish", "b", "--token", str(other["token"]), "--result", "ok",
                         "--json"))["outcome"] == "done"
    audit = answer(runner(a, url_a, "verify", "--json"))
    assert audit["sound"] is True, audit
    evs = assert_sound_and_derived(server, url_b)  # from the server's own host too
    assert dbname(url_b) == db and evs == events(server, url_b)
    runs = [(e["action"], e.get("slug"), e.get("token"), e.get("holder"), e.get("code"), e["by"]) for e in evs
            if e["action"] in ("claim", "expire", "finish", "recover", "refused")]
    by = f"operator:{role}"
    assert runs == [
        ("claim", "a", token, "host-a", None, by),
        ("claim", "b", other["token"], "host-b", None, by),
        ("expire", "a", token, None, None, by),
        ("claim", "a", again["token"], "host-b", None, by),
        ("refused", "a", None, None, "stale_fence", by),
        ("finish", "a", again["token"], None, None, by),
        ("finish", "b", other["token"], None, None, by),
    ], runs
    rows = {r["slug"]: r for r in answer(runner(b, url_b, "list", "--json"))["rows"]}
    assert rows["a"]["state"] == rows["b"]["state"] == "finished" and rows["c"]["state"] == "ready", rows

