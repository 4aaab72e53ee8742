"""Engine changes for large sweeps: status chunk layout, batched writes, cost-aware packing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpbench.config.records import suite_record
from dpbench.config.suite import load_suite, parse_suite
from dpbench.core.schema import DONE, FAILED, FLOAT_VARS, NOT_APPLICABLE, PENDING, ChunkResult
from dpbench.engine.plan import (
    CELL_OVERHEAD_COST,
    MAX_CHUNKS_PER_TASK,
    RAMP,
    TARGET_TASK_SECONDS,
    ExperimentPlan,
    Packer,
    expand,
    pack,
    plan_suite,
)
from dpbench.engine.runner import run_suite
from dpbench.store.cube import STATUS_CHUNK_CELLS, VALUE_CHUNK_CELLS, Store, chunk_shape
from tests.support.cubes import assert_cubes_identical, open_cube


@pytest.mark.parametrize(("shape", "budget", "expected"), [
    ((3, 2, 5, 1, 4, 1, 10), 1000, (2, 2, 5, 1, 4, 1, 10)),     # whole grids, part of algorithm
    ((3, 2, 50, 1, 4, 1, 10), 1000, (1, 1, 25, 1, 4, 1, 10)),   # part of the n axis
    ((2, 2, 7), 3, (1, 1, 7)),                                  # always a whole seed row
    ((2, 3, 4), 10 ** 6, (2, 3, 4)),                            # everything in one chunk
])
def test_chunk_shape_groups_whole_trailing_axes(shape: tuple[int, ...], budget: int,
                                                 expected: tuple[int, ...]) -> None:
    chunks = chunk_shape(shape, budget)
    assert chunks == expected
    assert np.prod(chunks) <= max(budget, shape[-1])


def test_store_status_is_chunked_by_grid_blocks(tiny_suite_file: Path, tmp_path: Path) -> None:
    suite = load_suite(tiny_suite_file)
    store = Store.prepare(Path(tmp_path / "s.zarr"), suite_record(suite))
    g = store.root["approx"]
    assert g["status"].chunks == chunk_shape(g["status"].shape, STATUS_CHUNK_CELLS)
    for var in (*FLOAT_VARS, "error"):
        assert g[var].chunks == chunk_shape(g[var].shape, VALUE_CHUNK_CELLS)
    for var in (*FLOAT_VARS, "error", "status"):  # whole seed rows, several grid points per chunk
        assert g[var].chunks[-1] == g[var].shape[-1]
        assert np.prod(g[var].chunks) > g[var].shape[-1]


def _result(index: tuple[int, ...], seeds: tuple[int, ...], n_seeds: int, value: float,
            code: int) -> ChunkResult:
    k = len(seeds)
    return ChunkResult("approx", index, seeds, k == n_seeds,
                       {v: np.full(k, value) for v in FLOAT_VARS},
                       np.full(k, code, dtype=np.uint8), [f"e{value}"] * k)


def test_write_many_merges_rows_sharing_a_zarr_chunk(tiny_suite_file: Path,
                                                          tmp_path: Path) -> None:
    suite = load_suite(tiny_suite_file)
    store = Store.prepare(Path(tmp_path / "s.zarr"), suite_record(suite))
    s = suite.experiments[0].seeds
    a, b = (0, 0, 0, 0, 0, 0), (0, 0, 1, 0, 0, 0)  # two rows of the same zarr chunks
    store.write_many([_result(a, tuple(range(s)), s, 1.5, DONE),
                      _result(b, tuple(range(s)), s, 2.5, FAILED)])
    st = store.status("approx")
    assert np.all(st[a] == DONE) and np.all(st[b] == FAILED)
    assert np.count_nonzero(st != PENDING) == 2 * s
    er = store.root["approx"]["excess_risk"]
    assert np.all(er[a] == 1.5) and np.all(er[b] == 2.5)
    assert list(store.root["approx"]["error"][b]) == ["e2.5"] * s
    # a partial (non-fresh) write keeps the stored seeds and only replaces the requested ones
    store.write_many([_result(b, (1, 3), s, 9.0, DONE)])
    st = store.status("approx")
    assert list(st[b]) == [FAILED, DONE, FAILED, DONE]
    assert list(er[b]) == [2.5, 9.0, 2.5, 9.0]
    assert np.all(st[a] == DONE) and np.all(er[a] == 1.5)  # the neighbour row is untouched
    assert list(store.root["approx"]["error"][b]) == ["e2.5", "e9.0", "e2.5", "e9.0"]


def test_write_many_takes_several_tasks_holding_seeds_of_one_row(tiny_suite_file: Path,
                                                                 tmp_path: Path) -> None:
    """The client writes the results of every task that completed together (one write): two
    tasks may hold different seeds of one row (the tail split), and each keeps its seeds."""
    suite = load_suite(tiny_suite_file)
    store = Store.prepare(Path(tmp_path / "s.zarr"), suite_record(suite))
    s = suite.experiments[0].seeds
    a, b = (0, 0, 0, 0, 0, 0), (0, 0, 1, 0, 0, 0)
    store.write_many([_result(a, (0, 2), s, 1.0, DONE), _result(b, tuple(range(s)), s, 3.0, DONE),
                      _result(a, (1,), s, 2.0, FAILED)])
    st, er = store.status("approx"), store.root["approx"]["excess_risk"]
    assert list(st[a]) == [DONE, FAILED, DONE, PENDING] and np.all(st[b] == DONE)
    assert list(er[a])[:3] == [1.0, 2.0, 1.0] and np.isnan(er[a][3]) and np.all(er[b] == 3.0)
    assert np.count_nonzero(st != PENDING) == s + 3


def test_crash_between_values_and_status_leaves_cells_pending(tiny_suite_file: Path,
                                                               tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               ) -> None:
    """Values are written before status: a failure while committing status leaves the chunk
    pending (recomputed on resume), never done without values."""
    suite = load_suite(tiny_suite_file)
    store = Store.prepare(Path(tmp_path / "s.zarr"), suite_record(suite))
    s = suite.experiments[0].seeds

    def boom(self: Store, commits: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(Store, "_commit_status", boom)
    with pytest.raises(OSError):
        store.write_many([_result((0, 0, 0, 0, 0, 0), tuple(range(s)), s, 1.0, DONE)])
    assert np.all(store.status("approx") == PENDING)
    assert np.all(store.root["approx"]["excess_risk"][0, 0, 0, 0, 0, 0] == 1.0)


def test_resume_after_partial_status_in_grouped_chunk(tiny_suite_file: Path,
                                                      tmp_path: Path) -> None:
    """Reset a few rows inside a shared status chunk: resume recomputes exactly those cells and
    the cube equals an uninterrupted run; not-applicable rows survive the rewrite of their chunk."""
    suite = load_suite(tiny_suite_file)
    ref, store = tmp_path / "ref.zarr", tmp_path / "r.zarr"
    run_suite(suite, ref, workers=0, progress=False)
    run_suite(suite, store, workers=0, progress=False)
    st = Store.open(store, mode="r+").root["approx"]["status"]
    st[0, 1, 2, ...] = np.zeros(st.shape[3:], dtype=np.uint8)
    st[1, 0, 0, 0, 0, 0, 1:3] = np.zeros(2, dtype=np.uint8)
    summary = run_suite(suite, store, workers=0, progress=False)
    assert summary.computed == suite.experiments[0].seeds + 2
    assert_cubes_identical(ref, store, ["approx", "pure"])
    assert np.all(open_cube(store, "approx").status.sel(algorithm="sgd_sc", problem="lb_lin")
                  .values == NOT_APPLICABLE)
    assert run_suite(suite, store, workers=0, progress=False).computed == 0


def _trivial_suite(points: int, seeds: int) -> str:
    return f"""
