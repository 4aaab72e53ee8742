"""The forked backend (engine/backends/forked.py): tasks computed in forked worker processes,
deaths retried once, a stop that hands the rest of the tasks back, workers stopped on close."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dpbench.engine.backends.base import IDLE, TaskFailed, fork_available
from dpbench.engine.backends.forked import ForkedWorkers
from dpbench.engine.plan import UNITS_PER_SECOND, Packer, plan_suite

pytestmark = pytest.mark.skipif(not fork_available(), reason="forked workers need Linux fork")


@dataclass(frozen=True)
class Job:
    key: str
    value: int
    action: str = ""
    marker: str = ""
    sleep_s: float = 0.0


def work(job: Job) -> tuple[int, int]:
    """Twice the value and the pid that computed it; or the job's fault."""
    time.sleep(job.sleep_s)
    if job.action == "raise":
        raise ValueError(f"bad value {job.value}")
    if job.action == "exit":
        os._exit(3)
    if job.action == "exit-once" and not os.path.exists(job.marker):
        Path(job.marker).touch()
        os._exit(4)
    return 2 * job.value, os.getpid()


def collect(items: Any) -> tuple[dict[str, Any], int]:
    """The results by key, and how many IDLE markers came between them."""
    out: dict[str, Any] = {}
    idle = 0
    for item in items:
        if item is IDLE:
            idle += 1
            continue
        job, res = item
        assert job.key not in out, f"{job.key} handed over twice"
        out[job.key] = res
    return out, idle


def test_every_task_is_computed_in_a_forked_worker() -> None:
    jobs = [Job(f"j{i}", i, sleep_s=0.02) for i in range(20)]
    with ForkedWorkers(2) as pool:
        out, idle = collect(pool.results(work, jobs))
    assert {k: v[0] for k, v in out.items()} == {j.key: 2 * j.value for j in jobs}
    pids = {v[1] for v in out.values()}
    assert os.getpid() not in pids and len(pids) == 2, pids
    assert idle > 0  # it said so before waiting


def test_a_raising_task_fails_alone() -> None:
    jobs = [Job("a", 1), Job("b", 2, "raise"), Job("c", 3)]
    with ForkedWorkers(2) as pool:
        out, _ = collect(pool.results(work, jobs))
    assert isinstance(out["b"], TaskFailed) and "ValueError: bad value 2" in out["b"].message
    assert out["a"][0] == 2 and out["c"][0] == 6


def test_a_task_whose_worker_dies_is_retried_once_then_failed(tmp_path: Path) -> None:
    jobs = [Job("dies", 1, "exit"), Job("once", 2, "exit-once", str(tmp_path / "m")),
            *(Job(f"ok{i}", i) for i in range(6))]
    with ForkedWorkers(2) as pool:
        out, _ = collect(pool.results(work, jobs))
    assert isinstance(out["dies"], TaskFailed)
    assert "died twice" in out["dies"].message and "exit code 3" in out["dies"].message
    assert out["once"][0] == 4  # its first worker died; the retry computed it
    assert all(out[f"ok{i}"][0] == 2 * i for i in range(6))
    assert len(out) == len(jobs)


def test_stop_hands_the_remaining_tasks_back() -> None:
    jobs = iter([Job(f"j{i}", i) for i in range(10)])
    submitted = [0]

    def stop() -> bool:
        submitted[0] += 1
        return submitted[0] > 3  # three tasks taken, then stop

    with ForkedWorkers(2) as pool:
        gen = pool.results(work, jobs, stop=stop)
        out: dict[str, Any] = {}
        while True:
            try:
                item = next(gen)
            except StopIteration as end:
                exhausted = end.value
                break
            if item is not IDLE:
                out[item[0].key] = item[1]
    assert exhausted is False
    assert sorted(out) == ["j0", "j1", "j2"]
    assert [j.key for j in jobs] == [f"j{i}" for i in range(3, 10)]  # left to the caller


def test_none_means_wait_for_a_task_in_flight() -> None:
    def stream() -> Any:
        yield Job("a", 1, sleep_s=0.05)
        yield None  # the packer probing: nothing more until a result is back
        yield Job("b", 2)

    with ForkedWorkers(2) as pool:
        out, _ = collect(pool.results(work, stream()))
    assert out["a"][0] == 2 and out["b"][0] == 4


def test_close_stops_the_workers() -> None:
    pool = ForkedWorkers(2)
    pids = [c.pid for c in pool._tasks]
    pool.close()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped already: no such child


def test_work_left_is_what_is_not_handed_out_yet(tiny_suite_file: Path) -> None:
    """What the embedded default asks before it starts its LocalCluster: the work not yet handed
    out as tasks, in worker seconds (unmeasured classes at their estimate)."""
    from dpbench.config.suite import load_suite

    packer = Packer(plan_suite(load_suite(tiny_suite_file)))
    estimate = sum(packer._left.values()) / UNITS_PER_SECOND
    assert packer.work_left_s() == pytest.approx(estimate)
    tasks = packer.tasks()
    first = next(tasks)
    while first is None:
        first = next(tasks)
    handed = sum(c.cost for c in first.chunks) / UNITS_PER_SECOND
    assert packer.work_left_s() == pytest.approx(estimate - handed)


def test_signals_for_the_process_group_are_the_clients_to_handle() -> None:
    """A Ctrl-C reaches every process of the group: a forked worker ignores it (the client stops
    its workers), so no cell records the interruption as its own failure. A SIGTERM ends the
    worker (default action): its task is retried in a fresh one."""
    import signal

    with ForkedWorkers(1) as pool:
        gen = pool.results(work, [Job("a", 1, sleep_s=0.3), Job("b", 2, sleep_s=0.3)])
        child = next(iter(pool._tasks))
        first = next(gen)  # the client waits: both tasks are queued on the one worker
        assert first is IDLE
        os.kill(child.pid, signal.SIGINT)
        out, _ = collect(gen)
    assert out["a"][0] == 2 and out["b"][0] == 4 and out["a"][1] == child.pid

    with ForkedWorkers(1) as pool:
        gen = pool.results(work, [Job("a", 1, sleep_s=0.3)])
        child = next(iter(pool._tasks))
        assert next(gen) is IDLE
        os.kill(child.pid, signal.SIGTERM)
        out, _ = collect(gen)
    assert out["a"][0] == 2 and out["a"][1] != child.pid  # computed again by a fresh worker
