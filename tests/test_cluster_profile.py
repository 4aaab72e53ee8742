"""Cluster profiles: the shipped local profile runs a suite (same cube as inline); bad profiles are
clear errors with exit code 2 and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import assert_cubes_identical
from dpbench.cli import main
from dpbench.cluster import load_profile
from dpbench.errors import UserInputError
from dpbench.runner import run_suite
from dpbench.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_local_profile_is_valid() -> None:
    prof = load_profile(ROOT / "cluster" / "local.yaml")
    assert (prof.module, prof.cls) == ("distributed", "LocalCluster")
    assert prof.dask_config == {"distributed.scheduler.allowed-failures": 5}


@pytest.mark.slow
def test_run_through_the_local_profile(tiny_suite_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "p.zarr"
    assert main(["run", str(tiny_suite_file), "--store", str(store), "--quiet",
                 "--cluster", str(ROOT / "cluster" / "local.yaml")]) == 0
    ref = tmp_path / "ref.zarr"
    run_suite(load_suite(tiny_suite_file), ref, workers=0, progress=False)
    assert_cubes_identical(ref, store, ["approx", "pure"])


@pytest.mark.parametrize("text,fragment", [
    ("cluster: {module: distributed, clas: LocalCluster}", "cluster.clas: unknown field"),
    ("clusters: {}", "a profile is a mapping with a 'cluster' field"),
    ("cluster: {module: no_such_module_xyz, class: X}", "cannot load no_such_module_xyz.X"),
    ("cluster: [1, 2]", "cluster: must be a mapping"),
    ("cluster: {module: distributed, class: LocalCluster}\nscale: 3", "scale: must be a mapping"),
])
def test_bad_profiles(tmp_path: Path, tiny_suite_file: Path, text: str, fragment: str,
                      capsys: pytest.CaptureFixture[str]) -> None:
    prof = tmp_path / "bad.yaml"
    prof.write_text(text)
    store = tmp_path / "s.zarr"
    code = main(["run", str(tiny_suite_file), "--store", str(store), "--cluster", str(prof), "--quiet"])
    assert code == 2
    assert fragment in capsys.readouterr().err
    assert not store.exists()
    if "no_such_module" not in text:
        with pytest.raises(UserInputError):
            load_profile(prof)
