"""Which workers a run lost and gained while it was in flight (docs/clusters.md, 'Multi-node',
'Network faults').

dask re-runs the tasks of a worker it loses, so a run survives a node that crashes, is cut off
or never comes back; without this module it would not say so. :class:`WorkerLog` is fed the set
of connected workers by :class:`~.worker_watch.WorkerWatch` (which polls the scheduler every
two seconds anyway). When workers disappear it asks the scheduler's event log why, for those
workers only (each worker's own topic: a few events, never the whole log): ``remove-worker``
with ``expected`` false is a **lost** worker — no heartbeat for ``distributed.scheduler.
worker-ttl`` (a cut link, a hung node) or its connection closed (a killed process or node) —
and the tasks it was computing, which the scheduler hands to other workers. Expected removals
(``--lifetime``, adaptive scale-down, a retirement) are **retired**. Workers that connect after
the first loss are **joined** (a node back on the network, a replacement job).

Lost and joined workers are printed as they are noticed (``[dpbench] lost worker …``), and the
run log records :meth:`WorkerLog.summary` as ``runs[-1].workers``; :meth:`WorkerLog.describe`
is appended to the backend's description (the line ``dpbench run`` prints at the end).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

#: Lost and joined workers listed individually in the run log (beyond: counted only).
MAX_LISTED = 50


def _why(msg: dict[str, Any], ttl: str) -> str:
    stimulus = str(msg.get("stimulus_id", ""))
    if stimulus.startswith("check-worker-ttl"):
        return f"no heartbeat for worker-ttl ({ttl})"
    if stimulus.startswith("handle-worker-cleanup"):
        return "its connection to the scheduler closed"
    return stimulus.rsplit("-", 1)[0] or "removed by the scheduler"


class WorkerLog:
    """Workers lost, retired and joined since the first :meth:`observe` (module docstring);
    ``elapsed`` gives the seconds into the run (default: since construction)."""

    def __init__(self, client: Any, elapsed: Callable[[], float] | None = None) -> None:
        self.client = client
        self._t0 = time.monotonic()
        self._clock = elapsed or (lambda: time.monotonic() - self._t0)
        self._known: set[str] | None = None
        self.lost: list[dict[str, Any]] = []
        self.joined: list[dict[str, Any]] = []
        self.n_lost = self.n_joined = self.n_retired = 0
        self.tasks_rerun = 0
        self._lock = threading.Lock()

    def _ttl(self) -> str:
        try:
            import dask

            return str(dask.config.get("distributed.scheduler.worker-ttl"))
        except Exception:  # noqa: BLE001 - only wording
            return "?"

    def _removal(self, address: str) -> dict[str, Any] | None:
        """The scheduler's last ``remove-worker`` event of ``address`` (None: not known)."""
        try:
            events = self.client.get_events(address)
        except Exception:  # noqa: BLE001 - a scheduler that cannot be asked: say less
            return None
        for _, msg in reversed(list(events or ())):
            if isinstance(msg, dict) and msg.get("action") == "remove-worker":
                return msg
        return None

    def observe(self, workers: set[str]) -> None:
        """The workers connected now (addresses). The first call sets the starting set."""
        with self._lock:
            if self._known is None:
                self._known = set(workers)
                return
            gone, new = self._known - workers, workers - self._known
            self._known = set(workers)
            at = round(self._clock(), 1)
            for address in sorted(gone):
                msg = self._removal(address)
                if msg is not None and msg.get("expected"):
                    self.n_retired += 1
                    continue
                running = len(msg.get("processing-tasks", ())) if msg else 0
                why = _why(msg, self._ttl()) if msg else "it left the cluster"
                self.n_lost += 1
                self.tasks_rerun += running
                if len(self.lost) < MAX_LISTED:
                    self.lost.append({"worker": address, "at_s": at, "why": why,
                                      "tasks_rerun": running})
                print(f"[dpbench] lost worker {address} after {at:.0f} s ({why}); its "
                      f"{running} task(s) in progress go to other workers; "
                      f"{len(workers)} worker(s) left", file=sys.stderr, flush=True)
            if self.n_lost:
                for address in sorted(new):
                    self.n_joined += 1
                    if len(self.joined) < MAX_LISTED:
                        self.joined.append({"worker": address, "at_s": at})
                    print(f"[dpbench] worker {address} joined after {at:.0f} s; "
                          f"{len(workers)} worker(s) now", file=sys.stderr, flush=True)

    def summary(self) -> dict[str, Any]:
        """The run log's ``workers`` entry (empty when nothing happened)."""
        if not (self.n_lost or self.n_retired):
            return {}
        return {"lost": self.n_lost, "tasks_rerun": self.tasks_rerun,
                "joined_after_loss": self.n_joined, "retired": self.n_retired,
                **({"lost_workers": self.lost} if self.lost else {}),
                **({"joined_workers": self.joined} if self.joined else {})}

    def describe(self) -> str:
        """What to append to the backend's description ('' when no worker was lost)."""
        if not self.n_lost:
            return ""
        hosts = sorted({w["worker"].split("://")[-1].rsplit(":", 1)[0] for w in self.lost})
        return (f"; {self.n_lost} worker(s) lost mid-run (on {', '.join(hosts)}), "
                f"{self.tasks_rerun} task(s) in progress rerun on other workers, "
                f"{self.n_joined} worker(s) joined after the loss")
