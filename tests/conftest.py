"""Shared fixtures: build a storm directory, run the real command line (in
the test's own process, or as a real process where the process is what is
tested), and a throwaway PostgreSQL server with a fresh database per test.

The command line in the test's process (``run_main``, and ``run_cli``, which
calls it unless told ``process=True``): the same argv through the same entry
point the installed script and ``python -m storm_queue`` call,
``storm_queue.cli.entry.main``, with the process around it made to look as a
fresh ``python -m storm_queue`` child's would, and put back afterwards:

- ``sys.argv`` is ``[storm_queue/__main__.py, *ARGS]`` (what ``-m`` gives);
- ``os.environ`` is exactly the env the caller passed (the child got
  ``env or clean_env()``), put in place item by item so that libpq and
  ``time.tzset`` see it too; ``cwd`` is chdir'ed to when given;
- stdin is empty (the child inherited the test's stdin, /dev/null) unless
  ``stdin`` bytes are given; stdout and stderr are text streams over bytes
  (with ``.buffer``), encoded as a child's are (this interpreter's
  ``sys.__stdout__`` encoding and error handler: UTF-8 with surrogateescape
  under C.UTF-8; stderr line-buffered with backslashreplace) and decoded as
  ``subprocess.run(text=True)`` decodes (the locale's encoding, strict,
  universal newlines), or returned as bytes with ``text=False``. An env that
  changes the locale's variables is refused: the child would encode otherwise;
- ``SystemExit`` gives the exit code (None 0, a number that number, any
  other value printed on stderr and 1); an exception escaping ``main``
  prints its traceback on stderr and is exit 1, as the interpreter does;
- warnings are filtered and printed on stderr as a fresh interpreter does
  (not recorded by pytest);
- the signal handlers of SIGINT, SIGTERM, SIGALRM, SIGWINCH and SIGUSR1, the
  real timer and the signal mask are put back; at ``timeout`` a watchdog
  thread sends the main thread SIGUSR1, whose handler ends the call (a wait
  in flock(2) or a sleep too) with ``subprocess.TimeoutExpired`` (not
  SIGALRM: the writers' lock holds back another's alarm while it waits);
- the state the CLI keeps in module globals between calls in one process
  (``IN_PROCESS_STATE``: the events ``writer.appended`` recorded, the
  lock's ``on_wait`` and ``_armed``, the URLs ``roots.SEEN`` has seen, a
  waiting claim's ``answer.WAITING``) is
  fresh for the call and put back after it; every PostgreSQL connection the
  call opened (through the store's driver, ``driver.connect``, the tests'
  too) is closed at its end.
  ``tests/unit/test_in_process.py`` proves no other module global of the
  package changes across calls, and no descriptor is left open.

``run_main(..., click=True)`` runs click's command line instead
(``storm_queue.cli.app.main``, what ``python -c CLICK`` runs), for the tests
that compare the quick path with click's. What an in-process call cannot
make as a fresh process has it: its parent (a default claim holder names
``os.getppid()``), the modules already loaded (what a command imports), and
a record class's ``__init__``, compiled once the class is much used (the
same binding, only faster); the tests of the first two keep a real process.

An in-process call swaps process-wide state, so it is refused off the main
thread and inside another in-process call. What needs a real process keeps
one (``run_cli(..., process=True)``, or its own ``subprocess``), and says why
in its docstring: signals (SIGINT, SIGTERM, SIGKILL, Ctrl-C), the installed
script and what a command imports at start-up, a second uid, kill -9 and
crash harnesses, tmux and pseudo-terminals, several processes at once (or
threads calling the command line at once), shell scripts (examples/runner.sh,
shell completion), and the parent process a default holder names.
"""

from __future__ import annotations

import io
import json
import locale
import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
import traceback
import warnings
from pathlib import Path

import pytest
from hypothesis import Phase, settings

REPO = Path(__file__).resolve().parent.parent

