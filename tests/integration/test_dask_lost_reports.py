"""The dask backend settles a task whose report to the client was lost.

Once, after every worker was killed mid-run, the scheduler held a task ``erred`` that the
client still waited for: the error never reached the client, and the run waited forever on idle
workers. Here the client's handlers drop the reports of chosen tasks (a result and an error);
the backend must still hand over both, from the scheduler's state, and end.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from dpbench.engine.backends import dask as dask_backend
from dpbench.engine.backends.base import IDLE, TaskFailed


@dataclass(frozen=True)
class _Task:
    key: str
    value: int


def _compute(task: _Task) -> int:
    if task.value < 0:
        raise ValueError(f"negative {task.value}")
    return 2 * task.value


def test_lost_reports_are_settled_from_the_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Client, LocalCluster

    monkeypatch.setattr(dask_backend, "STALL_CHECK_S", 0.5)
    tasks = [_Task(f"t-{i}", i) for i in range(6)] + [_Task("t-bad", -1)]
    lost = {"t-3", "t-bad"}
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for op in ("key-in-memory", "task-erred"):
            handler = client._stream_handlers[op]
            client._stream_handlers[op] = (
                lambda handler=handler, **msg: None if msg.get("key") in lost else handler(**msg))
        backend = dask_backend.DaskBackend(client, "test")
        got: dict[str, Any] = {}
        done = threading.Event()

        def consume() -> None:
            for item in backend.results(_compute, iter(tasks)):
                if item is not IDLE:
                    got[item[0].key] = item[1]
            done.set()

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        assert done.wait(60), f"the run never ended; received {sorted(got)}"
    assert {k: v for k, v in got.items() if k != "t-bad"} == {f"t-{i}": 2 * i for i in range(6)}
    assert isinstance(got["t-bad"], TaskFailed) and "negative -1" in got["t-bad"].message
