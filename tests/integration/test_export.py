"""``dpbench export`` and ``ds.dpbench.to_dataframe()``: the tidy table holds exactly the cube.

One small store (module fixture, inline backend, about a second) has three experiments with
different grid axes and every status: ``sweep`` (done, failed and not-applicable cells), ``radius``
(an extra grid axis) and ``later`` (added to the store but never run: all pending). Each export is
re-indexed by its coordinates and compared with the cube value by value: floats bit-identical
(CSV through its text), NaN where the cube has NaN, strings and status codes equal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import dpbench.analysis  # noqa: F401  (registers ds.dpbench)
from dpbench import Algorithm, PrivacyLedger, Release
from dpbench.cli.main import main
from dpbench.config.suite import parse_suite
from dpbench.core import registry
from dpbench.core.schema import (
    DONE,
    FAILED,
    FLOAT_VARS,
    NOT_APPLICABLE,
    PENDING,
    STATUS_NAMES,
    VARIABLE_NAMES,
)
from dpbench.engine.runner import run_suite
from dpbench.config.records import suite_record
from dpbench.store.cube import Store
from tests.support.cubes import open_cube


class FailsBelowOne(Algorithm):
    """Test mechanism: releases the centre of C, and fails (a planted error) when ε < 1, so that
    the store has failed cells next to done ones."""

    name = "test_export_fails"
    privacy = "pure"
    requires = ("convex",)

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        if epsilon < 1:
            raise ValueError(f"planted failure at epsilon={epsilon:g}, with a comma")
        return Release(problem.constraint.center(data.p), PrivacyLedger.from_charges(),
                       iterations=1)


RUN = """
name: export
root_seed: 5
seeds: 2
experiments:
  - name: sweep
    problems: [{problem: lb_quad}, {problem: hinge_svm}]
    algorithms:
      - {label: outpert, algorithm: output_perturbation}
      - {label: fails, algorithm: test_export_fails}
    grid: {n: [6, 12], p: [2], epsilon: [0.5, 2.0]}
  - name: radius
    problems: [{problem: lb_quad}]
    algorithms: [{label: outpert, algorithm: output_perturbation}]
    grid: {n: [8], p: [2], epsilon: [1.0], radius: [1.0, 2.0]}
"""
LATER = """
  - name: later
    problems: [{problem: lb_lin}]
    algorithms: [{label: reference, algorithm: nonprivate_erm}]
    grid: {n: [5], p: [3], epsilon: [1.0]}
"""
EXPERIMENTS = ["later", "radius", "sweep"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The store: ``sweep`` and ``radius`` run inline, then ``later`` added (all pending)."""
    registry.register("algorithms", FailsBelowOne)
    try:
        path = tmp_path_factory.mktemp("export") / "results.zarr"
        run_suite(parse_suite(RUN, "export.yaml"), path, workers=0, progress=False)
        Store.prepare(Path(path), suite_record(parse_suite(RUN + LATER, "export.yaml")))
        yield path
    finally:
        registry.available("algorithms", refresh=True)


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and modification time."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def assert_table_is_cube(table: pd.DataFrame, store: Path, exact_text: bool = False) -> None:
    """Every experiment's rows of ``table``, re-indexed by the cube's coordinates, equal the cube:
    floats bit-identical (NaN where NaN), status codes and names, error texts, one row per cell.
    ``exact_text``: the table was read from CSV (missing error texts come back as NaN)."""
    assert sorted(table["experiment"].unique()) == EXPERIMENTS
    for name in EXPERIMENTS:
        cube = open_cube(store, name)
        dims = list(cube.status.dims)
        rows = table[table["experiment"] == name]
        assert len(rows) == cube.status.size
        # the columns no cube of another experiment has are empty here
        others = [c for c in table.columns if c not in (*dims, *VARIABLE_NAMES, "experiment",
                                                        "status_name")]
        assert rows[others].isna().all().all(), others
        # the rows follow the cube's order, so reshaping is re-indexing; check it is
        indexed = rows.set_index(dims)
        for axis, dim in enumerate(dims):
            level = indexed.index.get_level_values(dim).to_numpy()
            expected = np.broadcast_to(
                cube[dim].values.reshape([-1 if i == axis else 1 for i in range(len(dims))]),
                cube.status.shape).ravel()
            if expected.dtype.kind in "TUO":
                assert list(map(str, level)) == list(map(str, expected)), dim
            else:
                assert np.array_equal(level.astype(expected.dtype), expected), dim
        for var in FLOAT_VARS:
            got = indexed[var].to_numpy(dtype=np.float64).reshape(cube.status.shape)
            want = cube[var].values
            assert np.array_equal(np.isnan(got), np.isnan(want)), f"{name}/{var}: NaN positions"
            assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), f"{name}/{var}"
        status = indexed["status"].to_numpy().reshape(cube.status.shape)
        assert np.array_equal(status, cube.status.values), f"{name}/status"
        names = indexed["status_name"].to_numpy().reshape(cube.status.shape)
        assert np.array_equal(names, np.vectorize(STATUS_NAMES.get)(cube.status.values))
        error = indexed["error"]
        if exact_text:
            error = error.fillna("")
        assert list(error) == [str(e) for e in cube.error.values.ravel()], f"{name}/error"