# Hypothesis profiles: "slow", the full run's, loaded unless ``--hypothesis-profile
# NAME`` says otherwise (hypothesis' own defaults: a test's own max_examples stands);
# "quick", the edit-run loop's, where a property asks for fewer examples
# (``examples``); "mutants", tests/mutants/plant.py's: the full run's examples in a
# fixed order, not shrunk, no example database (a run is repeatable, and keeps no
# failing example for a later run to replay). Registered here, before hypothesis'
# plugin loads the one asked for.
settings.register_profile("slow", settings.get_profile("default"))
settings.register_profile("quick", max_examples=10)
settings.register_profile("mutants", derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("slow")


def examples(slow: int, quick: int = 10) -> int:
    """How many examples a property runs under the profile loaded: ``slow``
    in the full run, ``quick`` under ``--hypothesis-profile quick``. Read
    when its module is collected (after the plugin loaded the profile)."""
    return quick if settings.get_current_profile_name() == "quick" else slow

# The suite may be started with SIGINT ignored: ``nohup pytest … &`` (a shell
# ignores SIGINT in what it starts in the background), and an ignored signal
# is inherited by every child across exec. A test that signals a child
# (``examples/runner.sh``, which cannot trap a signal ignored on entry; a
# ``python -m storm_queue``, which then never raises KeyboardInterrupt) would
# wait for an end that never comes. So this process handles SIGINT as Python
# does by default, and every child starts with it at its default (exec
# resets a handled signal); tests/children.py's ``start`` resets it in the
# child too (issue 33, item 11).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _children_end():
    """Every child a test started with ``tests.children.start`` ends with
    the test: its whole session (a runner's lanes' process groups too)."""
    yield
    from tests.children import stop_all

    stop_all()


def make_storm(root: Path, queue: str = "", *, integrated=(), abandoned=(), finished=(), running=(),
               unattended: bool = False, toml: str | None = None) -> Path:
    """Write a storm: queue.txt, the ledgers, result.json and running markers."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "queue.txt").write_text(queue)
    if integrated:
        (root / "integrated.txt").write_text("".join(s + "\n" for s in integrated))
    if abandoned:
        (root / "abandoned.txt").write_text("".join(s + "\n" for s in abandoned))
    for slug in finished:
        marks = root / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True, exist_ok=True)
        (marks / "result.json").write_text('{"status": "ok"}\n')
    for slug in running:
        marks = root / "lanes" / slug / ".qwenstorm"
        marks.mkdir(parents=True, exist_ok=True)
        (marks / "running").write_text("")
    if unattended:
        (root / "UNATTENDED").write_text("")
    if toml is not None:
        (root / "storm.toml").write_text(toml)
    return root


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STORM_QUEUE_LANE", "STORM_QUEUE_ROOT")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_cli(root: Path | str | None, *args: str, env: dict[str, str] | None = None,
            cwd: Path | str | None = None, timeout: float = 60, process: bool = False) -> subprocess.CompletedProcess:
    """Run ``storm-queue ARGS --root ROOT`` (no ``--root`` when ROOT is
    None): in this process (``run_main``), or with ``process`` as a real
    ``python -m storm_queue`` process. Text out, as ``subprocess.run(text=True)``."""
    words = [*args, *(["--root", str(root)] if root is not None else [])]
    if process:
        return subprocess.run([*PYTHON_M, *words], capture_output=True, text=True, env=env or clean_env(), cwd=cwd,
                              timeout=timeout)
    return run_main(words, env=env, cwd=cwd, timeout=timeout)


#: what a real process of the command line runs, and what an in-process call reports as its ``args``
PYTHON_M = [sys.executable, "-m", "storm_queue"]
#: the environment's variables that decide how a child encodes its streams
LOCALE_VARS = ("LC_ALL", "LC_CTYPE", "LANG", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONLEGACYWINDOWSSTDIO")
#: module globals the CLI keeps between calls in one process: (module, name,
#: its value in a fresh process); each is fresh for an in-process call and
#: put back after it
IN_PROCESS_STATE = (
    ("storm_queue.store.directory.log.writer", "appended", list),
    ("storm_queue.store.directory.log.lock", "on_wait", lambda: None),
    ("storm_queue.store.directory.log.lock", "_armed", lambda: False),
    ("storm_queue.roots", "SEEN", list),
    ("storm_queue.cli.answer", "WAITING", list),
)
#: the signals whose handlers a call may set
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGWINCH, signal.SIGUSR1)
#: the warning filters of a fresh interpreter (no -W, no -X dev)
FRESH_FILTERS = [("default", None, DeprecationWarning, "__main__", 0), ("ignore", None, DeprecationWarning, None, 0),
                 ("ignore", None, PendingDeprecationWarning, None, 0), ("ignore", None, ImportWarning, None, 0),
                 ("ignore", None, ResourceWarning, None, 0)]
_in_call = threading.Lock()


class _TimedOut(BaseException):
    """The in-process call's timer expired (not an ``Exception``: no handler of the CLI takes it)."""


class _Watchdog:
    """Ends the main thread's call at ``timeout`` seconds: a timer thread
    sends it SIGUSR1, whose handler raises ``_TimedOut`` while armed."""

    def __init__(self, timeout: float | None):
        self.timeout, self.armed, self.timer = timeout, False, None

    def __enter__(self) -> "_Watchdog":
        if self.timeout is not None:
            signal.signal(signal.SIGUSR1, self._expire)
            self.armed = True
            self.timer = threading.Timer(self.timeout, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1))
            self.timer.daemon = True
            self.timer.start()
        return self

    def _expire(self, signum: int, frame: object) -> None:
        if self.armed:
            self.armed = False
            raise _TimedOut

    def disarm(self) -> None:
        """No expiry from here on; a signal already sent is taken (and ignored) before this returns."""
        self.armed = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join(timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.disarm()


class _Kept(io.BytesIO):
    """The bytes a stream was given, kept when the CLI closes it."""

    kept = b""

    def close(self) -> None:
        if not self.closed:
            self.kept = self.getvalue()
        super().close()

    def value(self) -> bytes:
        return self.kept if self.closed else self.getvalue()


def _stream(like, data: bytes = b"", **kw) -> io.TextIOWrapper:
    """A text stream over bytes, encoded as a child's stream ``like`` (``sys.__stdout__`` ...) is."""
    return io.TextIOWrapper(_Kept(data), encoding=getattr(like, "encoding", None) or "utf-8",
                            errors=getattr(like, "errors", None) or "strict", **kw)


def _decoded(data: bytes) -> str:
    """``data`` as ``subprocess.run(text=True)`` gives it: the locale's encoding, strict, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _exit_code(code: object, stderr) -> int:
    """The process's exit status for ``sys.exit(code)``, as the interpreter makes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    stderr.write(f"{code}\n")
    return 1


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


def _swap_state() -> list[tuple[object, str, object]]:
    """Make each of ``IN_PROCESS_STATE`` fresh; returns what to put back."""
    saved = []
    for module, name, fresh in IN_PROCESS_STATE:
        mod = sys.modules.get(module)
        if mod is not None:
            saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, fresh())
    return saved


