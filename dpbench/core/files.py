"""Reading an input file safely: a regular file only, with a size limit applied while reading.

Suites, cluster profiles and dataset files are named by the user; one may be a FIFO (which
blocks the reader until a writer comes), a device (``/dev/zero`` never ends), a directory or a
file far larger than any input dpbench reads. :func:`read_regular` opens without blocking,
checks what it opened (no race between a check and the read) and stops at the limit, so none of
these can hang a command or fill its memory (docs/reliability.md, "Inputs").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["NotReadable", "read_regular"]


class NotReadable(ValueError):
    """An input that is not a regular file, or is larger than its limit (the message says
    which)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them. ``OSError`` when it
    cannot be opened; :class:`NotReadable` naming ``what`` for anything but a regular file
    (refused before a byte is read) and for a file larger than ``limit`` (refused once ``limit``
    bytes are read)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotReadable(f"{str(Path(path))!r} is {_kind(mode)}, not a regular file; give "
                              f"the {what} as a file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise NotReadable(f"the {what} {str(Path(path))!r} is larger than {limit} bytes; at most "
                          f"{limit} are read")
    return data
