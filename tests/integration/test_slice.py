"""``--only``: one slice of a suite or store (issue 18). Deterministic cells: exact checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpbench.cli.main import main
from dpbench.config.slice import Slice, SliceError
from dpbench.config.suite import parse_suite
from dpbench.core.schema import DONE, PENDING
from dpbench.engine.runner import run_suite
from tests.support.cubes import TINY_SUITE, assert_datasets_identical, open_cube


def test_parse_unions_within_a_key_and_refuses_bad_items() -> None:
    s = Slice.parse(["algorithm=a,b", "algorithm=c", "experiment=e"])
    assert s.algorithm == {"a", "b", "c"} and s.experiment == {"e"} and s.problem is None
    assert not Slice.parse(None) and Slice.parse(None).describe() == "everything"
    for bad in ("algorithm", "seed=1", "problem=", "algorithm=a,,b"):
        with pytest.raises(SliceError, match="--only"):
            Slice.parse([bad])


def test_a_run_of_a_slice_computes_only_that_slice_and_resumes_to_the_whole(
        tmp_path: Path) -> None:
    suite = parse_suite(TINY_SUITE)
    store = tmp_path / "s.zarr"
    part = run_suite(suite, store, workers=0, progress=False,
                     only=Slice.parse(["algorithm=noisy_sgd", "problem=lb_quad"]))
    assert set(part.counts) == {"approx"} and part.complete
    st = open_cube(store, "approx")["status"]
    chosen = st.sel(algorithm=["sgd", "sgd_sc"], problem="lb_quad")
    assert (chosen == DONE).all() and part.computed == chosen.size
    assert int((st == DONE).sum()) == chosen.size
    assert (open_cube(store, "pure")["status"] == PENDING).all()
    rest = run_suite(suite, store, workers=0, progress=False)
    assert rest.complete and rest.computed > 0
    run_suite(suite, tmp_path / "ref.zarr", workers=0, progress=False)
    for e in ("approx", "pure"):
        assert_datasets_identical(open_cube(store, e), open_cube(tmp_path / "ref.zarr", e),
                                  ("wall_time_s",), e)


def test_an_unknown_value_is_bad_input_before_the_store(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "t.yaml").write_text(TINY_SUITE)
    store = tmp_path / "s.zarr"
    for only in ("algorithm=noisy_sdg", "experiment=apprx", "problem=logistic,lb_lin,nope"):
        assert main(["run", str(tmp_path / "t.yaml"), "--store", str(store), "--workers", "0",
                     "--quiet", "--only", only]) == 2
        err = capsys.readouterr().err
        assert "--only" in err and "no such" in err and "Traceback" not in err
    assert not store.exists()
    # an experiment filter narrows what the other keys may name
    assert main(["run", str(tmp_path / "t.yaml"), "--store", str(store), "--workers", "0",
                 "--quiet", "--only", "experiment=pure", "--only", "algorithm=sgd"]) == 2
    assert not store.exists()


def test_status_of_a_slice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "t.yaml").write_text(TINY_SUITE)
    store = str(tmp_path / "s.zarr")
    assert main(["run", str(tmp_path / "t.yaml"), "--store", store, "--workers", "0", "--quiet",
                 "--only", "experiment=pure"]) == 0
    capsys.readouterr()
    assert main(["status", store, "--only", "experiment=pure", "--only", "problem=logistic"]) == 0
    out = capsys.readouterr().out
    assert "outpert" in out and "approx" not in out and "problem=logistic" in out
    # 1 algorithm x 1 problem x 2 n x 2 p x 2 eps x 4 seeds = 32 cells, all done
    row = next(line for line in out.splitlines() if "outpert" in line)
    assert [c for c in row.replace("│", " ").split() if c.isdigit()][:2] == ["32", "32"]
    assert main(["status", store, "--only", "experiment=nope"]) == 2


def test_masks_follow_labels_and_names() -> None:
    suite = parse_suite(TINY_SUITE)
    from dpbench.config.slice import suite_masks

    masks = suite_masks(Slice.parse(["algorithm=sgd_sc,nonprivate"]), suite)
    assert masks["approx"][[0, 2]].all() and not masks["approx"][1].any()
    assert not masks["pure"].any()
    masks = suite_masks(Slice.parse(["algorithm=output_perturbation"]), suite)
    assert masks["pure"].all() and not np.any(masks["approx"])


def test_export_of_a_slice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import pandas as pd

    (tmp_path / "t.yaml").write_text(TINY_SUITE)
    store = str(tmp_path / "s.zarr")
    assert main(["run", str(tmp_path / "t.yaml"), "--store", store, "--workers", "0", "--quiet",
                 "--only", "experiment=approx"]) == 0
    out = tmp_path / "x.csv"
    assert main(["export", store, "--output", str(out), "--only", "algorithm=noisy_sgd",
                 "--only", "problem=lb_quad"]) == 0
    table = pd.read_csv(out)
    assert set(table["experiment"]) == {"approx"} and set(table["problem"]) == {"lb_quad"}
    assert set(table["algorithm"]) == {"sgd", "sgd_sc"} and len(table) == 2 * 3 * 4
    assert (table["status_name"] == "done").all()
    assert main(["export", store, "--output", str(tmp_path / "y.csv"), "--only",
                 "problem=nope"]) == 2
    assert not (tmp_path / "y.csv").exists()


EXPECT_SUITE = """
name: sliced
root_seed: 3
seeds: 6
experiments:
  - name: e
    problems: [{problem: lb_quad}]
    algorithms:
      - {label: outpert, algorithm: output_perturbation}
      - {label: nonprivate, algorithm: nonprivate_erm}
    grid: {n: [50, 100, 200, 400], p: [2], epsilon: [1.0]}
    expect:
      - {id: R9s, algorithm: outpert, problem: lb_quad, axis: n, slope: -2}
  - name: other
    problems: [{problem: lb_lin}]
    algorithms: [{label: expm, algorithm: exp_mech}]
    grid: {n: [50, 100], p: [2], epsilon: [1.0]}
"""


def test_report_and_check_of_a_slice(tmp_path: Path, capsys: pytest.CaptureFixture,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(EXPECT_SUITE)
    store = str(tmp_path / "s.zarr")
    assert main(["run", "s.yaml", "--store", store, "--workers", "0", "--quiet",
                 "--only", "experiment=e"]) == 0
    capsys.readouterr()
    # the whole store is incomplete (experiment "other" pending); the slice is complete
    assert main(["check", store]) == 2
    assert "is incomplete (other: " in capsys.readouterr().err
    main(["check", store, "--only", "experiment=e"])
    out = capsys.readouterr().out
    assert "R9s" in out and "1 expected rate:" in out
    assert main(["check", store, "--only", "algorithm=nonprivate"]) == 0
    assert "no expected rate (expect:) is about the slice algorithm=nonprivate" in \
        capsys.readouterr().out
    assert main(["report", store, "--only", "experiment=e", "--only",
                 "algorithm=outpert"]) == 0
    md = (tmp_path / "reports" / "sliced.only-experiment_e_algorithm_outpert.md").read_text()
    assert "A slice of the store" in md and "R9s" in md and "nonprivate" not in md
    assert not (tmp_path / "reports" / "sliced.html").exists()  # the whole report is not replaced
