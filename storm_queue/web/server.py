"""``storm-queue serve``: the standard library's HTTP server, with what it
leaves to its user done here. No framework: the view is a handful of
read-only GET routes on one process, and ``http.server`` parses a request
line and headers well; what it does not do is bound anything.

- Threads: a fixed pool of ``WORKERS`` threads takes connections from a
  queue of at most ``QUEUED``; a connection beyond that is answered 503 at
  once and closed (``ThreadingHTTPServer`` starts a thread per connection,
  without limit).
- Time: the request line and headers must arrive within ``HEAD_SECONDS``
  in all (not per read: a client that sends a byte a second is cut off
  too), and an answer must be taken within ``SEND_SECONDS``.
- Size: the request line and headers together at most ``HEAD_BYTES``
  (414 for a longer request line, 431 for longer headers); no body is read.
- Methods: GET and HEAD; every other answers 405 with ``Allow``.
- Paths: the few it serves (``web.routes``); any other path, or a query it
  does not know, answers 404 without echoing it.
- Who: without ``--token-file`` it binds a loopback address only, and
  answers only a request whose ``Host`` names a loopback host (else 403),
  so a web page whose name was made to resolve to 127.0.0.1 (DNS
  rebinding) cannot read the view through the visitor's browser; with it,
  every request must carry ``Authorization: Bearer TOKEN``, compared in
  constant time (``hmac.compare_digest``), else 401. The token is never
  printed or logged; a log line (refusals only) is escaped.
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import os
import queue
import socket
import socketserver
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler

from ..core.errors import BadArgument

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from .seen import Seen

WORKERS = 16
QUEUED = 64
HEAD_SECONDS = 10.0
SEND_SECONDS = 30.0
HEAD_BYTES = 16 << 10
#: the shortest token accepted: a guessable token guards nothing
TOKEN_MIN = 16
SECURITY_HEADERS = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                                "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
)


class TooLarge(Exception):
    """The request line and headers went past ``HEAD_BYTES``."""


class _Wire(io.RawIOBase):
    """A connection's socket as the handler's files: reads bounded by one
    deadline for the whole head and by ``HEAD_BYTES``; writes bounded by
    a deadline for the whole answer."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.deadline = time.monotonic() + HEAD_SECONDS
        self.taken = 0

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client was too slow")
        return left

    def readinto(self, buffer: Any) -> int:
        if self.taken >= HEAD_BYTES:
            raise TooLarge
        self.sock.settimeout(self._left())
        n = self.sock.recv_into(buffer, min(len(buffer), HEAD_BYTES - self.taken))
        self.taken += n
        return n

    def write(self, data: Any) -> int:
        self.sock.settimeout(self._left())
        self.sock.sendall(data)
        return len(data)

    def answering(self) -> None:
        """From here on the deadline is the answer's."""
        self.deadline = time.monotonic() + SEND_SECONDS


