"""A throwaway PostgreSQL server for the tests: initdb and pg_ctl into a
fresh temporary directory, a unix socket there, stopped and removed at the
end (and at interpreter exit). Or, given a superuser URL, an existing server
to make roles and databases in.

The server refuses to run as root: when the tests run as root (CI does),
initdb and pg_ctl run as the ``postgres`` account through ``setpriv``.
This module imports neither pytest nor the driver at import time, so it
can be read by anything; ``admin()`` and friends need the store's driver
(``storm_queue.store.postgres.driver``, psycopg2).
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "postgres"  # the superuser initdb makes (-U), whoever runs the server
RUN_AS = "postgres"  # the account that runs the server when we are root
TIMEOUT = 60  # seconds pg_ctl waits (-t); subprocesses get a little more
UNIX_PORT = 5432  # names the socket file (.s.PGSQL.5432) in our own directory


def find_bindir() -> Path | None:
    """The directory holding the server binaries (initdb and pg_ctl):
    ``pg_config --bindir`` when it holds them, else the newest
    ``/usr/lib/postgresql/*/bin`` that does; None when there is none."""

    def has_server(d: Path) -> bool:
        return all(os.access(d / name, os.X_OK) for name in ("initdb", "pg_ctl"))

    pg_config = shutil.which("pg_config")
    if pg_config:
        done = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30)
        if done.returncode == 0 and done.stdout.strip() and has_server(Path(done.stdout.strip())):
            return Path(done.stdout.strip())

    def version(d: Path) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", d.parent.name))

    candidates = [d for d in Path("/usr/lib/postgresql").glob("*/bin") if has_server(d)]
    return max(candidates, key=version) if candidates else None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on HOST that nothing listens on at the time of asking."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def make_url(user: str, dbname: str, *, password: str | None = None, host: str | None = None,
             port: int | str | None = None, **params: str) -> str:
    """A libpq URL: a host starting with ``/`` (a socket directory) goes in
    the query as ``host=``, any other host in the authority; every part is
    percent-encoded."""
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password is not None else "")
    query = dict(params)
    netloc = ""
    if host is not None and host.startswith("/"):
        query = {"host": host, **({"port": str(port)} if port is not None else {}), **params}
    elif host is not None:
        netloc = f"[{host}]" if ":" in host else host
        netloc += f":{port}" if port is not None else ""
    elif port is not None:
        query = {"port": str(port), **params}
    tail = "&".join(f"{quote(k, safe='')}={quote(str(v), safe='/')}" for k, v in query.items())
    return f"postgresql://{auth}@{netloc}/{quote(dbname, safe='')}" + (f"?{tail}" if tail else "")


