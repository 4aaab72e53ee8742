"""Hard per-cell time and memory limits: cells run in a forked child process that can be killed.

When a suite sets ``cell_timeout_s`` or ``cell_memory_mb``, :func:`run_isolated` runs the cells of
a task in a forked child process (one per worker thread, kept across tasks so that caches and
numba's compiled code are reused; results come back through a pipe as each cell finishes). A cell
that overruns its limit plus :func:`grace_s` is killed with SIGKILL together with its child and
recorded as failed; the remaining cells continue in a fresh child. The memory limit is
``resource.RLIMIT_AS``, set before each cell to the child's current address-space size plus the
limit, so an allocation beyond it raises ``MemoryError`` in the cell instead of taking the worker
down. The cooperative limit inside the cell is :mod:`dpbench.core.time_limit`.
"""

from __future__ import annotations

import _imp
import contextlib
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import Any

#: Message a child sends when a cell enters a new phase (the cell's hard deadline restarts).
_HEARTBEAT = "heartbeat"
#: Longest single wait on the child's pipe (a deadline further away is waited for in slices).
_MAX_POLL_S = 86400.0
#: Longest wait, before a fork, for other threads' imports to finish (they take milliseconds).
FORK_IMPORT_WAIT_S = 10.0


def grace_s(limit_s: float) -> float:
    """Extra time a cell gets over its limit before it is killed (lets cooperative checks win)."""
    return min(max(1.0, 0.1 * limit_s), 30.0)


def hard_timeout_message(limit_s: float) -> str:
    return f"CellTimeout: cell exceeded its time limit of {limit_s:g} s (killed)"


def memory_message(memory_mb: float) -> str:
    return f"MemoryError: exceeded the cell memory limit of {memory_mb:g} MB"


@dataclass(frozen=True)
class Killed:
    """Outcome of an item whose child process was killed or died while computing it."""

    message: str


