"""Record, and break on purpose, the os calls a request makes in-process.

``Tracer`` wraps ``os.open``, ``os.write``, ``os.fsync``, ``os.ftruncate``,
``os.rename``, ``os.replace``, ``os.unlink`` and ``os.close`` (the calls the
writer, ``fsutil``, ``queuefile`` and the lock make), and records each as a
``Call`` naming the file by its path. With ``fail_at`` it makes the n-th
*durable* call (every one of them but ``close``, ``unlink`` and a read-only
open) raise ``OSError(errno)`` instead, once or, with ``sticky``, from then on.
"""

from __future__ import annotations

import errno as errnos
import os
from dataclasses import dataclass

import pytest

WRAPPED = ("open", "write", "fsync", "ftruncate", "rename", "replace", "unlink", "close")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


@dataclass(frozen=True)
class Call:
    op: str  # open, write, fsync, ftruncate, rename, replace, unlink, close
    path: str  # the file (for rename: the source)
    dest: str = ""  # rename/replace: the target
    flags: int = 0  # open: its flags
    is_dir: bool = False
    failed: bool = False

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def __str__(self) -> str:
        what = f"{self.op} {self.name}" + (f" -> {os.path.basename(self.dest)}" if self.dest else "")
        return what + (" (dir)" if self.is_dir else "") + (" FAILED" if self.failed else "")


class Tracer:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None,
                 error: int = errnos.EIO, sticky: bool = False):
        self.calls: list[Call] = []
        self.fds: dict[int, tuple[str, bool]] = {}
        self.fail_at, self.error, self.sticky = fail_at, error, sticky
        self.durable = 0
        self.on = False  # set True just around the request
        real = {name: getattr(os, name) for name in WRAPPED}
        self.real = real

        def fd_path(fd: int) -> tuple[str, bool]:
            if fd in self.fds:
                return self.fds[fd]
            try:
                return real_readlink(f"/proc/self/fd/{fd}"), False
            except OSError:
                return f"fd{fd}", False

        real_readlink = os.readlink

        def record(call: Call, durable: bool):
            if not self.on:
                return
            if durable:
                self.durable += 1
                n = self.durable
                if self.fail_at is not None and (n == self.fail_at or (self.sticky and n > self.fail_at)):
                    self.calls.append(Call(call.op, call.path, call.dest, call.flags, call.is_dir, failed=True))
                    raise OSError(self.error, os.strerror(self.error), call.path)
            self.calls.append(call)

        def _open(path, flags, mode=0o777, *, dir_fd=None):
            full = os.fspath(path)
            if dir_fd is not None and not os.path.isabs(full):
                full = os.path.join(fd_path(dir_fd)[0], full)
            is_dir = bool(flags & os.O_DIRECTORY)
            record(Call("open", full, flags=flags, is_dir=is_dir), durable=bool(flags & _WRITE_FLAGS))
            fd = real["open"](path, flags, mode, dir_fd=dir_fd)
            self.fds[fd] = (full, is_dir)
            return fd

        def _write(fd, data):
            path, is_dir = fd_path(fd)
            record(Call("write", path), durable=True)
            return real["write"](fd, data)

        def _fsync(fd):
            path, is_dir = fd_path(fd)
            record(Call("fsync", path, is_dir=is_dir), durable=True)
            return real["fsync"](fd)

        def _ftruncate(fd, length):
            path, _ = fd_path(fd)
            record(Call("ftruncate", path), durable=True)
            return real["ftruncate"](fd, length)

        def _rename(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
            s = os.fspath(src) if src_dir_fd is None else os.path.join(fd_path(src_dir_fd)[0], os.fspath(src))
            d = os.fspath(dst) if dst_dir_fd is None else os.path.join(fd_path(dst_dir_fd)[0], os.fspath(dst))
            record(Call("rename", s, d), durable=True)
            return real["rename"](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

        def _replace(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
            s = os.fspath(src) if src_dir_fd is None else os.path.join(fd_path(src_dir_fd)[0], os.fspath(src))
            d = os.fspath(dst) if dst_dir_fd is None else os.path.join(fd_path(dst_dir_fd)[0], os.fspath(dst))
            record(Call("rename", s, d), durable=True)
            return real["replace"](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

        def _unlink(path, *, dir_fd=None):
            full = os.fspath(path) if dir_fd is None else os.path.join(fd_path(dir_fd)[0], os.fspath(path))
            record(Call("unlink", full), durable=False)
            return real["unlink"](path, dir_fd=dir_fd)

        def _close(fd):
            path, is_dir = fd_path(fd)
            record(Call("close", path, is_dir=is_dir), durable=False)
            self.fds.pop(fd, None)
            return real["close"](fd)

        for name, fn in (("open", _open), ("write", _write), ("fsync", _fsync), ("ftruncate", _ftruncate),
                         ("rename", _rename), ("replace", _replace), ("unlink", _unlink), ("close", _close)):
            monkeypatch.setattr(os, name, fn)

    def stop(self) -> None:
        """Stop recording and stop failing: the fault has cleared."""
        self.on = False
        self.fail_at = None

    def index(self, pred, start: int = 0) -> int:
        """The index of the first call from ``start`` on that ``pred`` accepts, or -1."""
        for i in range(start, len(self.calls)):
            if pred(self.calls[i]):
                return i
        return -1

    def __str__(self) -> str:
        return "\n".join(f"{i:3} {c}" for i, c in enumerate(self.calls))
