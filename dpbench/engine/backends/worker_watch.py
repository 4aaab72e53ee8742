"""Watching a cluster that gives a run no worker: report why, and give up in bounded time.

A batch system may accept a worker job and never start it (a drained partition, a held job, a
limit of the account), or a submission may fail after the run has started. Without a watch the
run would wait for ever. :class:`WorkerWatch` polls the scheduler every few seconds while a run
has tasks in flight. Whenever no worker is connected it notes, every minute, how long it has
waited and what the batch system says of the run's jobs (SLURM: state and pending reason from
``squeue``), and it gives up — the run ends with :class:`~dpbench.core.errors.NoWorkers`, exit
2, every cell computed so far kept — when

* every worker job is pending for a reason that no amount of waiting fixes
  (:data:`HOPELESS_SLURM_REASONS`, e.g. a held job or a partition limit), or
* no worker has been connected for the profile's ``worker_timeout_s`` (docs/clusters.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .worker_log import WorkerLog

#: SLURM pending reasons that mean the job will not start without someone changing it.
HOPELESS_SLURM_REASONS = frozenset({
    "AccountNotAllowed", "BadConstraints", "DependencyNeverSatisfied", "InvalidAccount",
    "InvalidQOS", "JobHeldAdmin", "JobHeldUser", "PartitionConfig", "PartitionDown",
    "PartitionInactive", "PartitionNodeLimit", "PartitionTimeLimit", "QOSJobLimit",
    "QOSMaxWallDurationPerJobLimit", "QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob",
})


def job_ids(cluster: Any) -> list[str]:
    """The batch job ids of a dask-jobqueue cluster's workers (empty for other clusters)."""
    try:
        jobs = list(getattr(cluster, "workers", {}).values())
    except RuntimeError:  # the dict changed under us (the cluster's event loop): try later
        return []
    return [str(j.job_id) for j in jobs if getattr(j, "job_id", None)]


def slurm_states(ids: list[str]) -> dict[str, tuple[str, str]]:
    """``{job id: (state, reason)}`` from ``squeue`` for the jobs still in the queue."""
    if not ids or shutil.which("squeue") is None:
        return {}
    try:
        out = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states = {}
    for line in out.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            states[parts[0]] = (parts[1], parts[2])
    return states


def describe(states: dict[str, tuple[str, str]], n_jobs: int) -> str:
    if not n_jobs:
        return "no worker job has been submitted (is the submission failing? see the log above)"
    if not states:
        return f"{n_jobs} worker job(s) submitted, none in the batch queue any more"
    groups: dict[tuple[str, str], list[str]] = {}
    for job, sr in sorted(states.items()):
        groups.setdefault(sr, []).append(job)
    return "; ".join(f"{len(jobs)} job(s) {state} ({reason}): {', '.join(jobs[:5])}"
                     + (" ..." if len(jobs) > 5 else "")
                     for (state, reason), jobs in groups.items())


class WorkerWatch:
    """A daemon thread that calls ``give_up`` (once) when the cluster gives no worker; the
    reason is then in :attr:`reason`. Use as a context manager around the result loop."""

    def __init__(self, client: Any, cluster: Any, timeout_s: float,
                 give_up: Callable[[], None], poll_s: float = 2.0,
                 note_every_s: float = 60.0, log: WorkerLog | None = None) -> None:
        self.client, self.cluster, self.timeout_s = client, cluster, timeout_s
        #: Told the connected workers at every poll: which were lost and joined (worker_log).
        self.log = log
        self.give_up, self.poll_s, self.note_every_s = give_up, poll_s, note_every_s
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dpbench-worker-watch",
                                        daemon=True)

    def __enter__(self) -> WorkerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.log is not None and exc[0] is None:
            self._workers()  # changes since the last poll

    def _workers(self) -> int | None:
        try:
            workers = set(self.client.nthreads())
        except Exception:  # noqa: BLE001 (a lost scheduler is the result loop's business)
            return None
        if self.log is not None:
            self.log.observe(workers)
        return len(workers)

    def _loopback(self) -> str:
        """Why no worker on another host may connect: the scheduler's address is a loopback one."""
        from .probes import loopback_hint

        address = getattr(getattr(self.client, "scheduler", None), "address", None)
        return loopback_hint(address) if isinstance(address, str) else ""

    def _loop(self) -> None:
        since: float | None = None
        next_note = self.note_every_s
        slurm = type(self.cluster).__name__ == "SLURMCluster"
        while not self._stop.wait(self.poll_s):
            n = self._workers()
            if n is None or n > 0:
                since, next_note = None, self.note_every_s
                continue
            now = time.monotonic()
            since = now if since is None else since
            waited = now - since
            ids = job_ids(self.cluster)
            states = slurm_states(ids) if slurm else {}
            detail = (describe(states, len(ids)) if slurm else
                      f"{len(ids)} worker job(s) submitted" if ids else "") + self._loopback()
            detail = detail.strip()
            pending = [r for s, r in states.values() if s == "PENDING"]
            hopeless = bool(pending) and len(pending) == len(states) and \
                all(r in HOPELESS_SLURM_REASONS for r in pending)
            if hopeless or waited >= self.timeout_s:
                why = ("the batch system will not start the worker jobs" if hopeless else
                       f"no worker after {waited:.0f} s (worker_timeout_s = "
                       f"{self.timeout_s:g} s)")
                self.reason = (why + (f": {detail}" if detail else "")
                               + "; the cells computed so far are kept: fix the profile (or raise"
                               " worker_timeout_s) and run the same command again to resume")
                self.give_up()
                return
            if waited >= next_note:
                next_note += self.note_every_s
                print(f"[dpbench] no worker yet after {waited:.0f} s"
                      + (f": {detail}" if detail else ""),
                      file=sys.stderr, flush=True)