def _restore_state(saved: list[tuple[object, str, object]]) -> None:
    """Put back what ``_swap_state`` saved; a module the call loaded gets its fresh value."""
    for module, name, fresh in IN_PROCESS_STATE:
        mod = sys.modules.get(module)
        if mod is not None:
            setattr(mod, name, fresh())
    for mod, name, value in saved:
        setattr(mod, name, value)


#: the drivers whose connections a call may open: (the module, its connect, its connection class)
DRIVERS = (("storm_queue.store.postgres.driver", "connect", "Connection"),)  # the store's, the tests' too


def _connections():
    """Record every connection each driver's ``connect`` opens from now on
    (``DRIVERS``, those loaded now); returns (the list, a function that
    stops recording)."""
    made: list = []
    undo = []
    for name, attr, _ in DRIVERS:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        opener = getattr(mod, attr)

        def connect(*args, _opener=opener, **kwargs):
            conn = _opener(*args, **kwargs)
            made.append(conn)
            return conn

        setattr(mod, attr, connect)
        undo.append((mod, attr, opener))

    def stop() -> None:
        for mod, attr, opener in undo:
            setattr(mod, attr, opener)

    return made, stop


def _close_connections(made: list, loaded_before: set[str]) -> None:
    """Close what the call left open (a process's end closes them; a
    connection left to the garbage collector would close its socket in
    the middle of a later test): the connections recorded, and, for a
    driver the call itself loaded, every open one (none existed before)."""
    import gc

    for name, _, cls in DRIVERS:
        if name not in loaded_before and name in sys.modules:
            kind = getattr(sys.modules[name], cls)
            made = made + [o for o in gc.get_objects() if isinstance(o, kind)]
    for conn in made:
        if not conn.closed:
            conn.close()


