"""WorkerLog (dpbench/engine/backends/worker_log.py): workers that leave a run are classified
from the scheduler's remove-worker events (lost: worker-ttl or a closed connection; retired:
expected), workers that connect after a loss are joined; the summary and the description say
so. The multi-node faults themselves: tests/integration/test_multinode_faults.py."""

from __future__ import annotations

from typing import Any

import pytest

from dpbench.engine.backends.worker_log import MAX_LISTED, WorkerLog


class _Client:
    """The one call WorkerLog makes: a worker's own topic of the scheduler's event log."""

    def __init__(self, events: dict[str, list[tuple[float, dict[str, Any]]]]) -> None:
        self.events = events

    def get_events(self, topic: str) -> list[tuple[float, dict[str, Any]]]:
        if topic == "broken":
            raise OSError("scheduler gone")
        return self.events.get(topic, [])


def _removed(stimulus: str, expected: bool = False, tasks: int = 0) -> list[tuple[float, dict]]:
    return [(1.0, {"action": "add-worker"}),
            (2.0, {"action": "remove-worker", "stimulus_id": f"{stimulus}-123.4",
                   "expected": expected, "processing-tasks": [f"k{i}" for i in range(tasks)]})]


def test_lost_retired_and_joined(capsys: pytest.CaptureFixture[str]) -> None:
    a, b, c, d, e = (f"tcp://192.0.2.{i}:4000" for i in (11, 12, 13, 14, 15))
    log = WorkerLog(_Client({a: _removed("check-worker-ttl", tasks=2),
                             b: _removed("handle-worker-cleanup", tasks=1),
                             c: _removed("retire-workers", expected=True)}),
                    elapsed=lambda: 7.0)
    log.observe({a, b, c})
    log.observe({a, b, c, d})  # a join before any loss: the cluster growing, not noted
    assert log.summary() == {} and log.describe() == ""
    log.observe({d})
    log.observe({d, e})
    s = log.summary()
    assert (s["lost"], s["tasks_rerun"], s["retired"], s["joined_after_loss"]) == (2, 3, 1, 1)
    assert [w["why"] for w in s["lost_workers"]] == [
        "no heartbeat for worker-ttl (" + s["lost_workers"][0]["why"].split("(")[1],
        "its connection to the scheduler closed"]
    assert s["joined_workers"] == [{"worker": e, "at_s": 7.0}]
    assert "2 worker(s) lost mid-run (on 192.0.2.11, 192.0.2.12), 3 task(s)" in log.describe()
    err = capsys.readouterr().err
    assert err.count("[dpbench] lost worker") == 2 and f"worker {e} joined" in err
    assert "192.0.2.13" not in err  # retired: expected, not printed


def test_a_scheduler_that_cannot_be_asked_still_counts_the_loss() -> None:
    log = WorkerLog(_Client({}), elapsed=lambda: 1.0)
    log.observe({"broken", "tcp://x:1"})
    log.observe({"tcp://x:1"})
    assert log.summary()["lost"] == 1
    assert log.summary()["lost_workers"][0]["why"] == "it left the cluster"


def test_listing_is_bounded() -> None:
    workers = {f"tcp://10.0.0.1:{i}" for i in range(MAX_LISTED + 10)}
    log = WorkerLog(_Client({}), elapsed=lambda: 1.0)
    log.observe(workers)
    log.observe(set())
    assert log.summary()["lost"] == MAX_LISTED + 10
    assert len(log.summary()["lost_workers"]) == MAX_LISTED