name: scale
seeds: {seeds}
experiments:
  - name: e
    problems: [{{problem: lb_lin}}]
    algorithms: [{{label: a, algorithm: nonprivate_erm}}]
    grid: {{n: [4], p: [1], epsilon: {[float(i + 1) for i in range(points)]}}}
"""


def test_cheap_chunks_pack_by_cell_overhead_not_into_one_task() -> None:
    """Trivial cells still cost ~CELL_OVERHEAD_COST each, so a large sweep of them is split into
    many tasks (parallelism, progress) instead of a few 256-chunk tasks; packing is a function of
    the suite only, and every chunk lands in exactly one task."""
    suite = parse_suite(_trivial_suite(points=400, seeds=50))
    chunks, na = expand(suite, suite.experiments[0])
    assert not na and len(chunks) == 400
    tasks = pack(chunks)
    assert all(c.cost >= 50 * CELL_OVERHEAD_COST for c in chunks)
    assert len(tasks) > len(chunks) / MAX_CHUNKS_PER_TASK * 4
    packed = [c.index for t in tasks for c in t.chunks]
    assert sorted(packed) == sorted(c.index for c in chunks)
    assert [t.key for t in pack(chunks)] == [t.key for t in tasks]
    costs = [t.cost for t in tasks]
    assert costs[0] == max(costs)  # most expensive first


def test_expand_builds_each_algorithm_configuration_once(monkeypatch: pytest.MonkeyPatch) -> None:
    suite = parse_suite(_trivial_suite(points=30, seeds=2))
    spec = suite.experiments[0].algorithms[0]
    calls = []
    original = type(spec).build

    def counting(self: object, axes: object) -> object:
        if self is spec:
            calls.append(axes)
        return original(self, axes)

    monkeypatch.setattr(type(spec), "build", counting)
    chunks, _ = expand(suite, suite.experiments[0])
    assert len(chunks) == 30
    assert len(calls) == 1  # no extra axes routed to the algorithm: one configuration


def test_the_plan_streams_tasks_in_pack_order_building_each_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan_suite(...).tasks()`` gives exactly the tasks ``pack`` gives for the materialised
    chunks (same keys, same chunks, same order, across experiments and with a partial pending
    mask), but builds a task's chunks only when the backend pulls it: the client holds compact
    per-chunk arrays, never the whole task list."""
    text = _trivial_suite(points=300, seeds=4).rstrip() + """
  - name: d
    problems: [{problem: lb_quad}, {problem: lb_lin}]
    algorithms: [{algorithm: nonprivate_erm}, {algorithm: output_perturbation}]
    grid: {n: [10, 20, 40], p: [1, 3], epsilon: [0.5, 1.0]}
"""
    suite = parse_suite(text)
    rng = np.random.default_rng(0)
    pending = {e.name: rng.random(e.shape) < 0.7 for e in suite.experiments}
    for masks in (None, pending):
        chunks = [c for e in suite.experiments
                  for c in expand(suite, e, None if masks is None else masks[e.name])[0]]
        expected = pack(chunks)
        plan = plan_suite(suite, masks)
        got = list(plan.tasks())
        assert [t.key for t in got] == [t.key for t in expected]
        assert [[(c.experiment, c.index, c.seeds, c.cost) for c in t.chunks] for t in got] == \
            [[(c.experiment, c.index, c.seeds, c.cost) for c in t.chunks] for t in expected]
        assert plan.n_cells == sum(len(c.seeds) for c in chunks)
        assert plan.total_cost == pytest.approx(sum(c.cost for c in chunks), rel=1e-12)

    built = []
    original = ExperimentPlan.chunk

    def counting(self: ExperimentPlan, i: int) -> object:
        built.append(i)
        return original(self, i)

    monkeypatch.setattr(ExperimentPlan, "chunk", counting)
    stream = plan_suite(suite).tasks()
    first = next(stream)
    assert len(built) == len(first.chunks) < plan.n_chunks


