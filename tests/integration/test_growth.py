"""A suite that only adds to its store's definition grows the store in place (issue 18).

Cells are deterministic and keyed by identity, so every check here is exact: the grown cube
equals a from-scratch run of the larger suite bit for bit (``wall_time_s`` aside, which is
measured), and the cells computed before the growth keep their stored bytes, ``wall_time_s``
included. Nothing here is statistical, so nothing can be flaky.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from dpbench.cli.main import main
from dpbench.config.suite import parse_suite
from dpbench.core.errors import StoreError
from dpbench.core.schema import DONE, NOT_APPLICABLE
from dpbench.engine.runner import run_suite
from dpbench.store import growth
from dpbench.config.records import suite_record
from dpbench.store.cube import Store
from tests.support.cubes import TINY_SUITE, assert_datasets_identical, open_cube

EXPERIMENTS = ["approx", "pure"]
#: The tiny suite with one more seed, one more n (in the middle of the axis), one more
#: algorithm and one more problem.
GROWN = (TINY_SUITE.replace("seeds: 4", "seeds: 5")
         .replace("n: [8, 16, 24]", "n: [8, 12, 16, 24]")
         .replace("      - label: outpert\n",
                  "      - label: nonpriv\n        algorithm: nonprivate_erm\n"
                  "      - label: outpert\n")
         .replace("      - problem: lb_lin\n", "      - problem: lb_lin\n"
                  "      - problem: lb_lin\n        label: lb_lin_wide\n"
                  "        params: {signal: 0.5}\n"))


def snapshot(path: Path) -> dict[str, str]:
    """Every file under ``path`` with the SHA-256 of its bytes."""
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file()}


def _new_cells(small: dict[str, xr.Dataset], ref: Path) -> int:
    """Applicable cells of the from-scratch cube at ``ref`` whose coordinates are not all in
    the ``small`` cubes (by value)."""
    out = 0
    for e, old in small.items():
        new = open_cube(ref, e)
        seen = np.ones(new["status"].shape, dtype=bool)
        for axis, dim in enumerate(new["status"].dims):
            inside = np.isin(new[dim].values, old[dim].values)
            shape = [1] * seen.ndim
            shape[axis] = -1
            seen &= inside.reshape(shape)
        out += int(np.sum(~seen & (new["status"].values != NOT_APPLICABLE)))
    return out


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("grow")
    small = run_suite(parse_suite(TINY_SUITE), d / "g.zarr", workers=0, progress=False)
    before = {e: open_cube(d / "g.zarr", e) for e in EXPERIMENTS}
    big = run_suite(parse_suite(GROWN), d / "g.zarr", workers=0, progress=False)
    ref = run_suite(parse_suite(GROWN), d / "ref.zarr", workers=0, progress=False)
    return {"dir": d, "small": small, "big": big, "ref": ref, "before": before}


def test_a_grown_store_computes_only_the_new_cells(grown: dict) -> None:
    assert grown["small"].complete and grown["big"].complete
    assert grown["big"].computed == _new_cells(grown["before"], grown["dir"] / "ref.zarr") > 0
    assert set(grown["big"].grown) == set(EXPERIMENTS)
    assert "seeds 4 -> 5" in grown["big"].grown["approx"]
    assert "'n' gained [12]" in grown["big"].grown["approx"]
    assert "'lb_lin_wide' added" in grown["big"].grown["approx"]
    assert "'nonpriv' added" in grown["big"].grown["pure"]
    runs = Store.open(grown["dir"] / "g.zarr").root.attrs["dpbench_store"]["runs"]
    assert [bool(r.get("grown")) for r in runs] == [False, True]


def test_the_grown_cube_equals_a_from_scratch_run(grown: dict) -> None:
    for e in EXPERIMENTS:
        assert_datasets_identical(open_cube(grown["dir"] / "g.zarr", e),
                                  open_cube(grown["dir"] / "ref.zarr", e), ("wall_time_s",), e)


def test_cells_done_before_keep_their_bytes(grown: dict) -> None:
    for e in EXPERIMENTS:
        old, new = grown["before"][e], open_cube(grown["dir"] / "g.zarr", e)
        kept = new.sel({d: old[d].values for d in old.dims})
        assert (old["status"] == DONE).any()
        for var in old.data_vars:  # wall_time_s too: these cells were not recomputed
            np.testing.assert_array_equal(kept[var].values, old[var].values, err_msg=var)
        assert np.isin(new["status"].values, [DONE, NOT_APPLICABLE]).all()


@pytest.mark.slow
def test_a_grown_store_reports_like_a_fresh_one(grown: dict, tmp_path: Path) -> None:
    for store in ("g.zarr", "ref.zarr"):
        out = tmp_path / f"{store}.html"
        assert main(["report", str(grown["dir"] / store), "--output", str(out)]) == 0
    md = [(tmp_path / f"{s}.md").read_text() for s in ("g.zarr", "ref.zarr")]
    assert md[0].count("lb_lin_wide") == md[1].count("lb_lin_wide") > 0


CHANGES = {
    "fewer-seeds": (TINY_SUITE.replace("seeds: 4", "seeds: 3"), "seeds decreased from 4 to 3"),
    "grid-value-removed": (TINY_SUITE.replace("n: [8, 16, 24]", "n: [8, 16]"),
                           "grid axis 'n' lost value(s) [24]"),
    "grid-value-changed": (TINY_SUITE.replace("n: [8, 16, 24]", "n: [8, 16, 25]"),
                           "grid axis 'n' lost value(s) [24]"),
    "param-changed": (TINY_SUITE.replace("params: {ridge: 0.5}", "params: {ridge: 0.25}"),
                      "problem 'logistic': params changed"),
    "algorithm-removed": (TINY_SUITE.replace("      - label: nonprivate\n        algorithm: "
                                             "nonprivate_erm\n", ""),
                          "algorithm 'nonprivate' was removed"),
    "root-seed": (TINY_SUITE.replace("root_seed: 7", "root_seed: 8"), "root_seed changed"),
    "axis-added": (TINY_SUITE.replace("      delta: [1e-5]\n", "      delta: [1e-5]\n"
                                      "      radius: [1.0]\n"), "grid axes changed"),
    "experiment-removed": (TINY_SUITE[: TINY_SUITE.index("  - name: pure")],
                           "'pure' are in the store but no longer in the suite"),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_change_to_stored_cells_is_refused_naming_the_field(case: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    text, message = CHANGES[case]
    (tmp_path / "a.yaml").write_text(TINY_SUITE)
    (tmp_path / "b.yaml").write_text(text)
    store = tmp_path / "s.zarr"
    assert main(["run", str(tmp_path / "a.yaml"), "--store", str(store), "--workers", "0",
                 "--quiet"]) == 0
    before = snapshot(store)
    capsys.readouterr()
    assert main(["run", str(tmp_path / "b.yaml"), "--store", str(store), "--workers", "0",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "--restart" in err, err
    assert snapshot(store) == before
    assert not growth.staging_dir(store).exists()


@pytest.mark.slow
def test_a_crash_between_the_renames_is_recovered(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the old group moved aside and before the grown one moved in: the next
    command puts the old group back and grows again, to the same cube."""
    store = tmp_path / "s.zarr"
    run_suite(parse_suite(TINY_SUITE), store, workers=0, progress=False)
    before = snapshot(store / "pure")
    real, calls = os.rename, []

    def crash_on_second(src: object, dst: object) -> None:
        calls.append((src, dst))
        if len(calls) == 2:
            raise KeyboardInterrupt  # stands for a SIGKILL: nothing after it runs
        real(src, dst)

    monkeypatch.setattr(growth.os, "rename", crash_on_second)
    monkeypatch.setattr(growth, "recover", lambda store: None)  # the crash skips clean-up
    with pytest.raises(KeyboardInterrupt):
        Store.prepare(Path(store), suite_record(parse_suite(GROWN)))
    monkeypatch.undo()
    assert not (store / "approx").exists() and growth.staging_dir(store).exists()
    # readers of the half-swapped store see the other experiment only, never a broken one
    assert Store.open(store).experiments() == ["pure"]
    grown = run_suite(parse_suite(GROWN), store, workers=0, progress=False)
    assert grown.complete and not growth.staging_dir(store).exists()
    assert snapshot(store / "pure") != before  # grown too
    ref = run_suite(parse_suite(GROWN), tmp_path / "ref.zarr", workers=0, progress=False)
    assert ref.complete
    for e in EXPERIMENTS:
        assert_datasets_identical(open_cube(store, e), open_cube(tmp_path / "ref.zarr", e),
                                  ("wall_time_s",), e)


