"""The run's ETA (:class:`dpbench.engine.runner.Progress`) follows measured times, not the costs
plugins declare: a class declared cheap but slow must not make the ETA read "1 s" while most of
the time is still ahead (seen on the audit suite before: vectorised batches declared costly and
finishing in milliseconds, slow samplers declared cheap)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dpbench.engine.runner import Progress


@dataclass(frozen=True)
class _Chunk:
    experiment: str
    index: tuple[int, ...]
    cost: float


FAST = ("e", 0, 0)   # declared 1000 units per chunk, takes 0.01 s
SLOW = ("e", 1, 0)   # declared 1 unit per chunk, takes 1 s


def _chunk(cls: tuple[str, int, int], cost: float) -> _Chunk:
    return _Chunk(cls[0], (cls[1], cls[2], 0), cost)


def _progress(n_fast: int, n_slow: int) -> Progress:
    return Progress(n_fast + n_slow, 1000.0 * n_fast + n_slow, enabled=False,
                    class_units={FAST: 1000.0 * n_fast, SLOW: 1.0 * n_slow},
                    class_chunks={FAST: n_fast, SLOW: n_slow})


def test_eta_from_measured_class_rates() -> None:
    bar = _progress(100, 100)
    assert bar.eta_seconds(1.0) is None  # nothing measured yet
    for _ in range(100):  # every fast chunk done: 99.8 % of the declared cost
        bar.observe([_chunk(FAST, 1000.0)], 0.01)
    bar.observe([_chunk(SLOW, 1.0)], 1.0)
    # 2 s of worker time obtained in 1 s (two workers); 99 slow chunks at 1 s each are left
    assert bar.eta_seconds(1.0) == pytest.approx(99.0 / 2.0)
    bar.update(101, 0, 1000.0 * 100 + 1)
    cost_based = 1.0 * (bar.total_cost - bar.cost_done) / bar.cost_done
    assert cost_based < 0.01  # what the cost-weighted ETA would have said


def test_unmeasured_classes_take_the_mean_chunk_time_and_failures_are_not_timed() -> None:
    # Declared units do not carry over between classes (the slow class declares 1000 times
    # fewer): an unmeasured class's chunks take the measured classes' mean seconds per chunk.
    bar = _progress(10, 10)
    for _ in range(5):
        bar.observe([_chunk(FAST, 1000.0)], 0.5)   # 5e-4 s per unit, 0.5 s per chunk
    bar.observe([_chunk(FAST, 1000.0)], 0.0)       # a failed task: its units are done, untimed
    # left: 4 fast chunks (4000 units at 5e-4 s) and 10 slow chunks at 0.5 s each
    assert bar.eta_seconds(2.5) == pytest.approx(4000 * 5e-4 + 10 * 0.5)
    bar.observe([_chunk(SLOW, 1.0)], 2.0)          # now measured: 2 s per unit
    assert bar.eta_seconds(4.5) == pytest.approx((4000 * 5e-4 + 9 * 2.0) / (4.5 / 4.5))


def test_a_task_of_several_classes_splits_its_time_by_units() -> None:
    bar = _progress(1, 3)
    bar.observe([_chunk(FAST, 1000.0), _chunk(SLOW, 1.0)], 2.002)  # 0.002 s per unit
    assert bar.eta_seconds(2.002) == pytest.approx(2 * 0.002)


def test_without_class_units_the_eta_is_cost_weighted() -> None:
    bar = Progress(10, 10.0, enabled=False)
    bar.observe([_chunk(FAST, 1.0)], 1.0)
    assert bar.eta_seconds(1.0) is None
    bar.update(1, 0, 1.0)
    assert bar._eta() != "ETA --"