def _fake_result(task: object, seconds_per_cell: float) -> object:
    """A TaskResult-like object: every cell took ``seconds_per_cell`` of mechanism time."""
    from types import SimpleNamespace

    chunks = [SimpleNamespace(values={"wall_time_s": np.full(len(c.seeds), seconds_per_cell)})
              for c in task.chunks]  # type: ignore[attr-defined]
    cells = sum(len(c.seeds) for c in task.chunks)  # type: ignore[attr-defined]
    return SimpleNamespace(chunks=chunks, seconds=cells * seconds_per_cell)


def test_the_packer_packs_from_measured_cost_not_from_the_estimate() -> None:
    """Estimates say the cells are trivial (nonprivate_erm declares no cost(): the fallback);
    they take 30 ms each. Unmeasured, the class is probed: one single-chunk task per worker
    thread, then "wait" (None) until a result is in; after it, tasks hold about
    TARGET_TASK_SECONDS of *measured* work (10 chunks of one 30 ms cell), not 256 chunks; near
    the end they shrink so the tail balances over the workers; every chunk is sent once."""
    suite = parse_suite(_trivial_suite(points=400, seeds=1))
    packer = Packer(plan_suite(suite))
    packer.capacity = lambda: 2
    stream = packer.tasks()
    probes = [next(stream), next(stream)]
    assert [len(t.chunks) for t in probes] == [1, 1]
    assert next(stream) is None and next(stream) is None      # wait: both probes in flight
    packer.observe(probes[0], _fake_result(probes[0], 0.03))
    rest = [t for t in stream if t is not None]
    sizes = [len(t.chunks) for t in rest]
    assert max(sizes) == round(TARGET_TASK_SECONDS / 0.03)   # 10 chunks of 30 ms = 0.3 s
    assert sizes[-1] < max(sizes)                             # the tail is split finer
    sent = [c.index for t in probes + rest for c in t.chunks]
    assert sorted(sent) == sorted(set(sent)) and len(sent) == 400
    # what the static packer does with the same estimates: a few 256-chunk tasks (~serial)
    assert max(len(t.chunks) for t in pack(expand(suite, suite.experiments[0])[0])) > 100


