"""The standard streams as a command writes them, whatever its caller made
of them. A stream the caller closed (``>&-``) is opened on ``/dev/null``:
what the command would print there is dropped, and no file the command
opens takes the stream's descriptor. When stdout or stderr is not a
terminal, its bytes go through ``Written``: a reader that stops reading
(``| head``) has the rest dropped, and the command still ends with its
own exit code; stdout that cannot be written otherwise (a full disk, an
I/O error) is ``OutputFailed`` (exit 4), in words, never a traceback. A
character the stream's encoding cannot write (``PYTHONIOENCODING=ascii``)
is written as its escape (``\\xe9``), never an error."""

from __future__ import annotations

import io
import os
import sys


class Written(io.RawIOBase):
    """The descriptor ``fd`` (1 or 2), written whole; ``gone`` once its
    reader went away (EPIPE), after which writes are dropped."""

    def __init__(self, fd: int):
        super().__init__()
        self.fd = fd
        self.gone = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data) -> int:  # type: ignore[override]
        """All of ``data``, or nothing more once the reader is gone; any other
        error of stdout is ``OutputFailed`` (stderr's are dropped: there is
        nowhere left to say them)."""
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view) and not self.gone:
            try:
                done += os.write(self.fd, view[done:])
            except BrokenPipeError:
                self.gone = True
            except OSError as exc:
                if self.fd != 1:
                    self.gone = True
                    break
                from ..core.errors import OutputFailed

                self.gone = True  # said once: the exit's own flush finds nothing more to write
                raise OutputFailed(f"stdout could not be written ({exc.strerror or exc}): the answer was not all "
                                   "printed; what a request recorded stands (storm-queue log shows it)") from exc
        return len(view)


def standard() -> None:
    """Make stdin, stdout and stderr usable as this module says, before
    anything is read or written."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        stream = getattr(sys, name)
        if stream is None:  # closed by the caller: /dev/null takes its descriptor, if no file has it
            null = os.open(os.devnull, os.O_RDWR)
            try:
                os.fstat(fd)
            except OSError:
                os.dup2(null, fd)
                os.close(null)
                null = fd
            stream = open(null, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace")
            setattr(sys, name, stream)
        elif fd and stream is getattr(sys, f"__{name}__"):  # not a test's capture
            errors = "backslashreplace" if stream.errors == "strict" else stream.errors
            if stream.isatty():
                stream.reconfigure(errors=errors)
                continue
            stream.flush()
            raw = Written(fd)  # buffered as the stream was (stderr is not: each line goes at once)
            buffer = raw if isinstance(stream.buffer, io.RawIOBase) else io.BufferedWriter(raw)
            setattr(sys, name, io.TextIOWrapper(buffer, encoding=stream.encoding,
                                                errors=errors, line_buffering=stream.line_buffering,
                                                write_through=stream.write_through))


def reader_gone() -> bool:
    """Whether stdout's reader stopped reading: a command that prints
    without end (``log``) stops early."""
    buffer = getattr(sys.stdout, "buffer", None)
    raw = getattr(buffer, "raw", buffer)
    return isinstance(raw, Written) and raw.gone
