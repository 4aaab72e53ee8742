"""The engine end to end: cube layout, determinism across backends and worker counts, failures,
not-applicable cells, resume."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpbench import Algorithm, Param, PrivacyLedger, Release
from dpbench.cli.main import main
from dpbench.config.suite import load_suite, parse_suite
from dpbench.core import registry
from dpbench.core.errors import StoreError, UserInputError
from dpbench.core.schema import DONE, FAILED, NOT_APPLICABLE
from dpbench.core.time_limit import checkpoint
from dpbench.engine.runner import run_suite
from dpbench.store.cube import ROOT_KEY, Store
from tests.support.cubes import assert_cubes_identical, open_cube


def test_cube_layout_and_values(tiny_suite_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "cube.zarr"
    summary = run_suite(load_suite(tiny_suite_file), store, workers=0, progress=False)
    assert summary.complete
    ds = open_cube(store, "approx")
    assert ds.excess_risk.dims == ("algorithm", "problem", "n", "p", "epsilon", "delta", "seed")
    assert list(ds.algorithm.values) == ["nonprivate", "sgd", "sgd_sc"]
    for var in ("excess_risk", "population_excess_risk", "wall_time_s", "grad_queries", "status",
                "error", "epsilon_spent", "delta_spent", "optimum_gap"):
        assert var in ds
    st = ds.status.values
    assert set(np.unique(st)) <= {DONE, NOT_APPLICABLE}
    done = st == DONE
    assert np.all(np.isfinite(ds.excess_risk.values[done]))
    assert np.all(ds.excess_risk.values[done] >= -1e-9)
    # the strongly convex variant is not applicable to the (merely convex) linear loss
    na = ds.status.sel(algorithm="sgd_sc", problem="lb_lin").values
    assert np.all(na == NOT_APPLICABLE)
    assert "strongly_convex" in str(ds.error.sel(algorithm="sgd_sc", problem="lb_lin").values.flat[0])
    # the non-private reference sits at the certified optimum
    ref = ds.excess_risk.sel(algorithm="nonprivate").values
    assert np.all(np.abs(ref) <= 1e-9)
    # NoisySGD spent no more than its budget and is at least as bad as the reference
    sgd = ds.sel(algorithm="sgd")
    assert np.all(sgd.epsilon_spent.values <= 1.0 + 1e-9)
    assert np.all(sgd.delta_spent.values <= 1e-5 * (1 + 1e-9))
    assert np.all(sgd.grad_queries.values == (sgd.n.values[None, :, None, None, None, None] ** 2 - 1))
    assert ds.attrs["algorithms"]["sgd"]["rate_card"]["citation"].startswith("BST14")
    assert ds.attrs["problems"]["lb_quad"]["constants"]["L"] == 2.0
    pure = open_cube(store, "pure")
    assert np.all(pure.status.sel(problem="hinge_svm").values == NOT_APPLICABLE)
    assert np.all(pure.status.sel(problem="lb_quad").values == DONE)
    assert np.all(pure.delta_spent.sel(problem="lb_quad").values == 0.0)
    logistic = pure.population_excess_risk.sel(problem="logistic").values
    assert np.all(np.isfinite(logistic))


def test_paired_data_across_algorithms(tiny_suite_file: Path, tmp_path: Path) -> None:
    """Same (problem, n, p, seed) -> same data for every algorithm and epsilon: the non-private
    optimum's gap is identical across algorithms' rows and epsilon values by construction; here we
    check that the data stream ignores the experiment and the algorithm."""
    from dpbench.core.seeding import data_identity, make_rng
    from dpbench.engine.cells import dataset_and_optimum
    from dpbench.problems.lb_quad import LBQuad

    ident = data_identity("lb_quad", LBQuad().get_params(), 10, 3, 1)
    a, _ = dataset_and_optimum(LBQuad(), ident, 7)
    b = LBQuad().generate(10, 3, make_rng(ident, 7))
    assert np.array_equal(a.X, b.X)


@pytest.mark.slow
def test_inline_and_local_cluster_worker_counts_bit_identical(
        tiny_suite_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded default computes a short sweep in forked workers and never starts its
    LocalCluster; told that any work is worth the cluster, it hands over to it. Every worker
    count and both paths give the inline cube, bit for bit."""
    from dpbench.engine.backends import dask as dask_backend

    suite = load_suite(tiny_suite_file)
    ref = tmp_path / "inline.zarr"
    run_suite(suite, ref, workers=0, progress=False)
    for workers in (1, 2, 4):
        out = tmp_path / f"w{workers}.zarr"
        summary = run_suite(suite, out, workers=workers, progress=False)
        assert summary.complete, summary
        assert summary.backend.startswith(f"{workers} forked worker process"), summary.backend
        assert "LocalCluster was not started" in summary.backend
        assert_cubes_identical(ref, out, ["approx", "pure"])
    monkeypatch.setattr(dask_backend, "CLUSTER_WORTH_S", 0.0)
    for workers in (1, 2):
        out = tmp_path / f"c{workers}.zarr"
        summary = run_suite(suite, out, workers=workers, progress=False)
        assert summary.complete, summary
        assert summary.backend.startswith(f"LocalCluster ({workers} worker"), summary.backend
        assert_cubes_identical(ref, out, ["approx", "pure"])


