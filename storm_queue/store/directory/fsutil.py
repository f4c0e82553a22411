"""Durable file primitives: whole writes, directory fsync, atomic replace."""

from __future__ import annotations

import errno
import os
import stat

from ...core.errors import NOT_A_FILE


def beside(log_path: str, suffix: str) -> str:
    """The storm-queue file ``.<log name>.<suffix>`` in the log's directory."""
    head, name = os.path.split(log_path)
    return os.path.join(head, f".{name}.{suffix}")


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` or raise."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def open_file(path: str, flags: int = os.O_RDONLY, mode: int = 0o644, dir_fd: int | None = None) -> int:
    """``os.open`` of a storm's own file, never through a symbolic link,
    and only a regular file: a directory where one belongs is ``OSError``
    EISDIR, and a FIFO, a socket or a device ``OSError`` ("not a regular
    file"), at once, not an open
    that waits for a writer who may never come (a request under the
    writers' lock holds SIGINT and SIGTERM back). A file it creates (with
    ``os.O_CREAT``) gets ``mode`` whatever the umask, as ``init`` makes the
    storm's first files: an operator's umask 077 never hides the log from
    the accounts that read the storm; a file that exists keeps its own.
    Returns a blocking descriptor."""
    if flags & os.O_CREAT and not flags & os.O_EXCL:
        try:
            return open_file(path, flags & ~os.O_CREAT, mode, dir_fd)
        except FileNotFoundError:
            try:
                return open_file(path, flags | os.O_EXCL, mode, dir_fd)
            except FileExistsError:  # another writer made it meanwhile: its own
                return open_file(path, flags & ~os.O_CREAT, mode, dir_fd)
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, NOT_A_FILE, path)
        if flags & os.O_CREAT and stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_dir(name: str, dir_fd: int, mode: int = 0o755) -> bool:
    """Create the directory ``name`` in the open directory ``dir_fd``,
    ``mode`` whatever the umask, durably; False when it exists."""
    try:
        os.mkdir(name, mode, dir_fd=dir_fd)
    except FileExistsError:
        return False
    os.chmod(name, mode, dir_fd=dir_fd, follow_symlinks=False)
    os.fsync(dir_fd)
    return True


def fsync_dir(path: str) -> None:
    """Make the directory entry changes in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_atomically(path: str, data: bytes, owner: tuple[int, int] | None = None,
                       dir_fd: int | None = None) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old or the new
    file whole, durable across a power loss. ``owner`` (uid, gid), when
    given and different from the caller, becomes the new file's owner. With
    ``dir_fd``, ``path`` is a name in that open directory (so that no link
    on the way to it is followed)."""
    directory = os.path.dirname(path) or "."
    name = os.path.basename(path)
    tmp = f".{name}.tmp.{os.getpid()}" if dir_fd is not None else os.path.join(directory, f".{name}.tmp.{os.getpid()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        fd = open_file(tmp, flags, dir_fd=dir_fd)
    except FileExistsError:  # left by a killed process that had our pid; no live one has it
        os.unlink(tmp, dir_fd=dir_fd)
        fd = open_file(tmp, flags, dir_fd=dir_fd)
    try:
        try:
            give_to(fd, owner)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    if dir_fd is not None:
        os.fsync(dir_fd)
    else:
        fsync_dir(directory)


def give_to(fd: int, owner: tuple[int, int] | None) -> None:
    """Make the storm's owner own a file this process created (a stranger
    never leaves a file of its own in the storm); raises when it cannot."""
    if owner is None:
        return
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != owner:
        os.fchown(fd, owner[0], owner[1])