def test_the_first_tasks_ramp_up_to_the_target() -> None:
    """The first tasks hold 1/8, 1/4 and 1/2 of the target (RAMP): the first results come back
    after tens of milliseconds of work; then full tasks."""
    suite = parse_suite(_trivial_suite(points=400, seeds=1))
    packer = Packer(plan_suite(suite))
    packer.capacity = lambda: 2
    stream = packer.tasks()
    probes = [next(stream), next(stream)]
    assert next(stream) is None
    packer.observe(probes[0], _fake_result(probes[0], 0.01))     # 30 chunks make a full task
    sizes = [len(t.chunks) for t in stream if t is not None]
    full = round(TARGET_TASK_SECONDS / 0.01)
    # a task closes once its work reaches the target: one chunk more when a sum rounds below it
    assert all(full * f <= n <= full * f + 1 for n, f in zip(sizes, RAMP)), sizes
    assert sizes[len(RAMP)] in (full, full + 1), sizes


def test_a_failed_probe_lets_the_next_one_go() -> None:
    """A probe that fails (no timing) frees its slot: the packer probes again instead of
    waiting for ever; a class whose algorithm declares cost() is packed from it at once."""
    suite = parse_suite(_trivial_suite(points=50, seeds=1))
    packer = Packer(plan_suite(suite))
    stream = packer.tasks()
    first = next(stream)
    assert next(stream) is None
    packer.observe(first, object())                          # failed: nothing learnt
    second = next(stream)
    assert second is not None and len(second.chunks) == 1 and second.key != first.key

    declared = parse_suite(_trivial_suite(points=50, seeds=1)
                           .replace("nonprivate_erm", "noisy_sgd")
                           .replace("p: [1],", "p: [1], delta: [1.0e-5],"))
    tasks = list(Packer(plan_suite(declared)).tasks())
    assert None not in tasks and sum(len(t.chunks) for t in tasks) == 50


def test_the_plan_holds_twelve_bytes_per_chunk_and_plan_states_its_peak() -> None:
    """The documented client memory (docs/reliability.md, 'Size limits'): position and cost 4
    bytes each, the submission order 4 (8 more while it is sorted: PLAN_BYTES_PER_CHUNK), and
    ``dpbench plan`` states the peak; two problems are joined in (problem, grid, algorithm)
    order."""
    from dpbench.engine.estimate import estimate, summary_lines
    from dpbench.engine.plan import PLAN_BYTES_PER_CHUNK

    text = _trivial_suite(points=50, seeds=1).replace("[{problem: lb_lin}]",
                                                      "[{problem: lb_lin}, {problem: lb_quad}]")
    suite = parse_suite(text)
    plan = plan_suite(suite)
    ep = plan.experiments[0]
    assert ep.flat.itemsize + ep.cost.itemsize + plan._order.itemsize == 12
    assert PLAN_BYTES_PER_CHUNK == 12 + np.dtype(np.uint64).itemsize
    problems = [int(np.unravel_index(f, ep.shape)[1]) for f in ep.flat]
    assert problems == sorted(problems) and len(ep) == 100
    lines = summary_lines(estimate(suite, plan), workers=2)
    assert any(line.startswith("client memory for the plan: about 0 MiB at its peak (100 "
                               f"chunks of {PLAN_BYTES_PER_CHUNK} bytes)") for line in lines)


def test_validate_states_the_plan_memory_of_a_large_suite(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """Before anything is planned: a suite of 10⁷ one-seed grid rows (max_cells raised) is told
    it needs 191 MiB of client memory for its plan (20 bytes per chunk)."""
    from dpbench.cli.main import main

    suite = tmp_path / "big.yaml"
    suite.write_text(_trivial_suite(points=10_000, seeds=1).replace(
        "grid: {n: [4]", f"grid: {{n: {list(range(2, 1002))}").replace(
        "seeds: 1", "seeds: 1\nmax_cells: 10000000"))
    assert main(["validate", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "client memory for the plan: at most 191 MiB (10,000,000 chunks of 20 bytes" in out