def test_forked_backend_without_fork_is_refused_before_anything_is_written(
        tiny_suite_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from dpbench.engine.backends import base

    monkeypatch.setattr(base, "fork_available", lambda: False)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(tiny_suite_file), "--store", str(tmp_path / "s.zarr"),
                 "--backend", "forked", "--quiet"]) == 2
    assert "--backend forked needs Linux's fork" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_forked_backend_is_bit_identical_to_inline(tiny_suite_file: Path, tmp_path: Path,
                                                   workers: int) -> None:
    suite = load_suite(tiny_suite_file)
    ref = tmp_path / "inline.zarr"
    run_suite(suite, ref, backend="inline", progress=False)
    out = tmp_path / f"f{workers}.zarr"
    summary = run_suite(suite, out, backend="forked", workers=workers, progress=False)
    assert summary.complete and summary.backend == (
        f"{workers} forked worker process{'es' if workers > 1 else ''}"), summary.backend
    assert_cubes_identical(ref, out, ["approx", "pure"])


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_processes_backend_is_bit_identical_to_inline(tiny_suite_file: Path, tmp_path: Path,
                                                      workers: int) -> None:
    """A backend is one module behind a small protocol: the plain-process pool computes the
    same cube as the inline backend, bit for bit."""
    suite = load_suite(tiny_suite_file)
    ref = tmp_path / "inline.zarr"
    assert run_suite(suite, ref, backend="inline", progress=False).backend == "inline (no dask)"
    out = tmp_path / f"p{workers}.zarr"
    summary = run_suite(suite, out, backend="processes", workers=workers, progress=False)
    assert summary.complete and summary.backend.startswith(f"processes ({workers} worker")
    assert_cubes_identical(ref, out, ["approx", "pure"])


def test_backend_options_are_checked_before_the_store_is_written(tiny_suite_file: Path,
                                                                tmp_path: Path) -> None:
    suite = load_suite(tiny_suite_file)
    store = tmp_path / "s.zarr"
    with pytest.raises(UserInputError, match="--backend must be one of dask, forked, processes, inline"):
        run_suite(suite, store, backend="ray", progress=False)
    with pytest.raises(UserInputError, match="--scheduler needs --backend dask"):
        run_suite(suite, store, backend="processes", scheduler="tcp://x:1", progress=False)
    assert not store.exists()


# --- failures ---------------------------------------------------------------------------------

class Flaky(Algorithm):
    """Test mechanism: fails for some seeds, returns NaN for others, may hang."""

    name = "test_flaky"
    privacy = "approx"
    requires = ("convex",)
    params = {"mode": Param("raise", kind="str", choices=("raise", "nan", "hang", "overrun", "ok"))}

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        u = rng.random()
        theta = problem.constraint.center(data.p)
        if self.mode == "raise" and u < 0.5:
            raise ValueError(f"planted failure u={u:.3f}")
        if self.mode == "nan" and u < 0.5:
            theta = theta + np.nan
        if self.mode == "hang":
            while True:
                time.sleep(0.01)
                checkpoint()
        if self.mode == "overrun":
            time.sleep(0.3)
        return Release(theta, PrivacyLedger.from_charges(), iterations=1)


@pytest.fixture
def flaky_registered() -> Any:
    registry.register("algorithms", Flaky)
    yield
    registry.available("algorithms", refresh=True)


FLAKY_SUITE = """
name: flaky
seeds: 6
cell_timeout_s: 0.2
experiments:
  - name: e
    problems: [{problem: lb_lin}]
    algorithms:
      - {label: raise, algorithm: test_flaky, params: {mode: raise}}
      - {label: nan, algorithm: test_flaky, params: {mode: nan}}
      - {label: hang, algorithm: test_flaky, params: {mode: hang}}
      - {label: overrun, algorithm: test_flaky, params: {mode: overrun}}
      - {label: ok, algorithm: test_flaky, params: {mode: ok}}
    grid: {n: [4], p: [2], epsilon: [1.0], delta: [1e-5]}
"""


