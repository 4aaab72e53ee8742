"""Whether dpbench can write where it is asked to: the one place that decides it.

``dpbench run`` / ``dpbench audit`` (``--store``, the store's lock file beside it) and
``dpbench report`` (``--output``) call :func:`check_writable` before they create anything: a
directory on a read-only file system, one the user may not write, or a file system without a
free block is refused at once (:class:`~dpbench.core.errors.UserInputError`, exit 2) with a
message naming the option and the path. The check has no side effect (``os.access`` and
``statvfs``, no probe file), so a refused command changes nothing, not even a directory's
modification time.

A disk that fills up *while* something is created is caught where it is created
(:func:`is_disk_error`, :func:`disk_reason`): the new store, lock file or report is removed and
the same kind of message is raised (docs/reliability.md, 'Disk faults').
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..core.errors import UserInputError

__all__ = ["DISK_ERRNOS", "check_writable", "deferred_signals", "disk_reason", "is_disk_error",
           "missing_dirs", "remove_empty_dirs", "write_all_or_nothing"]

#: The errno values of "this file system will not take the write": full, over quota, read-only,
#: not permitted, file too large.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                         errno.EFBIG})


def is_disk_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an OSError saying the file system refused a write
    (:data:`DISK_ERRNOS`; "not permitted" only when it names a file, unlike e.g. ``os.kill``)."""
    if not isinstance(exc, OSError) or exc.errno not in DISK_ERRNOS:
        return False
    return exc.filename is not None or exc.errno not in (errno.EACCES, errno.EPERM)


def disk_reason(exc: OSError) -> str:
    """The reason of an OSError in lower case, e.g. "no space left on device"."""
    text = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
    return text[:1].lower() + text[1:]


def _nearest_existing(path: Path) -> Path:
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def missing_dirs(directory: Path) -> list[Path]:
    """The ancestors of ``directory`` (itself included) that do not exist, deepest first: what
    ``directory.mkdir(parents=True)`` would create (and :func:`remove_empty_dirs` removes)."""
    out = []
    path = Path(directory).absolute()
    while not os.path.lexists(path) and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def remove_empty_dirs(dirs: list[Path]) -> None:
    """Remove the directories of :func:`missing_dirs`, deepest first, each only if empty."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            return


def _refusal(directory: Path) -> str | None:
    """Why nothing can be created in the existing directory ``directory``, or None."""
    if not directory.is_dir():
        return f"{str(directory)!r} is not a directory"
    try:
        st = os.statvfs(directory)
    except OSError:
        st = None
    if st is not None and st.f_flag & os.ST_RDONLY:
        return f"read-only file system at {str(directory)!r}"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"permission denied in {str(directory)!r}"
    if st is not None:
        root = os.geteuid() == 0  # root may use the blocks reserved for it
        blocks = st.f_bfree if root else st.f_bavail
        inodes = st.f_ffree if root else st.f_favail
        if st.f_blocks > 0 and blocks == 0:
            return f"no space left on device at {str(directory)!r}"
        if st.f_files > 0 and inodes == 0:  # f_files 0: the file system does not count inodes
            return f"no space left on device (no free inodes) at {str(directory)!r}"
    return None


def check_writable(path: str | Path, option: str,
                   error: type[UserInputError] = UserInputError) -> None:
    """Refuse (raise ``error``, exit 2) when ``path`` cannot be created or written: its nearest
    existing ancestor (where new directories and files go) and, when ``path`` is an existing
    directory (a store being resumed), ``path`` itself must be writable directories on a
    writable file system with a free block. ``option`` names the field in the message
    (``--store``, ``--output``)."""
    target = Path(path).absolute()
    dirs = [_nearest_existing(target.parent)]
    if target.is_dir():
        dirs.append(target)
    for d in dirs:
        reason = _refusal(d)
        if reason is not None and d == target and not os.path.lexists(target):
            # another process moved the store into place (or removed it) between the two
            # looks: what decides now is the ancestor, checked above, and the store's lock
            continue
        if reason is not None:
            hint = "free some space, or choose another" if "no space" in reason else \
                "choose another"
            raise error(f"{option}: cannot write to {str(path)!r} ({reason}); {hint} {option}")


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them as they would have been
    (the handler in place before, or the default: ``KeyboardInterrupt`` / ending the process).
    Python runs signal handlers in the main thread only, so elsewhere there is nothing to defer
    and the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    wanted = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum))
                for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in caught[:1]:
            signal.raise_signal(signum)


def write_all_or_nothing(targets: Sequence[tuple[Path, Callable[[Path], None]]],
                         option: str = "--output") -> None:
    """Write files all or nothing: each ``(path, write)`` writes a temporary file beside its
    target (``write(temporary)``), then every temporary is renamed into place, with Ctrl-C and
    SIGTERM held for the renames (:func:`deferred_signals`), so that a set of files (a report's
    HTML page and its Markdown summary) is replaced together or not at all. Any error or
    interruption before removes the temporaries and the directories created for them, and a
    disk error becomes a :class:`UserInputError` naming ``option`` (exit 2): no partial or
    changed file is left."""
    first = targets[0][0]
    created = missing_dirs(first.parent)
    temporaries: list[Path] = []
    try:
        first.parent.mkdir(parents=True, exist_ok=True)
        for path, write in targets:
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.partial")
            temporaries.append(tmp)
            write(tmp)
        with deferred_signals():
            for (path, _), tmp in zip(targets, temporaries):
                os.replace(tmp, path)
    except BaseException as exc:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)
        remove_empty_dirs(created)
        if isinstance(exc, OSError) and is_disk_error(exc):
            raise UserInputError(f"{option}: cannot write {str(first)!r} ({disk_reason(exc)}); "
                                 f"no partial file is left: free some space, or choose another "
                                 f"{option}") from exc
        raise