class PgServer:
    """One PostgreSQL server for tests.

    ``PgServer()`` is a server of our own, listening only on a unix socket
    in its temporary directory, ``local all all trust``.
    ``PgServer(tcp=("127.0.0.1", port))`` also listens on that address and
    port (the address may be a comma-separated list, as
    ``listen_addresses`` takes it), where every role authenticates with
    scram-sha-256 (``host all all NETWORK scram-sha-256`` for each of
    ``networks``: by default ``0.0.0.0/0`` and ``::/0``).
    ``PgServer(url=SUPERUSER_URL)`` uses an existing server instead: roles
    and databases are made there, it is never started, stopped or restarted.
    ``settings`` are extra ``postgresql.conf`` lines (name: value).
    """

    def __init__(self, *, tcp: tuple[str, int] | None = None, url: str | None = None,
                 settings: dict[str, str] | None = None, bindir: Path | None = None,
                 networks: tuple[str, ...] = ("0.0.0.0/0", "::/0")):
        self.tcp = tcp
        self.networks = tuple(networks)
        self.external_url = url
        self.settings = dict(settings or {})
        self.bindir = bindir
        self.dir: Path | None = None  # the temporary directory: data/, server.log, the socket
        self.port = tcp[1] if tcp else UNIX_PORT
        self._passwords: dict[str, str] = {}
        self._owner_pid: int | None = None  # the process that started the server (atexit)

    # -- life ----------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether start() has made a server that stop() has not ended."""
        return self.dir is not None

    def start(self) -> PgServer:
        """Make and start the server (a no-op when running); on return it
        accepts connections. With an existing server, check that the URL
        connects as a superuser. Raises RuntimeError naming what failed."""
        if self.external_url is not None:
            with self.admin() as conn:
                if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = session_user").fetchone()[0]:
                    raise RuntimeError("STORM_QUEUE_TEST_URL must connect as a superuser")
            return self
        if self.running:
            return self
        bindir = self.bindir or find_bindir()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl); apt-get install postgresql")
        self.bindir = bindir
        account = self._account()
        self.dir = Path(tempfile.mkdtemp(prefix="storm-pg-", dir=_temp_parent() if account else None))
        self._owner_pid = os.getpid()
        atexit.register(self._at_exit)
        try:
            os.chmod(self.dir, 0o700)
            if account:
                os.chown(self.dir, account.pw_uid, account.pw_gid)
            self._run("initdb", "-D", self.data, "-U", SUPERUSER, "-A", "trust",
                      "-E", "UTF8", "--locale=C", "--no-sync")
            self._configure()
            self._run("pg_ctl", "start", "-D", self.data, "-l", self.log, "-w", "-t", str(TIMEOUT))
        except BaseException:
            self._discard()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (immediately: the data are thrown away) and
        remove its directory. A no-op when not running or not ours."""
        if self.external_url is not None or not self.running:
            return
        self._discard()

    def restart(self, mode: str = "immediate") -> None:
        """``pg_ctl restart -m MODE``: every open connection is dropped,
        committed data stay; on return the server accepts connections again.
        Skips the calling test on a server we did not start."""
        if self.external_url is not None:
            import pytest

            pytest.skip("cannot restart a server it did not start (STORM_QUEUE_TEST_URL names it)")
        if not self.running:
            raise RuntimeError("restart: the server is not running")
        self._run("pg_ctl", "restart", "-D", self.data, "-m", mode, "-l", self.log, "-w", "-t", str(TIMEOUT))

    @contextmanager
    def stopped(self, mode: str = "fast"):
        """``pg_ctl stop -m MODE`` for the ``with`` block, started again
        after it (committed data stay): a server that cannot be reached.
        Skips the calling test on a server we did not start."""
        if self.external_url is not None:
            import pytest

            pytest.skip("cannot stop a server it did not start (STORM_QUEUE_TEST_URL names it)")
        if not self.running:
            raise RuntimeError("stopped: the server is not running")
        self._run("pg_ctl", "stop", "-D", self.data, "-m", mode, "-w", "-t", str(TIMEOUT))
        try:
            yield self
        finally:
            self._run("pg_ctl", "start", "-D", self.data, "-l", self.log, "-w", "-t", str(TIMEOUT))

    def log_text(self) -> str:
        """The server's log so far; empty for a server we did not start."""
        if self.external_url is not None or not self.running:
            return ""
        path = Path(self.log)
        return path.read_text(errors="replace") if path.exists() else ""

    # -- URLs and connections ------------------------------------------------

    def url(self, dbname: str, user: str, password: str | None = None, host: str | None = None) -> str:
        """A libpq URL for USER on DBNAME: through the unix socket
        (``postgresql://USER@/DB?host=SOCKDIR&port=5432``), or with HOST
        over TCP to this server's TCP port. A role made with a password
        (or given one here) has it in the URL."""
        password = password if password is not None else self._passwords.get(user)
        if self.external_url is not None:
            from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

            info = {k: str(v) for k, v in conninfo_to_dict(self.external_url).items()
                    if k not in ("user", "password", "dbname")}
            if host is not None:
                info["host"] = host
            return make_url(user, dbname, password=password, **info)
        if not self.running:
            raise RuntimeError("url: the server is not running")
        if host is None:
            return make_url(user, dbname, password=password, host=str(self.dir), port=self.port)
        if self.tcp is None:
            raise ValueError("url(host=...): this server listens on no TCP address (PgServer(tcp=...))")
        return make_url(user, dbname, password=password, host=host, port=self.port)

    def url_as(self, url: str, user: str, password: str | None = None) -> str:
        """URL (same server, database and parameters) for another role."""
        from storm_queue.store.postgres.driver import conninfo as conninfo_to_dict

        info = {k: str(v) for k, v in conninfo_to_dict(url).items() if k not in ("user", "password")}
        password = password if password is not None else self._passwords.get(user)
        return make_url(user, info.pop("dbname"), password=password, **info)

    def admin_url(self, dbname: str | None = None) -> str:
        """The superuser's connection string on DBNAME (default: postgres,
        or the database STORM_QUEUE_TEST_URL names): a URL on our own
        server, the given URL (as key=value with another DBNAME) otherwise."""
        if self.external_url is not None:
            if dbname is None:
                return self.external_url
            from psycopg2.extensions import make_dsn as make_conninfo

            return make_conninfo(self.external_url, dbname=dbname)
        return self.url(dbname or "postgres", SUPERUSER)

    def admin(self, dbname: str | None = None):
        """A new connection (the store's driver) as the superuser, in autocommit."""
        from storm_queue.store.postgres import driver

        return driver.connect(self.admin_url(dbname), connect_timeout=TIMEOUT)

    # -- roles and databases -------------------------------------------------

    def create_role(self, name: str, password: str | None = None, login: bool = True) -> str:
        """Create role NAME (never a superuser), with PASSWORD stored as
        scram-sha-256 when given; returns NAME. On a server we did not
        start, a login role without a password gets a random one (its
        authentication may not trust the socket), which url() then uses."""
        from psycopg2 import sql

        if password is None and login and self.external_url is not None:
            password = secrets.token_urlsafe(16)
        if password is not None:
            self._passwords[name] = password
        query = sql.SQL("CREATE ROLE {} {} NOSUPERUSER NOCREATEDB NOCREATEROLE").format(
            sql.Identifier(name), sql.SQL("LOGIN" if login else "NOLOGIN"))
        if password is not None:
            query = sql.SQL("{} PASSWORD {}").format(query, sql.Literal(password))
        with self.admin() as conn:
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(query)
        return name

    def create_database(self, name: str, owner: str) -> str:
        """Create an empty database NAME (from template0) owned by OWNER; returns NAME."""
        from psycopg2 import sql

        with self.admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE template0").format(
                sql.Identifier(name), sql.Identifier(owner)))
        return name

    def drop_database(self, name: str) -> None:
        """Drop database NAME if it exists, ending its connections first."""
        from psycopg2 import sql

        with self.admin() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            force = sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}{}").format(sql.Identifier(name), force))

    def drop_role(self, name: str) -> None:
        """Drop role NAME if it exists, ending its connections and dropping
        what it owns or was granted in the admin database first (drop the
        databases it owns before)."""
        from psycopg2 import sql

        with self.admin() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE usename = %s AND pid <> pg_backend_pid()", (name,))
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
        self._passwords.pop(name, None)

    # -- inside --------------------------------------------------------------

    @property
    def data(self) -> str:
        return str(self.dir / "data")

    @property
    def log(self) -> str:
        return str(self.dir / "server.log")

    @staticmethod
    def _account() -> pwd.struct_passwd | None:
        """The account to run the server as: postgres when we are root, else None (ourselves)."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(RUN_AS)
        except KeyError:
            raise RuntimeError(f"running as root, the server needs an account {RUN_AS!r} to run as "
                               "(apt-get install postgresql makes one)") from None

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        """Run bindir/TOOL ARGS as the server's account, in the server's
        directory, without the caller's PG* variables; RuntimeError with
        its output (and the server log) when it fails."""
        argv = [str(self.bindir / tool), *args]
        if self._account():
            argv = ["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--clear-groups", "--", *argv]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        done = subprocess.run(argv, cwd=self.dir, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT + 30)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
                               f"\n--- server log ---\n{self.log_text()}")
        return done

    def _configure(self) -> None:
        """Socket in our directory, TCP only when asked, scram passwords,
        and pg_hba: trust on the socket, scram-sha-256 over TCP."""

        def literal(value) -> str:
            return "'" + str(value).replace("'", "''") + "'"

        conf = {"port": str(self.port),
                "unix_socket_directories": literal(self.dir),
                "listen_addresses": literal(self.tcp[0] if self.tcp else ""),
                "password_encryption": "'scram-sha-256'",
                **self.settings}
        # Appending and truncating keep the files' owner (initdb's account).
        with open(Path(self.data) / "postgresql.conf", "a") as f:
            f.write("\n# tests/pgserver.py\n" + "".join(f"{k} = {v}\n" for k, v in conf.items()))
        hba = "local all all trust\n"
        if self.tcp:
            hba += "".join(f"host all all {net} scram-sha-256\n" for net in self.networks)
        with open(Path(self.data) / "pg_hba.conf", "w") as f:
            f.write(hba)

    def _discard(self) -> None:
        """Stop the server if it runs (pg_ctl stop -m immediate, else
        SIGQUIT to its postmaster) and remove the directory."""
        if self.dir is None:
            return
        try:
            if (Path(self.data) / "postmaster.pid").exists():
                try:
                    self._run("pg_ctl", "stop", "-D", self.data, "-m", "immediate", "-w", "-t", str(TIMEOUT))
                except (RuntimeError, subprocess.TimeoutExpired):
                    _quit_postmaster(Path(self.data) / "postmaster.pid")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _at_exit(self) -> None:
        """At interpreter exit, discard the server, but only in the process
        that started it (a forked child exiting must not stop it)."""
        if os.getpid() == self._owner_pid:
            self._discard()


def _quit_postmaster(pidfile: Path) -> None:
    """SIGQUIT (immediate shutdown) to the postmaster named in PIDFILE, if any."""
    try:
        os.kill(int(pidfile.read_text().split()[0]), signal.SIGQUIT)
    except (OSError, ValueError, IndexError):
        pass


def _temp_parent() -> str:
    """Where the server's directory goes when we are root: the usual temp
    directory when every directory above it lets others through, else /tmp."""
    parent = Path(tempfile.gettempdir()).resolve()
    if all(p.stat().st_mode & 0o001 for p in (parent, *parent.parents)):
        return str(parent)
    return "/tmp"
