"""One writer per store: an exclusive lock file inside the store directory.

``dpbench run`` and ``dpbench audit`` take the lock before they create or change anything in a
store and hold it until they return; a second writer on the same store is refused at once (exit
2, naming the holder) instead of racing the first one (docs/reliability.md, 'One writer per
store'). Readers (``status``, ``report``) never take it.

The lock is the file ``<store>.lock`` next to the store directory (:func:`lock_path`; outside it,
so that zarr never lists it and ``--restart`` never deletes it), created with
``O_CREAT | O_EXCL`` (atomic on a local or NFSv3+ file system): it records the holder's host, pid, the pid's start time (so a recycled pid
is not mistaken for the holder), the command and a heartbeat refreshed every
:data:`HEARTBEAT_S` seconds by a daemon thread. A lock is **stale** when its holder is on this
host and no longer runs, or when its heartbeat is older than :data:`STALE_AFTER_S` seconds (a
holder on another host that died). A holder on this host whose process is gone is provably dead
(a killed or crashed run), so its lock is broken at once with a warning and the run resumes; a
holder on another host cannot be checked, so its stale lock is reported and broken only when the
user asks (``--break-lock``). Nothing in the lock file is executed: it is parsed as JSON and its
values are only printed and compared.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from ..core.errors import StoreError
from .writable import check_writable, disk_reason, missing_dirs, remove_empty_dirs

__all__ = ["HEARTBEAT_S", "LOCK_SUFFIX", "STALE_AFTER_S", "LockHolder", "StoreLock", "StoreLocked",
           "lock_path", "read_holder"]

LOCK_SUFFIX = ".lock"
#: Seconds between heartbeats of a holder.
HEARTBEAT_S = 10.0
#: A lock whose heartbeat is older than this (and whose holder cannot be checked locally) is stale.
STALE_AFTER_S = 120.0
#: Largest lock file read (a lock file is a few hundred bytes; anything bigger is not ours).
_MAX_LOCK_BYTES = 65536


class StoreLocked(StoreError):
    """The store is locked by another writer (exit 2)."""


def _pid_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot (Linux ``/proc``), "" when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_path(store: str | Path) -> Path:
    """The lock file of the store at ``store``: ``<store>.lock`` in the same directory."""
    path = Path(store).absolute()
    return path.with_name(path.name + LOCK_SUFFIX)


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


@dataclass
class LockHolder:
    """What a lock file says about its holder."""

    host: str
    pid: int
    pid_start: str
    started: float
    heartbeat: float
    command: str
    token: str

    def describe(self) -> str:
        return (f"{self.command or 'a dpbench writer'} (host {self.host}, pid {self.pid}, "
                f"started {_utc(self.started)}, last heartbeat {_utc(self.heartbeat)})")

    def provably_dead(self) -> bool:
        """Whether the holder is on this host and its process is gone (or its pid reused)."""
        if self.host != socket.gethostname():
            return False
        if not _pid_alive(self.pid):
            return True
        return bool(self.pid_start) and _pid_start(self.pid) not in ("", self.pid_start)

    def stale_reason(self, now: float | None = None) -> str | None:
        """Why the holder is gone, or None when it may still be writing."""
        now = time.time() if now is None else now
        if self.host == socket.gethostname():
            if not _pid_alive(self.pid):
                return f"its process {self.pid} on this host no longer runs"
            if self.pid_start and _pid_start(self.pid) not in ("", self.pid_start):
                return f"pid {self.pid} on this host now belongs to another process"
            return None
        if now - self.heartbeat > STALE_AFTER_S:
            return (f"its heartbeat is {now - self.heartbeat:.0f} s old (more than "
                    f"{STALE_AFTER_S:.0f} s)")
        return None


def read_holder(lock: Path) -> LockHolder | None:
    """The holder recorded in ``lock``; None when the file is absent, partly written or not a
    dpbench lock (values are type-checked, never evaluated)."""
    try:
        with open(lock, "rb") as fh:
            raw = fh.read(_MAX_LOCK_BYTES + 1)
    except OSError:
        return None
    if len(raw) > _MAX_LOCK_BYTES:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
        holder = LockHolder(str(doc["host"]), int(doc["pid"]), str(doc.get("pid_start", "")),
                            float(doc["started"]), float(doc["heartbeat"]),
                            str(doc.get("command", ""))[:500], str(doc["token"]))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return holder


class StoreLock:
    """The writer lock of the store at ``path`` (a context manager; see the module docstring).

    ``break_stale=True`` removes a stale lock before taking it; a live holder is never broken.
    """

    def __init__(self, path: str | Path, command: str = "", *, break_stale: bool = False,
                 heartbeat_s: float = HEARTBEAT_S):
        self.path = Path(path)
        self.lock = lock_path(self.path)
        self.command = command
        self.break_stale = break_stale
        self.heartbeat_s = heartbeat_s
        now = time.time()
        self.holder = LockHolder(socket.gethostname(), os.getpid(), _pid_start(os.getpid()), now,
                                 now, command, uuid.uuid4().hex)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.broken: LockHolder | None = None
        #: Directories acquire created for the store (removed again at release while empty).
        self._created_dirs: list[Path] = []

    # --- acquiring ----------------------------------------------------------------------------
    def _try_create(self) -> bool:
        try:
            fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(asdict(self.holder)))
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:  # e.g. a full disk: no empty or partial lock file is left behind
            self.lock.unlink(missing_ok=True)
            raise
        return True

    def _refuse(self, message: str) -> None:
        raise StoreLocked(message)

    def acquire(self) -> StoreLock:
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"store path {str(self.path)!r} is a file, not a dpbench store; "
                             "choose a new path or an existing store directory")
        # Read-only, not permitted or full: refused before anything is created (exit 2).
        check_writable(self.path, "--store", StoreError)
        created = missing_dirs(self.lock.parent)
        try:
            self.lock.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            remove_empty_dirs(created)
            raise StoreError(f"--store: cannot create the directory of store "
                             f"{str(self.path)!r} ({disk_reason(exc)})") from exc
        self._created_dirs = created
        for _ in range(2):
            try:
                if self._try_create():
                    self._start_heartbeat()
                    return self
            except OSError as exc:
                remove_empty_dirs(created)
                self._refuse(f"--store: cannot write the lock file {str(self.lock)!r} of store "
                             f"{str(self.path)!r} ({disk_reason(exc)})")
            holder = self._wait_for_holder()
            if holder is None:
                self._refuse(
                    f"store {str(self.path)!r} has a lock file {str(self.lock)!r} that is not a "
                    "dpbench lock (or is being written); remove it by hand if no dpbench command "
                    "is writing this store")
            assert holder is not None
            reason = holder.stale_reason()
            if reason is None:
                self._refuse(f"store {str(self.path)!r} is being written by {holder.describe()}; "
                             "one writer per store: wait for it to finish, or use another "
                             "--store")
            if not (self.break_stale or holder.provably_dead()):
                self._refuse(f"store {str(self.path)!r} is locked by {holder.describe()}, but "
                             f"the lock is stale ({reason}); pass --break-lock to break it and "
                             "resume")
            self._break(holder)
            if self.broken is holder and not self.break_stale:
                import warnings

                warnings.warn(f"store {str(self.path)!r}: broke the lock of {holder.describe()}: "
                              f"{reason}; resuming", stacklevel=3)
        self._refuse(f"store {str(self.path)!r}: another writer took the lock while a stale one "
                     "was being broken; try again")
        raise AssertionError("unreachable")

    def _wait_for_holder(self) -> LockHolder | None:
        """The holder, allowing a just-created lock file a moment to be written."""
        for _ in range(20):
            holder = read_holder(self.lock)
            if holder is not None or not self.lock.exists():
                return holder
            time.sleep(0.05)
        return None

    def _break(self, holder: LockHolder) -> None:
        aside = self.lock.with_name(f"{self.lock.name}.broken-{uuid.uuid4().hex}")
        try:
            os.rename(self.lock, aside)  # atomic: only one breaker moves this very file
        except FileNotFoundError:
            return
        moved = read_holder(aside)
        if moved is not None and moved.token != holder.token:  # a new holder slipped in: restore
            os.rename(aside, self.lock)
            return
        aside.unlink(missing_ok=True)
        self.broken = holder

    # --- holding ------------------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name="dpbench-store-lock",
                                        daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            current = read_holder(self.lock)
            if current is None:
                continue  # moved aside for a moment by a breaker that will put it back
            if current.token != self.holder.token:
                return  # broken and taken by someone else: stop touching it
            self.holder.heartbeat = time.time()
            tmp = self.lock.with_name(f"{self.lock.name}.{self.holder.token}.tmp")
            try:
                tmp.write_text(json.dumps(asdict(self.holder)))
                os.replace(tmp, self.lock)
            except OSError:
                tmp.unlink(missing_ok=True)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        current = read_holder(self.lock)
        if current is not None and current.token == self.holder.token:
            self.lock.unlink(missing_ok=True)
        # Directories made for a store that was not created after all (a refusal, or a full
        # disk whose half-created store was removed); a store in them keeps them.
        remove_empty_dirs(self._created_dirs)

    def __enter__(self) -> StoreLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
