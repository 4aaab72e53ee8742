"""Small suites and cube comparisons shared by the engine, store and report tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from dpbench.audit.store import NONDETERMINISTIC_AUDIT_VARS, open_audit
from dpbench.core.schema import NONDETERMINISTIC_VARS

TINY_SUITE = """
name: tiny
root_seed: 7
seeds: 4
experiments:
  - name: approx
    problems:
      - problem: lb_lin
      - problem: lb_quad
    algorithms:
      - label: nonprivate
        algorithm: nonprivate_erm
      - label: sgd
        algorithm: noisy_sgd
        params: {sigma_mode: accountant}
      - label: sgd_sc
        algorithm: noisy_sgd
        params: {variant: strongly_convex, sigma_mode: accountant}
    grid:
      n: [8, 16, 24]
      p: [3]
      epsilon: [1.0]
      delta: [1e-5]
  - name: pure
    problems:
      - problem: lb_quad
      - problem: logistic
        params: {ridge: 0.5}
      - problem: hinge_svm
    algorithms:
      - label: outpert
        algorithm: output_perturbation
    grid:
      n: [10, 20]
      p: [2, 3]
      epsilon: [1.0, 4.0]
"""


def open_cube(store: Path, group: str) -> xr.Dataset:
    return xr.open_zarr(str(store), group=group, consolidated=False).load()


def assert_datasets_identical(da: xr.Dataset, db: xr.Dataset, skip: tuple[str, ...],
                              where: str = "") -> None:
    """Every variable and coordinate but ``skip`` bit-identical (NaN == NaN)."""
    assert sorted(da.data_vars) == sorted(db.data_vars)
    for name in [*da.coords, *da.data_vars]:
        if name in skip:
            continue
        va, vb = da[name].values, db[name].values
        if va.dtype.kind == "f":
            assert np.array_equal(va.view(np.uint64), vb.view(np.uint64)), f"{where}{name} differs"
        else:
            assert np.array_equal(va, vb), f"{where}{name} differs"


def assert_cubes_identical(a: Path, b: Path, groups: list[str]) -> None:
    """Every deterministic variable and coordinate of the experiment groups bit-identical."""
    for g in groups:
        assert_datasets_identical(open_cube(a, g), open_cube(b, g), NONDETERMINISTIC_VARS, f"{g}/")


def _without_seconds(value: object) -> object:
    """A point's state record with its wall times (``seconds``) left out."""
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


def assert_audits_identical(a: Path, b: Path, names: list[str]) -> None:
    """Every deterministic variable and coordinate of the audit groups bit-identical, and every
    point's batches (pilot releases, confirmation counts, decisions, claims) too."""
    import zarr

    for name in names:
        assert_datasets_identical(open_audit(a, name).load(), open_audit(b, name).load(),
                                  NONDETERMINISTIC_AUDIT_VARS, f"audit {name}/")
        ga = zarr.open_group(str(a / "audit" / name / "points"), mode="r")
        gb = zarr.open_group(str(b / "audit" / name / "points"), mode="r")
        keys = sorted(k for k, _ in ga.groups())
        assert keys == sorted(k for k, _ in gb.groups()), f"audit {name}: other points"
        for key in keys:
            pa, pb = ga[key], gb[key]
            assert _without_seconds(dict(pa.attrs)) == _without_seconds(dict(pb.attrs)), (
                f"audit {name} point {key}: state differs")
            arrays = sorted(k for k, _ in pa.arrays())
            assert arrays == sorted(k for k, _ in pb.arrays()), f"audit {name} point {key}"
            for arr in arrays:
                assert np.array_equal(np.asarray(pa[arr][...]), np.asarray(pb[arr][...])), (
                    f"audit {name} point {key}: {arr} differs")