def test_a_failed_copy_leaves_the_store_as_it_was(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "s.zarr"
    run_suite(parse_suite(TINY_SUITE), store, workers=0, progress=False)
    before = snapshot(store)

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(growth.np, "transpose", no_space)
    with pytest.raises(OSError):
        Store.prepare(Path(store), suite_record(parse_suite(GROWN)))
    assert snapshot(store) == before and not growth.staging_dir(store).exists()


def test_restart_of_an_unchanged_store_says_so(tmp_path: Path,
                                               capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.yaml").write_text(TINY_SUITE)
    argv = ["run", str(tmp_path / "a.yaml"), "--store", str(tmp_path / "s.zarr"), "--workers",
            "0", "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    # on a terminal it asks; "no" keeps the store and exits 2
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    before = snapshot(tmp_path / "s.zarr")
    assert main([*argv, "--restart"]) == 2
    assert "nothing discarded" in capsys.readouterr().err
    assert snapshot(tmp_path / "s.zarr") == before
    # in a script it says what it discards, and does it
    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    assert main([*argv, "--restart"]) == 0
    assert "holds this suite unchanged" in capsys.readouterr().err


def test_restart_of_a_changed_store_does_not_ask(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.yaml").write_text(TINY_SUITE)
    (tmp_path / "b.yaml").write_text(CHANGES["fewer-seeds"][0])
    store = str(tmp_path / "s.zarr")
    assert main(["run", str(tmp_path / "a.yaml"), "--store", store, "--workers", "0",
                 "--quiet"]) == 0

    def no_question(prompt: str) -> str:
        raise AssertionError("asked")

    monkeypatch.setattr("builtins.input", no_question)
    assert main(["run", str(tmp_path / "b.yaml"), "--store", store, "--workers", "0", "--quiet",
                 "--restart"]) == 0


def test_prepare_refuses_before_writing_even_when_another_experiment_grows(tmp_path: Path) -> None:
    """One experiment grows, another changes: the whole prepare is refused and nothing grows."""
    store = tmp_path / "s.zarr"
    run_suite(parse_suite(TINY_SUITE), store, workers=0, progress=False)
    before = snapshot(store)
    mixed = GROWN.replace("params: {ridge: 0.5}", "params: {ridge: 0.25}")
    with pytest.raises(StoreError, match="problem 'logistic': params changed"):
        Store.prepare(Path(store), suite_record(parse_suite(mixed)))
    assert snapshot(store) == before


@pytest.mark.slow
def test_the_quickstart_grows_by_a_seed_an_n_and_an_algorithm(tmp_path: Path) -> None:
    """The issue's acceptance case on the shipped quickstart (the embedded default backend):
    one more seed, one more n and one more algorithm resume the quickstart's store, compute
    exactly the new cells, and give the cube of a from-scratch run of the larger suite."""
    text = (Path(__file__).parents[2] / "suites" / "quickstart.yaml").read_text()
    grown_text = (text.replace("\nseeds: 60\n", "\nseeds: 61\n", 1)
                  .replace("n: [160, 320, 640, 1280, 2560, 5120]",
                           "n: [160, 320, 640, 1280, 2560, 5120, 10240]", 1)
                  .replace("      - label: output_perturbation\n        algorithm: "
                           "output_perturbation\n",
                           "      - label: output_perturbation\n        algorithm: "
                           "output_perturbation\n      - label: nonprivate\n"
                           "        algorithm: nonprivate_erm\n", 1))
    assert grown_text.count("nonprivate_erm") == text.count("nonprivate_erm") + 1
    small, big = parse_suite(text), parse_suite(grown_text)
    store, ref = tmp_path / "q.zarr", tmp_path / "ref.zarr"
    assert run_suite(small, store, workers=2, progress=False).complete
    before = {e.name: open_cube(store, e.name) for e in small.experiments}
    grown = run_suite(big, store, workers=2, progress=False)
    assert run_suite(big, ref, workers=2, progress=False).complete
    assert grown.complete and {"exp_mech", "output_perturbation"} <= set(grown.grown)
    assert "'nonprivate' added" in grown.grown["output_perturbation"]
    assert grown.computed == _new_cells(before, ref)
    for e in big.experiments:
        assert_datasets_identical(open_cube(store, e.name), open_cube(ref, e.name),
                                  ("wall_time_s",), e.name)