def test_the_store_has_every_status(store: Path) -> None:
    st = {name: open_cube(store, name).status.values for name in EXPERIMENTS}
    assert {DONE, FAILED, NOT_APPLICABLE} <= set(np.unique(st["sweep"]))
    assert np.all(st["later"] == PENDING) and np.all(st["radius"] == DONE)


def test_csv_export_equals_the_cube(store: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "table.csv"
    assert main(["export", str(store), "--format", "csv", "--output", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    # only an empty field is missing (a problem label "NA" would stay a string)
    table = pd.read_csv(out, keep_default_na=False, na_values=[""])
    # the values are the float texts read with Python's float() (correctly rounded, whatever
    # the pandas version's own parser does): they must give back the cube's bits
    text = pd.read_csv(out, dtype=str, keep_default_na=False)
    for var in FLOAT_VARS:
        table[var] = np.array([float(x) if x else np.nan for x in text[var]])
    assert list(table.columns) == ["experiment", "algorithm", "problem", "n", "p", "epsilon",
                                   "delta", "radius", "seed", *VARIABLE_NAMES[:-2], "status",
                                   "status_name", "error"]
    assert_table_is_cube(table, store, exact_text=True)
    assert not list(tmp_path.glob(".*partial"))


def test_parquet_export_equals_the_cube_and_keeps_the_dtypes(store: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(store), "--format", "parquet"]) == 0
    out = tmp_path / "results.parquet"  # the default: the store's name without .zarr
    table = pd.read_parquet(out)
    assert_table_is_cube(table, store)
    assert table["status"].dtype == np.uint8
    assert table["n"].dtype == np.int64 and table["epsilon"].dtype == np.float64
    assert str(table["radius"].dtype) == "float64"  # missing in two experiments: NaN there
    # the format follows --output's suffix when --format is not given
    assert main(["export", str(store), "--output", "again.parquet"]) == 0
    assert pd.read_parquet(tmp_path / "again.parquet").equals(table)


def test_accessor_to_dataframe(store: Path) -> None:
    ds = xr.open_zarr(str(store), group="radius", consolidated=False)
    frame = ds.dpbench.to_dataframe()
    assert list(frame.columns) == ["experiment", *ds.status.dims, *VARIABLE_NAMES[:-1],
                                   "status_name", "error"]
    assert len(frame) == ds.status.size and set(frame["experiment"]) == {"radius"}
    assert np.array_equal(frame["excess_risk"].to_numpy(), ds.excess_risk.values.ravel())
    assert sorted(frame["radius"].unique()) == [1.0, 2.0]
    # a selection keeps its scalar coordinate as a column, and the name can be given
    sub = ds.sel(radius=2.0).dpbench.to_dataframe(experiment="r2")
    assert set(sub["radius"]) == {2.0} and set(sub["experiment"]) == {"r2"}
    assert len(sub) == ds.status.size // 2


def test_integer_axes_missing_in_some_experiments_stay_integers() -> None:
    from dpbench.analysis.export import _stack

    a = pd.DataFrame({"experiment": ["a"], "algorithm": ["x"], "k": np.array([3]),
                      "seed": [0], "status": np.array([1], np.uint8)})
    b = pd.DataFrame({"experiment": ["b"], "algorithm": ["x"], "seed": [0],
                      "status": np.array([0], np.uint8)})
    both = _stack([b, a])
    assert list(both.columns) == ["experiment", "algorithm", "k", "seed", "status"]
    assert str(both["k"].dtype) == "Int64" and both["k"].isna().tolist() == [True, False]
    assert both["status"].dtype == np.uint8


def test_existing_output_is_refused_unless_overwrite(store: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine.csv"
    out.write_text("precious\n")
    before = _listing(tmp_path)
    assert main(["export", str(store), "--output", str(out)]) == 2
    assert "--output" in capsys.readouterr().err
    assert out.read_text() == "precious\n" and _listing(tmp_path) == before
    assert main(["export", str(store), "--output", str(out), "--overwrite"]) == 0
    assert out.read_text().startswith("experiment,algorithm,")


def test_a_path_that_is_not_a_store_writes_nothing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "data.txt").write_text("not a store")
    before = _listing(tmp_path)
    for path in ("plain", "absent.zarr"):
        for fmt in ("csv", "parquet"):
            assert main(["export", path, "--format", fmt]) == 2
            assert "store" in capsys.readouterr().err
    assert main(["export", "plain", "--output", "out/t.csv"]) == 2
    assert _listing(tmp_path) == before


def test_an_output_directory_that_cannot_be_written_is_refused(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check_writable runs before the store is read (here the "directory" is a file, which
    even root cannot write into)."""
    (tmp_path / "file").write_text("x")
    before = _listing(tmp_path)
    assert main(["export", str(store), "--output", str(tmp_path / "file" / "t.csv")]) == 2
    assert "--output" in capsys.readouterr().err
    assert _listing(tmp_path) == before


def test_parquet_without_pyarrow_names_the_extra(store: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    out = tmp_path / "t.parquet"
    assert main(["export", str(store), "--format", "parquet", "--output", str(out)]) == 2
    assert "dp-ratebench[parquet]" in capsys.readouterr().err
    assert not out.exists() and not any(tmp_path.iterdir())