def test_failing_cells_are_recorded_and_the_sweep_goes_on(flaky_registered: Any, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    suite = parse_suite(FLAKY_SUITE, "flaky.yaml")
    store = tmp_path / "f.zarr"
    summary = run_suite(suite, store, workers=0, progress=False)
    ds = open_cube(store, "e")
    st = ds.status.squeeze()
    err = ds.error.squeeze()
    raised = st.sel(algorithm="raise").values
    assert (raised == FAILED).any() and (raised == DONE).any()
    assert all("planted failure" in e for e in err.sel(algorithm="raise").values[raised == FAILED])
    nan = st.sel(algorithm="nan").values
    assert (nan == FAILED).any()
    assert all("not finite" in e for e in err.sel(algorithm="nan").values[nan == FAILED])
    assert np.all(st.sel(algorithm="hang").values == FAILED)
    assert all("time limit" in e for e in err.sel(algorithm="hang").values)
    assert np.all(st.sel(algorithm="overrun").values == FAILED)
    assert np.all(st.sel(algorithm="ok").values == DONE)
    assert summary.failed == int((ds.status.values == FAILED).sum())
    # failures are visible in `dpbench status`
    assert main(["status", str(store), "--failures", "3"]) == 0
    out = capsys.readouterr().out
    assert "failed [e]" in out
    # a resume retries failed cells only: done cells keep their bytes
    before = open_cube(store, "e")
    run_suite(suite, store, workers=0, progress=False)
    after = open_cube(store, "e")
    done = before.status.values == DONE
    assert np.array_equal(before.excess_risk.values[done], after.excess_risk.values[done])
    assert np.array_equal(before.wall_time_s.values[done], after.wall_time_s.values[done])
    assert np.array_equal(before.status.values, after.status.values)


def test_resume_computes_only_pending_and_refuses_changed_suite(tiny_suite_file: Path,
                                                                 tmp_path: Path) -> None:
    suite = load_suite(tiny_suite_file)
    store = tmp_path / "r.zarr"
    ref = tmp_path / "ref.zarr"
    run_suite(suite, ref, workers=0, progress=False)
    # simulate a crash: run, then reset some chunks' status to pending (as if never committed)
    run_suite(suite, store, workers=0, progress=False)
    s = Store.open(store, mode="r+")
    st = s.root["approx"]["status"]
    st[1, 0, 2, ...] = np.zeros(st.shape[3:], dtype=np.uint8)
    st[2, 1, 0, ...] = np.zeros(st.shape[3:], dtype=np.uint8)
    s.root["approx"]["excess_risk"][1, 0, 2, ...] = np.full(st.shape[3:], 123.0)
    summary = run_suite(suite, store, workers=0, progress=False)
    assert summary.computed == 2 * suite.experiments[0].seeds
    assert_cubes_identical(ref, store, ["approx", "pure"])
    # nothing pending: a re-run computes nothing
    assert run_suite(suite, store, workers=0, progress=False).computed == 0
    # fewer seeds would drop computed cells: refused (additions grow in place: test_growth.py)
    changed = parse_suite(tiny_suite_file.read_text().replace("seeds: 4", "seeds: 3"), "changed.yaml")
    with pytest.raises(StoreError, match="seeds decreased from 4 to 3.*--restart"):
        run_suite(changed, store, workers=0, progress=False)
    cosmetic = parse_suite(tiny_suite_file.read_text().replace("name: tiny", "name: tiny\ndescription: x"))
    assert run_suite(cosmetic, store, workers=0, progress=False).computed == 0
    summary = run_suite(changed, store, workers=0, progress=False, restart=True)
    assert summary.complete and open_cube(store, "approx").sizes["seed"] == 3


IDLE_SUITE = """
name: idle
seeds: 1
experiments:
  - name: e
    problems: [{problem: lb_quad}]
    algorithms:
      - {label: fast, algorithm: fault_injector}
      - {label: slow, algorithm: fault_injector, params: {delay_s: 3.0}}
    grid: {n: [8], p: [2], epsilon: [1.0]}
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["dask", "processes"])
def test_a_result_is_written_while_other_tasks_still_compute(tmp_path: Path,
                                                             backend: str) -> None:
    # dask through the local profile: the embedded default would compute both cells in this
    # process, one after the other, while its cluster starts.
    """The client writes received results together, but never keeps one unwritten while it
    waits (backends yield IDLE before waiting): the fast task's cell is in the store about 3 s
    before the slow one's, computed at the same time on the other worker. Written only at the
    end (or at the next result), the two would land together; the 1.5 s margin is half the
    slow cell's sleep."""
    from tests.support import failures as tf

    tf.register()
    written: dict[str, float] = {}

    def on_result(res: Any) -> None:
        label = ("fast", "slow")[res.chunks[0].index[0]]
        written[label] = time.perf_counter()
        assert Store.open(tmp_path / "s.zarr").status("e")[res.chunks[0].index][0] == DONE

    profile = Path(__file__).resolve().parents[2] / "cluster" / "local.yaml"
    summary = run_suite(parse_suite(IDLE_SUITE), tmp_path / "s.zarr", workers=2, backend=backend,
                        profile=profile if backend == "dask" else None, progress=False,
                        on_result=on_result)
    assert summary.computed == 2
    assert written["slow"] - written["fast"] >= 1.5, written


@pytest.mark.slow
def test_without_fork_the_local_cluster_starts_at_once(
        tiny_suite_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where fork is unsafe (macOS) or missing (Windows) the embedded default starts its
    LocalCluster at once and computes tasks in this process until it is up; the cube is the
    inline one, bit for bit."""
    from dpbench.engine.backends import dask as dask_backend

    monkeypatch.setattr(dask_backend, "fork_available", lambda: False)
    suite = load_suite(tiny_suite_file)
    ref = tmp_path / "ref.zarr"
    run_suite(suite, ref, workers=0, progress=False)
    summary = run_suite(suite, tmp_path / "s.zarr", workers=2, progress=False)
    assert summary.backend.startswith("LocalCluster (2 worker processes x 1 thread)") or \
        summary.backend.startswith("this process (embedded default; the run ended while"), \
        summary.backend
    assert summary.complete
    assert_cubes_identical(ref, tmp_path / "s.zarr", ["approx", "pure"])


HANDOVER_SUITE = """
name: handover
seeds: 1
experiments:
  - name: e
    problems: [{problem: lb_quad}]
    algorithms: [{algorithm: fault_injector, params: {delay_s: 0.1}}]
    grid: {n: [8], p: [2], epsilon: [%s]}
""" % ", ".join(str(0.1 * (i + 1)) for i in range(60))


@pytest.mark.slow
def test_forked_workers_compute_while_the_local_cluster_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the embedded default decides its LocalCluster is worth starting (here at once), it
    starts it in a thread and its forked workers go on computing meanwhile; then the cluster
    takes the rest. The cube is the forked backend's, bit for bit (itself the inline one's). The
    start waits here until the first result is written, so that both parts certainly compute
    (60 cells of 0.1 s, one per task: about 3 s on 2 workers)."""
    import tests.support.failures as tf
    from dpbench.engine.backends import dask as dask_backend

    tf.register()
    start = dask_backend._local_cluster
    written = threading.Event()

    def late_start(workers: int) -> Any:
        assert written.wait(60)
        return start(workers)

    monkeypatch.setattr(dask_backend, "_local_cluster", late_start)
    monkeypatch.setattr(dask_backend, "CLUSTER_WORTH_S", 0.0)
    suite = parse_suite(HANDOVER_SUITE)
    ref = tmp_path / "ref.zarr"
    run_suite(suite, ref, backend="forked", workers=2, progress=False)
    summary = run_suite(suite, tmp_path / "s.zarr", workers=2, progress=False,
                        on_result=lambda res: written.set())
    assert "computed by 2 forked worker processes before it was up" in summary.backend, \
        summary.backend
    here = int(summary.backend.split("; ")[1].split()[0])
    assert 0 < here < 60, summary.backend  # one task per cell: the cluster computed the rest
    assert summary.complete
    assert_cubes_identical(ref, tmp_path / "s.zarr", ["e"])
    runs = Store.open(tmp_path / "s.zarr").root.attrs[ROOT_KEY]["runs"]
    assert "before it was up" in runs[-1]["backend"]


def test_the_run_log_counts_tasks_and_worker_seconds_per_host(tmp_path: Path) -> None:
    """``runs[-1].hosts``: every computed task once, under the hostname of the worker that
    computed it (docs/clusters.md, 'Multi-node')."""
    import socket

    from tests.support.cubes import TINY_SUITE

    results: list[Any] = []
    summary = run_suite(parse_suite(TINY_SUITE), tmp_path / "h.zarr", backend="forked",
                        workers=2, progress=False, on_result=results.append)
    run = Store.open(tmp_path / "h.zarr").root.attrs[ROOT_KEY]["runs"][-1]
    assert list(run["hosts"]) == [socket.gethostname()]
    row = run["hosts"][socket.gethostname()]
    assert row["tasks"] == len(results) > 1
    assert row["worker_s"] == pytest.approx(sum(r.seconds for r in results), abs=0.01)
    assert 0 < row["worker_s"] <= summary.seconds * 2 + 1