def run_main(args, *, env: dict[str, str] | None = None, cwd: Path | str | None = None, stdin: bytes = b"",
             text: bool = True, timeout: float | None = 60, click: bool = False) -> subprocess.CompletedProcess:
    """``storm-queue ARGS`` in this process, as ``subprocess.run([*PYTHON_M,
    *ARGS], capture_output=True, text=TEXT, env=env or clean_env(), cwd=cwd,
    timeout=timeout)`` would run it (see the module's docstring). ARGS may
    be str or bytes (decoded as a child decodes its argv). With ``click``,
    click's command line itself (``storm_queue.cli.app.main``, what
    ``python -c CLICK`` runs) instead of the console script's ``entry.main``."""
    env = dict(env or clean_env())
    words = [os.fsdecode(a) for a in args]
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("an in-process call swaps the process's environment, cwd and streams: "
                           "from a thread, call run_cli(..., process=True)")
    if not _in_call.acquire(blocking=False):
        raise RuntimeError("an in-process call inside another one")
    try:
        changed = [k for k in LOCALE_VARS if env.get(k) != os.environ.get(k)]
        if changed:
            raise RuntimeError(f"env changes {changed}: a child would encode its streams otherwise; "
                               "use a real process")
        return _call(words, env, cwd, stdin, text, timeout, click)
    finally:
        _in_call.release()


#: what ``python -c CLICK`` runs: click's command line, without the quick path
CLICK = "import sys; from storm_queue.cli.app import main; main(prog_name='storm-queue')"


def _call(words: list[str], env: dict[str, str], cwd, stdin: bytes, text: bool, timeout: float | None, click: bool):
    from storm_queue.cli import entry

    if click:
        from storm_queue.cli.app import main as click_main

        argv, argv0 = [sys.executable, "-c", CLICK, *words], "-c"
        main = lambda: click_main(prog_name="storm-queue")  # noqa: E731
    else:
        argv, argv0 = [*PYTHON_M, *words], os.path.join(os.path.dirname(os.path.dirname(entry.__file__)), "__main__.py")
        main = entry.main
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_handlers = {s: signal.getsignal(s) for s in SIGNALS}
    saved_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    saved_timer = signal.getitimer(signal.ITIMER_REAL)
    out = _stream(sys.__stdout__)
    err = _stream(sys.__stderr__, line_buffering=True)
    out_bytes, err_bytes = out.buffer, err.buffer
    tz = os.environ.get("TZ")
    saved_state = _swap_state()
    had_drivers = {name for name, _, _ in DRIVERS if name in sys.modules}
    made, stop_recording = _connections()
    timed_out = False
    code = 0
    try:
        os.environ.clear()
        os.environ.update(env)
        if env.get("TZ") != tz:
            import time

            time.tzset()
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [argv0, *words]
        sys.stdin = _stream(sys.__stdin__, stdin)
        sys.stdout, sys.stderr = out, err
        try:
            with warnings.catch_warnings(), _Watchdog(timeout) as watchdog:
                warnings.filters[:] = [(a, m, c, mod, ln) for a, m, c, mod, ln in FRESH_FILTERS]
                warnings._filters_mutated()
                warnings.showwarning = _show_warning
                try:
                    main()
                finally:
                    watchdog.disarm()
        except SystemExit as exc:
            code = _exit_code(exc.code, err)
        except _TimedOut:
            timed_out = True
        except Exception:  # noqa: BLE001 -- as the interpreter does with an uncaught exception
            traceback.print_exc(file=err)
            code = 1
        for stream in (out, err):
            try:
                stream.flush()
            except ValueError:  # closed by the call
                pass
    finally:
        if saved_timer == (0.0, 0.0):  # one the call left running (the lock puts back a timer it found itself)
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in saved_handlers.items():
            if handler is not None:
                signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, saved_mask)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        if os.environ.get("TZ") != env.get("TZ"):
            import time

            time.tzset()
        stop_recording()
        _close_connections(made, had_drivers)
        _restore_state(saved_state)
    stdout, stderr = out_bytes.value(), err_bytes.value()
    if timed_out:
        raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
    if text:
        stdout, stderr = _decoded(stdout), _decoded(stderr)
    return subprocess.CompletedProcess(argv, code, stdout, stderr)


def drain(fd: int) -> bytes:
    """Everything a pseudo-terminal's main side gives until the other side
    closes; ``fd`` is closed afterwards."""
    out = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        out.append(chunk)
    os.close(fd)
    return b"".join(out)


