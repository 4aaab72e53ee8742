"""The dask backend: a ``LocalCluster`` (default), a cluster profile, a running scheduler or a
scheduler file (docs/clusters.md).

Tasks are submitted most-expensive-first with a bounded in-flight window and consumed as they
complete (``as_completed``). Dask re-runs the tasks of lost workers (``retries=1``); a task that
fails beyond that is yielded as :class:`~dpbench.engine.backends.base.TaskFailed`. A cancelled
future means the scheduler connection is gone: :class:`~dpbench.core.errors.SchedulerLost`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ...config.cluster import cluster_class, load_profile
from ...core.errors import SchedulerLost
from .base import TaskFailed

T = TypeVar("T")


def _local_cluster(workers: int | None) -> Any:
    from distributed import LocalCluster

    n = workers if workers is not None else (os.cpu_count() or 1)
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                        dashboard_address=None, silence_logs=40)


class DaskBackend:
    def __init__(self, client: Any, description: str) -> None:
        self.client, self.description = client, description

    @classmethod
    @contextlib.contextmanager
    def connect(cls, scheduler: str | None = None, profile: str | Path | None = None,
                workers: int | None = None, scheduler_file: str | Path | None = None,
                ) -> Iterator[DaskBackend]:
        """Open a client. Precedence: ``scheduler``, ``scheduler_file``, ``profile``, a
        LocalCluster of ``workers`` processes (one thread each)."""
        import dask
        from distributed import Client

        if scheduler is not None:
            with Client(scheduler, timeout="30s") as client:
                yield cls(client, f"scheduler {scheduler}")
            return
        if scheduler_file is not None:
            # DASK_SCHEDULER_ADDRESS is dask config "scheduler-address", which Client would prefer.
            with dask.config.set({"scheduler-address": None}), \
                    Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
                yield cls(client, f"scheduler {client.scheduler.address} (from {scheduler_file})")
            return
        if profile is not None:
            prof = load_profile(profile)
            with dask.config.set(prof.dask_config):
                manager = cluster_class(prof, profile)
                with manager(**prof.kwargs) as cluster:
                    if prof.scale:
                        cluster.scale(**prof.scale)
                    if prof.adapt:
                        cluster.adapt(**prof.adapt)
                    with Client(cluster) as client:
                        yield cls(client, f"{prof.module}.{prof.cls} from {profile}")
            return
        with _local_cluster(workers) as cluster, Client(cluster) as client:
            n = len(cluster.workers)
            yield cls(client, f"LocalCluster ({n} worker process{'es' if n != 1 else ''} "
                              "x 1 thread)")

    def results(self, run: Callable[[T], Any], tasks: Sequence[T],
                window: int | None = None) -> Iterator[tuple[T, Any]]:
        from distributed import as_completed

        client = self.client
        nthreads = sum(client.nthreads().values()) or 1
        window = window or max(4 * nthreads, 64)
        queue = iter(enumerate(tasks))
        specs: dict[str, T] = {}
        ac = as_completed(with_results=True, raise_errors=False)

        def launch() -> bool:
            nxt = next(queue, None)
            if nxt is None:
                return False
            rank, spec = nxt
            fut = client.submit(run, spec, key=spec.key, pure=False,  # type: ignore[attr-defined]
                                retries=1, priority=len(tasks) - rank)
            specs[fut.key] = spec
            ac.add(fut)
            return True

        for _ in range(window):
            if not launch():
                break
        for batch in ac.batches():
            for fut, res in batch:
                spec = specs.pop(fut.key)
                if fut.status == "cancelled":  # nobody else cancels: the connection is gone
                    where = getattr(client.scheduler, "address", "") or "of the run"
                    raise SchedulerLost(f"lost the scheduler {where} mid-run; the cells computed "
                                        "so far are saved: run the same command again to resume")
                if fut.status == "error":
                    exc = fut.exception()
                    yield spec, TaskFailed(f"task failed: {type(exc).__name__}: {exc}")
                else:
                    yield spec, res
                fut.release()
                launch()


def open_backend(conn: Any) -> contextlib.AbstractContextManager[DaskBackend]:
    scheduler = conn.scheduler
    if scheduler is None and conn.scheduler_file is None:
        scheduler = os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    return DaskBackend.connect(scheduler, conn.profile, conn.workers, conn.scheduler_file)
