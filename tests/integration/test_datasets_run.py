"""Dataset-backed problems through the command line and the engine (docs/datasets.md): a run on a
real data set, a refused bad data set (exit 2, nothing created), a refused resume after the
data file changed, a moved suite that resumes, and the same cube from worker processes."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from dpbench.cli.main import main
from dpbench.config.suite import load_suite
from dpbench.engine.runner import run_suite
from tests.support.cubes import assert_cubes_identical, open_cube

SUITE = """\
name: real_data
root_seed: 11
seeds: 2
experiments:
  - name: bc
    problems:
      - problem: real_logistic
        params: {{dataset: "{dataset}", ridge: 0.05{extra}}}
    algorithms:
      - algorithm: nonprivate_erm
      - algorithm: objective_perturbation
      - algorithm: output_perturbation
    grid: {{n: [40, 80], p: [{p}], epsilon: [1.0]}}
"""


def _csv(path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = np.where(X @ np.array([1.0, -1.0, 0.5]) + 0.5 * rng.normal(size=120) > 0, "pos", "neg")
    path.write_text("u,v,w,cls\n" + "".join(
        ",".join(f"{v:.5f}" for v in row) + f",{label}\n" for row, label in zip(X, y)))


def _run(suite: Path, store: Path) -> int:
    return main(["run", str(suite), "--store", str(store), "--workers", "0", "--quiet"])


def test_run_on_a_bundled_data_set(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.format(dataset="sklearn:breast_cancer", extra="", p=30))
    assert _run(suite, tmp_path / "s.zarr") == 0
    cube = open_cube(tmp_path / "s.zarr", "bc")
    pop = cube.population_excess_risk.values
    assert np.isfinite(pop).all() and (cube.status.values == 1).all()
    excess = cube.excess_risk.sel(algorithm="nonprivate_erm").values
    assert np.abs(excess).max() < 1e-8


def test_bad_data_is_refused_before_the_store(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.format(dataset="csv:missing.csv", extra="", p=3))
    assert _run(suite, tmp_path / "s.zarr") == 2
    err = capsys.readouterr().err
    assert "experiments[0].problems[real_logistic].params" in err and "cannot read" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_changed_file_refuses_the_resume_and_moved_suite_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "a"
    (home / "data").mkdir(parents=True)
    _csv(home / "data" / "d.csv")
    suite = home / "s.yaml"
    suite.write_text(SUITE.format(dataset="csv:data/d.csv", extra=", label_column: cls", p=3))
    assert _run(suite, home / "s.zarr") == 0
    moved = tmp_path / "b"
    shutil.move(str(home), str(moved))                    # suite, data and store together
    assert _run(moved / "s.yaml", moved / "s.zarr") == 0
    assert "0 cells computed" in capsys.readouterr().out
    text = (moved / "data" / "d.csv").read_text().splitlines()
    text[1] = "9" + text[1]
    (moved / "data" / "d.csv").write_text("\n".join(text) + "\n")
    assert _run(moved / "s.yaml", moved / "s.zarr") == 2
    assert "different definition" in capsys.readouterr().err


def test_calibration_never_follows_a_path_read_from_a_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dpbench plan --calibrate STORE` re-plans the suite the store records; the data-file
    paths in it are data from the store and are never opened (the store is skipped with a
    warning), while a store of a bundled data set is used."""
    from dpbench.datasets import source
    from dpbench.engine.estimate import calibration
    from dpbench.store.cube import Store

    _csv(tmp_path / "d.csv")
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE.format(dataset=f"csv:{tmp_path / 'd.csv'}",
                                  extra=", label_column: cls", p=3))
    assert _run(suite, tmp_path / "s.zarr") == 0

    def opened(*args: object) -> None:
        raise AssertionError(f"a path read from a store was opened: {args}")

    monkeypatch.setattr(source, "_file", opened)
    with pytest.warns(UserWarning, match="is not read: it is named by a suite read back from a store"):
        scales, used = calibration([Store.open(tmp_path / "s.zarr")])
    assert used == []
    pytest.importorskip("sklearn")
    bundled = tmp_path / "b.yaml"
    bundled.write_text(SUITE.format(dataset="sklearn:breast_cancer", extra="", p=30))
    assert _run(bundled, tmp_path / "b.zarr") == 0
    assert calibration([Store.open(tmp_path / "b.zarr")])[1] == [str(tmp_path / "b.zarr")]


@pytest.mark.slow
def test_worker_processes_compute_the_same_cube(tmp_path: Path) -> None:
    _csv(tmp_path / "d.csv")
    path = tmp_path / "s.yaml"
    path.write_text(SUITE.format(dataset="csv:d.csv", extra=", label_column: cls", p=3))
    suite = load_suite(path)
    ref, out = tmp_path / "inline.zarr", tmp_path / "p2.zarr"
    assert run_suite(suite, ref, backend="inline", progress=False).complete
    assert run_suite(suite, out, backend="processes", workers=2, progress=False).complete
    assert_cubes_identical(ref, out, ["bc"])
    assert math.isfinite(float(open_cube(out, "bc").population_excess_risk.mean()))