def tree(root: Path, times: bool = False) -> dict[str, tuple]:
    """Every path under ``root``: mode, owner, group, size, bytes (None for
    what is not a regular file) and, with ``times``, mtime: to prove a
    command wrote nothing (a writer's flock of the lock file may touch it)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, data) + ((st.st_mtime_ns,) if times else ())
    return out


def log_events(root: Path, name: str = "priority.log") -> list[dict]:
    path = root / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines()]


class Clock:
    """The wall clock as storm-queue reads it in this process
    (``storm_queue.wall.clock``): the real time, plus however far a test
    moved it on (``advance``) instead of sleeping until a lease or a
    schedule is past. It only moves forward, as the real one does. A
    real process (``run_cli(..., process=True)``) keeps the real clock.

    A database storm's runner requests are timed by the server's clock:
    ``advance`` moves the clock of every storm in the test's databases
    (``storm_queue.clock``, a table only the operator or a superuser may
    write) by as much, so both sides of a storm keep one time."""

    def __init__(self, request=None) -> None:
        import time

        self._time, self.ahead, self._request, self._still = time.time, 0.0, request, None

    def __call__(self) -> float:
        return self._time() + self.ahead

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "the clock only moves forward"
        self.ahead += seconds
        self._move_servers()

    def _move_servers(self) -> None:
        """The storms of the test's databases (those ``pg_database`` made) run ``ahead`` too."""
        request = self._request
        if request is None or "_pg_cleanup" not in request.fixturenames:
            return
        server = request.getfixturevalue("pg_server")
        for name in request.getfixturevalue("_pg_cleanup")["databases"]:
            with server.admin(name) as conn:
                if conn.execute("SELECT to_regclass('storm_queue.clock')").fetchone()[0] is not None:
                    conn.execute("UPDATE storm_queue.clock SET ahead = make_interval(secs => %s), "
                                 "fixed = to_timestamp(%s)", (self.ahead, None if self._still is None else self()))

    def stand_still(self) -> None:
        """From now on the clock moves only when ``advance`` moves it: steps
        that must happen at one moment (claims within a short lease) do,
        however slow the machine, with no timer to assert. A database
        storm's clock stands still with it (``storm_queue.clock``'s ``fixed``)."""
        at = self._time()
        self._time, self._still = (lambda: at), at
        self._move_servers()


@pytest.fixture
def clock(monkeypatch, request) -> Clock:
    """The injected clock of every in-process call of this test (and of its database storms' servers)."""
    from storm_queue import wall

    moved = Clock(request)
    monkeypatch.setattr(wall, "clock", moved)
    return moved


@pytest.fixture
def storm(tmp_path: Path):
    """A factory: ``storm("a 1\\nb 2\\n", integrated=["b"])`` returns the root."""

    def factory(queue: str = "", **kwargs) -> Path:
        return make_storm(tmp_path / "storm", queue, **kwargs)

    return factory


def write_log(root: Path, bodies, at: str = "2026-11-30T00:00:00.000000Z", by: str = "operator:op",
              name: str = "priority.log") -> int:
    """Write a well-formed, witnessed log of ``bodies`` (an iterable of event
    bodies, each with its ``action``) straight to disk, streaming, without
    the request path: for views and benches that need a long history.
    Returns the number of lines written."""
    from storm_queue.core.framing import digest
    from storm_queue.core.framing import frame

    seq, prev, length = 0, None, 0
    with open(root / name, "wb") as f:
        for body in bodies:
            (event, line), = frame([body], seq, prev, at, by)
            f.write(line)
            seq, prev, length = event["seq"], digest(line), length + len(line)
    witness = {"log": name, "length": length, "seq": seq, "digest": prev, "at": at}
    (root / f".{name}.witness").write_text(json.dumps(witness) + "\n")
    return seq


# -- PostgreSQL: a throwaway server of our own (tests/pgserver.py) -----------