def _address_space_bytes() -> int | None:
    """This process's virtual size (Linux ``/proc``; ``None`` elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def limit_memory(memory_mb: float | None) -> None:
    """Cap this process's address space at its current size plus ``memory_mb`` MiB (``None``:
    lift the cap back to the hard limit). Linux only: elsewhere the memory limit is not enforced
    (macOS ignores ``RLIMIT_AS``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = hard
    size = _address_space_bytes() if memory_mb is not None else None
    if memory_mb is not None and size is not None:
        cap = size + int(memory_mb * 2**20)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
    if cap != soft:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _forget_foreign_imports() -> None:
    """In a freshly forked child: drop the imports other threads of the parent were running
    (only possible when :func:`_fork_between_imports` gave up waiting for them).

    ``os.fork`` copies only the forking thread. A dask worker runs other threads (its event loop
    deserialises the next task while this one computes), and one of them may be executing a
    module's body at the moment of the fork: the child then inherits that module's import lock,
    held by a thread that no longer exists, and a half-initialised module in ``sys.modules``. The
    first import of it in the child (typically while unpickling a request) blocks forever, and
    the cell is killed at its time limit. CPython re-creates only the global import lock after a
    fork, so the child removes the half-initialised modules and the per-module locks itself; the
    next import of such a module runs its body again, in this thread. (CPython 3.11–3.13 keep
    these in ``importlib._bootstrap``; if the names change, nothing is done.)
    """
    bootstrap = sys.modules.get("importlib._bootstrap")
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if spec is not None and getattr(spec, "_initializing", False):
            del sys.modules[name]
    for attribute in ("_module_locks", "_blocking_on"):
        table = getattr(bootstrap, attribute, None)
        if hasattr(table, "clear"):
            table.clear()


def _imports_running() -> bool:
    """Whether another thread of this process is importing a module: it holds the module's
    import lock (from before the module is created until its body has run, so this also covers
    a compiled module's creation, before it is marked as initialising)."""
    locks = getattr(sys.modules.get("importlib._bootstrap"), "_module_locks", None)
    if locks is None:  # a CPython without the table (3.11-3.13 have it): modules being run
        return any(getattr(getattr(m, "__spec__", None), "_initializing", False)
                   for m in list(sys.modules.values()))
    me = threading.get_ident()
    for ref in list(locks.values()):
        owner = getattr(ref() if callable(ref) else None, "owner", None)
        if owner is not None and owner != me:
            return True
    return False


def _fork_between_imports(timeout_s: float) -> int:
    """``os.fork()`` at a moment when no other thread is importing a module.

    A child that inherits a half-run import cannot always repair it: a compiled (Cython) module
    keeps its module object in a C static, so importing it again in the child returns the same
    half-filled object (seen with ``scipy.special``: ``cannot import name ... from
    scipy.special._ufuncs``). The check is made holding the global import lock, which every
    import takes to obtain its module lock, so no import can start between the check and the
    fork (CPython's fork takes the same, re-entrant, lock). Imports already running are let
    finish (milliseconds): the lock is released while waiting, as they may need it for nested
    imports. After ``timeout_s`` the fork goes ahead and :func:`_forget_foreign_imports` repairs
    what it can."""
    deadline = time.monotonic() + timeout_s
    while True:
        _imp.acquire_lock()
        try:
            if not _imports_running() or time.monotonic() >= deadline:
                return os.fork()
        finally:
            _imp.release_lock()  # in the child, the lock CPython re-acquired for this thread
        time.sleep(0.002)


def _exit_with_parent(every_s: float = 0.5) -> None:
    """Exit this child as soon as its parent dies, even in the middle of a hung cell (a watchdog
    thread polls the parent pid; the pipe's EOF only wakes an idle child)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, name="dpbench-parent-watchdog", daemon=True).start()


#: ``prepare(payload)`` returns ``compute(i, heartbeat) -> outcome``; both run in the child.
Prepare = Callable[[Any], Callable[[int, Callable[[], None]], Any]]


def _serve(conn: Connection) -> None:
    """Loop of a child process: compute the items of each request, send each outcome.

    A request is ``(prepare, payload, start, n, memory_mb)``; the child computes items
    ``start..n-1`` of ``prepare(payload)``, each under the memory limit, and sends a heartbeat
    when an item starts and whenever the item calls ``heartbeat``. It exits when the parent closes
    the pipe (or dies).
    """
    def heartbeat() -> None:
        conn.send(_HEARTBEAT)

    _exit_with_parent()
    while True:
        try:
            prepare, payload, start, n, memory_mb = conn.recv()
        except (EOFError, OSError):
            return
        compute = prepare(payload)
        for i in range(start, n):
            heartbeat()
            limit_memory(memory_mb)
            try:
                outcome = compute(i, heartbeat)
            finally:
                limit_memory(None)
            conn.send(outcome)


@dataclass(eq=False)  # compared and hashed by identity (a key of the forked backend)
class _Child:
    """A forked compute process kept by a worker thread across tasks (so caches, including
    numba's compiled code, survive between tasks)."""

    pid: int
    conn: Connection

    @classmethod
    def fork(cls, detach_signals: bool = False) -> _Child:
        """Fork a child serving requests. ``detach_signals``: the child ignores SIGINT and takes
        SIGTERM's default action instead of inheriting this process's handlers (a Ctrl-C or a
        SIGTERM sent to the whole process group is the parent's to handle: it stops its
        children; a cell must never record the interruption as its own failure)."""
        parent, child = Pipe(duplex=True)
        pid = _fork_between_imports(FORK_IMPORT_WAIT_S)
        if pid == 0:  # the child never returns into the caller (no atexit, no dask teardown)
            code = 0
            try:
                parent.close()
                if detach_signals:
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _forget_foreign_imports()
                _serve(child)
            except BaseException:  # noqa: BLE001 - the parent records the death
                code = 70
            finally:
                os._exit(code)
        child.close()
        return cls(pid, parent)

    def kill(self) -> int:
        """SIGKILL the child (if still alive) and reap it; return its wait status."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.conn.close()
        try:
            return os.waitpid(self.pid, 0)[1]
        except ChildProcessError:
            return 0

    def reap(self) -> int:
        """Wait for a child that closed its end (died); return its wait status."""
        self.conn.close()
        try:
            return os.waitpid(self.pid, 0)[1]
        except ChildProcessError:
            return 0


_local = threading.local()


def _child() -> _Child:
    child = getattr(_local, "child", None)
    if child is None or _local.owner_pid != os.getpid():  # none yet, or inherited by a fork
        child = _Child.fork()
        _local.child, _local.owner_pid = child, os.getpid()
    return child


def prepare_child() -> None:
    """Fork this thread's compute child now, if it has none: before this process starts threads
    that import modules (a fork waits until no import is running; see _fork_between_imports)."""
    _child()


def _drop_child() -> None:
    _local.child = None


def reset_child() -> None:
    """Stop this thread's compute child, if any; the next isolated call forks a fresh one (which
    inherits what this process has cached or compiled since)."""
    child = getattr(_local, "child", None)
    if child is not None and _local.owner_pid == os.getpid():
        child.kill()
    _drop_child()


def how_it_ended(status: int) -> str:
    """A child's wait status in words: ``signal SIGKILL``, ``exit code 70``."""
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _death_message(status: int, memory_mb: float | None) -> str:
    msg = f"CellCrash: the cell's process died ({how_it_ended(status)})"
    if memory_mb is not None:
        msg += f"; possibly exceeded the cell memory limit of {memory_mb:g} MB"
    return msg


def _collect(child: _Child, start: int, n: int, out: list[Any], limit_s: float | None,
             memory_mb: float | None) -> int:
    """Receive outcomes of items ``start..`` into ``out``; return the next item to compute
    (``n`` when all are done; after a kill or a death, the item after the lost one)."""
    budget = None if limit_s is None else limit_s + grace_s(limit_s)
    i = start
    deadline = None if budget is None else time.monotonic() + budget
    while i < n:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        # poll() takes at most ~24 days (milliseconds in a C int): wait in slices of a day.
        if not child.conn.poll(None if wait is None else min(wait, _MAX_POLL_S)):
            if deadline is not None and time.monotonic() < deadline:
                continue
            child.kill()
            _drop_child()
            out[i] = Killed(hard_timeout_message(limit_s or 0.0))
            return i + 1
        try:
            msg = child.conn.recv()
        except (EOFError, OSError):
            _drop_child()
            out[i] = Killed(_death_message(child.reap(), memory_mb))
            return i + 1
        if msg != _HEARTBEAT:
            out[i] = msg
            i += 1
        if budget is not None:
            deadline = time.monotonic() + budget
    return n


def _submit(prepare: Prepare, payload: Any, start: int, n: int,
            memory_mb: float | None) -> _Child:
    """Send a request to this thread's child, forking a fresh one if the old one is gone."""
    for attempt in range(2):
        child = _child()
        try:
            child.conn.send((prepare, payload, start, n, memory_mb))
            return child
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            child.reap()
            _drop_child()
            if attempt:
                raise
    raise AssertionError("unreachable")


def run_isolated(prepare: Prepare, payload: Any, n: int, limit_s: float | None,
                 memory_mb: float | None) -> list[Any]:
    """Compute items ``0..n-1`` of ``prepare(payload)`` in a forked child, in order.

    Each item may take ``limit_s`` (plus :func:`grace_s`) between heartbeats; past that the child
    is killed and the item's outcome is a :class:`Killed`; the next items run in a fresh child. A
    child that dies (a signal, an exit) makes its current item :class:`Killed` too. ``prepare``
    must be picklable (a module-level function) and ``compute`` must return a picklable outcome
    and handle its own exceptions. The child is kept for the thread's next call.
    """
    out: list[Any] = [None] * n
    start = 0
    while start < n:
        child = _submit(prepare, payload, start, n, memory_mb)
        try:
            start = _collect(child, start, n, out, limit_s, memory_mb)
        except BaseException:  # e.g. an unpicklable outcome: never leave a busy child behind
            child.kill()
            _drop_child()
            raise
    return out