class Handler(BaseHTTPRequestHandler):
    """One connection, one request (HTTP/1.0: no connection is kept idle
    holding a worker)."""

    server_version = "storm-queue"
    sys_version = ""
    protocol_version = "HTTP/1.0"
    server: Server

    def setup(self) -> None:
        self.wire = _Wire(self.request)
        self.rfile = io.BufferedReader(self.wire, 4096)
        self.wfile = io.BufferedWriter(self.wire, 64 << 10)

    def finish(self) -> None:
        """Flush the answer; after a refusal, let the client read it before
        the close (closing with its unread bytes would reset the connection
        and lose the answer): end the sending side, then read what it sends
        for a second at most."""
        try:
            self.wfile.flush()
            if getattr(self, "refused", False):
                self.request.shutdown(socket.SHUT_WR)
                self.wire.deadline = time.monotonic() + 1.0
                while self.request.recv(65536) if self.wire._left() else b"":
                    pass
        except OSError:
            pass

    def handle(self) -> None:
        try:
            self._one()
        except TooLarge:
            self._refuse(414 if not getattr(self, "command", None) else 431, "the request is too large")
        except (TimeoutError, socket.timeout):
            self._refuse(408, "the request took too long")
        except OSError:  # the client went away
            pass

    def _one(self) -> None:
        self.command, self.request_version = None, "HTTP/1.0"  # (the default, 0.9, would answer without a status line)
        self.raw_requestline = self.rfile.readline(HEAD_BYTES + 1)
        if not self.raw_requestline:
            return
        if not self.raw_requestline.endswith(b"\n"):
            raise TooLarge
        if not self.parse_request():  # it answered (400, 505, 431) itself
            return
        self.wire.answering()
        if self.command not in ("GET", "HEAD"):
            self._refuse(405, "read-only: only GET and HEAD", (("Allow", "GET, HEAD"),))
            return
        if not self.server.host_admitted(self.headers.get("Host")):
            self._refuse(403, "this view on loopback answers only a loopback host name (127.0.0.1, localhost, [::1]); "
                         "to serve it under another name, serve with --token-file")
            return
        if not self.server.admits(self.headers.get("Authorization")):
            self._refuse(401, "an Authorization: Bearer token is needed", (("WWW-Authenticate", 'Bearer realm="storm-queue"'),))
            return
        from .routes import route

        try:
            status, kind, body = route(self.server.seen, self.path)
        except Exception as exc:  # noqa: BLE001 -- a bug answers 500 and is said; the server serves on
            self.server.say(f"storm-queue: serve: crashed on a request: {type(exc).__name__}: {exc} (this is a bug; "
                            "please report it)")
            status, kind, body = 500, "text/plain; charset=utf-8", b"500 internal error: storm-queue serve crashed\n"
        self._send(status, kind, body)

    def _refuse(self, status: int, words: str, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.close_connection = self.refused = True
        try:
            self.wire.answering()
            self._send(status, "text/plain; charset=utf-8", f"{status} {words}\n".encode(), extra)
        except OSError:
            pass

    def _send(self, status: int, kind: str, body: bytes, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response_only(status)
        self.send_header("Date", self.date_time_string())
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for name, value in SECURITY_HEADERS + extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()
        if status >= 400:
            self.log_message("%s %s", status, (self.command or "-"))

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """``parse_request``'s refusals, in the same plain words, never echoing the request."""
        self._refuse(code, message or self.responses.get(code, ("error",))[0])

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """A refusal on stderr, escaped: the client's address, status and
        method, never the path, a header or the token."""
        self.server.say(f"storm-queue: serve: {self.client_address[0]} {format % args}")


class Server(socketserver.TCPServer):
    """A TCP server whose connections a fixed pool of threads answers."""

    allow_reuse_address = True
    request_queue_size = QUEUED

    def __init__(self, address: tuple[str, int], seen: Seen, token: str | None, say: Callable[[str], None]):
        host = address[0]
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.seen, self.token, self.say = seen, token, say
        self.waiting: queue.Queue = queue.Queue(QUEUED)
        super().__init__(address, Handler)
        self.workers = [threading.Thread(target=self._work, name=f"storm-queue-web-{n}", daemon=True)
                        for n in range(WORKERS)]
        for worker in self.workers:
            worker.start()

    def host_admitted(self, host: str | None) -> bool:
        """Whether a request with this ``Host`` header may be answered: any,
        under a token; else none (a client too old to send one) or a
        loopback host, with or without a port."""
        if self.token is not None or host is None:
            return True
        name = host.strip()
        if name.startswith("["):
            name = name[1:].partition("]")[0]
        elif name.count(":") == 1:
            name = name.partition(":")[0]
        return name.lower() == "localhost" or loopback(name)

    def admits(self, authorization: str | None) -> bool:
        """Whether a request with this ``Authorization`` header may be answered."""
        if self.token is None:
            return True
        given = authorization or ""
        scheme, _, value = given.partition(" ")
        ok = hmac.compare_digest(value.strip().encode("utf-8", "replace"), self.token.encode("utf-8"))
        return scheme.lower() == "bearer" and ok

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            self.waiting.put_nowait((request, client_address))
        except queue.Full:
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                                b"Retry-After: 1\r\n\r\n503 busy: too many requests at once\n")
            except OSError:
                pass
            self.shutdown_request(request)

    def _work(self) -> None:
        while True:
            item = self.waiting.get()
            if item is None:
                return
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001 -- one connection's failure never ends the server
                pass
            finally:
                self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        for _ in self.workers:
            try:
                self.waiting.put_nowait(None)
            except queue.Full:
                break


def loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str) -> str:
    """The token in ``path`` (its first line); ``BadArgument`` (exit 2) when
    it cannot be read (a link, a directory, anything but a regular file),
    is readable by others than its owner, or is short; ``path`` named with
    any password masked (``core.passwords.hidden``), as ``given.read`` names a file."""
    from ..core.passwords import hidden
    from ..store.directory.fsutil import open_file

    try:
        fd = open_file(path)  # a regular file: a FIFO is refused at once, never waited on
        try:
            st = os.fstat(fd)
            with os.fdopen(os.dup(fd), "rb") as f:
                raw = f.read(4096)
        finally:
            os.close(fd)
    except OSError as exc:
        raise BadArgument(f"--token-file {hidden(path)}: cannot read it ({exc.strerror}); nothing was served") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BadArgument(f"--token-file {hidden(path)}: others than its owner may read it; chmod 600 it, "
                          "then serve again")
    token = raw.decode("utf-8", "replace").splitlines()[0].strip() if raw.strip() else ""
    if len(token) < TOKEN_MIN or not token.isprintable() or " " in token:
        raise BadArgument(f"--token-file {hidden(path)}: its first line must be a token of at least {TOKEN_MIN} "
                          "printable characters without spaces (for instance: head -c 32 /dev/urandom | base64 > FILE)")
    return token


def run(make: Callable[[], Any], host: str, port: int, token_file: str | None, say: Callable[[str], None],
        interval: float = 2.0) -> int:
    """Serve the storm ``make()`` opens on ``host``:``port`` until a signal
    ends it (``Interrupted``, which the command line answers 130 or 143)."""
    if token_file is None and not loopback(host):
        raise BadArgument(f"--host {host} is not a loopback address: anyone who can reach it could read the storm; "
                          "give --token-file FILE too (docs/serve.md), or serve on 127.0.0.1")
    token = read_token(token_file) if token_file is not None else None
    from .seen import Seen

    seen = Seen(make, interval)
    if seen.reading.sight is None:  # a storm that cannot be read at all stops here, as list does
        seen.storm.close()
        raise seen.reading.failure
    try:
        server = Server((host, port), seen, token, say)
    except OSError as exc:
        seen.storm.close()
        raise BadArgument(f"cannot listen on {host} port {port} ({exc.strerror}); choose another --port or --host") from None
    seen.start()
    bound = server.server_address
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    say(f"storm-queue: serving a read-only view of {seen.reading.sight.listing.root} on http://{shown}:{bound[1]}/ "
        f"({'a bearer token is required' if token else 'loopback only'}; Ctrl-C stops)")
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        seen.close()
    return 0