def in_ci() -> bool:
    """Whether this run is CI's: $CI set to anything but "", "0" or "false".
    There a missing server or driver is a failure, never a skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def skip_or_fail(reason: str):
    """Skip the test with REASON, or fail it under CI (a skip there is a failure)."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: the database tests must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_server():
    """The session's one PostgreSQL server (a ``tests.pgserver.PgServer``,
    with ``fsync = off``: see below), started on first use and stopped at the session's end; the server
    $STORM_QUEUE_TEST_URL names (a superuser URL) when set. Skips, or
    under CI fails, when psycopg2 or the server binaries are missing."""
    from tests.pgserver import PgServer, find_bindir

    try:
        import psycopg2  # noqa: F401
    except ImportError as e:
        skip_or_fail(f"psycopg2 is not importable ({e}); pip install -e '.[test,postgresql]' installs it")
    external = os.environ.get("STORM_QUEUE_TEST_URL") or None
    if external is None and find_bindir() is None:
        skip_or_fail("no PostgreSQL server binaries (initdb and pg_ctl: not in `pg_config --bindir` nor "
                    "/usr/lib/postgresql/*/bin); install them with `apt-get install postgresql`, "
                    "or set STORM_QUEUE_TEST_URL to a superuser URL of a server to use")
    # fsync off: no test of the database store pulls the machine's power, and a
    # server killed or restarted with -m immediate keeps what it committed,
    # which the operating system's cache still holds (the tests that kill and
    # restart it prove exactly that). Durability across a power loss is the
    # server's own promise, not the tool's.
    server = PgServer(url=external, settings=None if external else {"fsync": "off"}).start()
    yield server
    server.stop()


@pytest.fixture
def _pg_cleanup(pg_server):
    """What a test's pg_url and pg_role made, dropped after it: the
    databases first (their connections ended), then the roles."""
    made = {"databases": [], "roles": []}
    yield made
    for name in reversed(made["databases"]):
        pg_server.drop_database(name)
    for name in reversed(made["roles"]):
        pg_server.drop_role(name)


@pytest.fixture
def pg_role(pg_server, _pg_cleanup):
    """A factory: ``pg_role(password=None, login=True, prefix="stranger")``
    creates a fresh role (never a superuser, owning nothing) and returns its
    name; dropped after the test. ``pg_server.url_as(pg_url, name)`` is
    the URL for it on the test's database."""

    def factory(password: str | None = None, login: bool = True, prefix: str = "stranger") -> str:
        name = f"{prefix}_{secrets.token_hex(4)}"
        _pg_cleanup["roles"].append(name)
        return pg_server.create_role(name, password=password, login=login)

    return factory


@pytest.fixture
def pg_database(pg_server, _pg_cleanup):
    """A factory: ``pg_database()`` returns the libpq URL of a fresh empty
    database ``storm_<hex>`` owned by a fresh login role ``op_<hex>`` (not
    a superuser; as the owner it may CREATE SCHEMA), connecting as that
    role; each call a new pair, all dropped after the test."""

    def factory() -> str:
        tag = secrets.token_hex(4)
        role, dbname = f"op_{tag}", f"storm_{tag}"
        _pg_cleanup["roles"].append(role)
        pg_server.create_role(role)
        _pg_cleanup["databases"].append(dbname)
        pg_server.create_database(dbname, owner=role)
        return pg_server.url(dbname, role)

    return factory


@pytest.fixture
def pg_url(pg_database) -> str:
    """The URL of the test's own fresh database, as its owner (see pg_database)."""
    return pg_database()


@pytest.fixture(params=["directory", pytest.param("database", marks=pytest.mark.postgresql)])
def store(request, tmp_path: Path):
    """One storm under test, kept by each store in turn (tests/stores.py):
    a ``DirectoryStorm`` under tmp_path, then a ``DatabaseStorm`` in a fresh
    database of the session's throwaway server. A contract test that takes
    ``store`` runs once on each; build it with ``store.make(queue, ...)``."""
    from tests.stores import open_store

    return open_store(request.param, request, tmp_path)


#: what the quick run (``pytest -m "not slow"``, the edit-run loop) leaves
#: out besides the database's tests: processes killed, crashed and raced,
#: the benchmarks' smoke runs, the state machines, the example runner's
#: scripts, the live view in tmux, the 100,000-deep chains
SLOW = ("tests/faults/", "tests/bench_smoke/", "tests/stateful/", "tests/cli/test_runner", "tests/cli/test_watch.py",
        "tests/unit/test_deep.py")


def pytest_collection_modifyitems(items):
    """Every test that uses the server (through any pg_* fixture) carries
    the ``postgresql`` marker, so ``-m "not postgresql"`` leaves them out;
    those and the suites of ``SLOW`` carry ``slow``, so ``-m "not slow"``
    is the quick run."""
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgresql)
        path = Path(str(item.fspath)).resolve()
        ours = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else ""
        if item.get_closest_marker("postgresql") or ours.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
