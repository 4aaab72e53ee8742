"""The cube schema owns the variables and status codes; stores of another schema are refused
before anything is computed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import zarr

from dpbench.cli.main import main
from dpbench.config.suite import load_suite
from dpbench.core import schema
from dpbench.core.errors import StoreError
from dpbench.engine.runner import run_suite
from dpbench.store.cube import EXP_KEY, ROOT_KEY, Store

README = Path(__file__).resolve().parents[2] / "README.md"

SUITE = """
name: schema
root_seed: 3
seeds: 2
experiments:
  - name: approx
    problems: [lb_quad]
    algorithms: [nonprivate_erm]
    grid: {n: [8, 16], p: [2], epsilon: [1.0], delta: [1e-5]}
  - name: pure
    problems: [lb_quad]
    algorithms: [output_perturbation]
    grid: {n: [8, 16], p: [2], epsilon: [1.0]}
"""


@pytest.fixture(scope="module")
def _built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("schema")
    suite = root / "schema.yaml"
    suite.write_text(SUITE)
    store = root / "s.zarr"
    run_suite(load_suite(suite), store, workers=0, progress=False)
    return suite, store


@pytest.fixture
def built(_built: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A fresh copy of a small finished store and its suite."""
    suite, store = _built
    copy = tmp_path / "s.zarr"
    shutil.copytree(store, copy)
    return suite, copy


def test_readme_variable_table_is_the_schema() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- schema:begin -->\n(.*?)<!-- schema:end -->", text, re.S)
    assert block, "README lost its schema table markers"
    assert block.group(1).strip() == schema.markdown_table().strip()


def test_make_row_needs_every_variable_exactly_once() -> None:
    values = {name: 1.0 for name in schema.FLOAT_VARS}
    assert list(schema.make_row(**values)) == list(schema.FLOAT_VARS)
    with pytest.raises(TypeError, match="missing \\['delta_spent'\\]"):
        schema.make_row(**{k: v for k, v in values.items() if k != "delta_spent"})
    with pytest.raises(TypeError, match="unknown \\['bogus'\\]"):
        schema.make_row(**values, bogus=2.0)


def test_store_arrays_are_the_schema(built: tuple[Path, Path]) -> None:
    _, store = built
    group = zarr.open_group(str(store), mode="r")["pure"]
    dims = {"algorithm", "problem", "n", "p", "epsilon", "delta", "seed"}
    assert set(group.array_keys()) - dims == set(schema.VARIABLE_NAMES)
    assert group.attrs[EXP_KEY]["schema"] == schema.CUBE_SCHEMA_VERSION


def _statuses(store: Path) -> dict[str, bytes]:
    """Raw bytes of every status chunk: proof that nothing was computed or written."""
    return {str(p): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()
            and "status" in p.parts}


@pytest.mark.parametrize("where", ["root", "experiment"])
def test_other_schema_version_is_refused_before_compute(built: tuple[Path, Path], where: str,
                                                         capsys) -> None:
    suite_file, store = built
    root = zarr.open_group(str(store), mode="r+")
    if where == "root":
        meta = dict(root.attrs[ROOT_KEY])
        meta["schema"] = 0
        root.attrs[ROOT_KEY] = meta
    else:
        g = root["approx"]
        info = dict(g.attrs[EXP_KEY])
        info["schema"] = 0
        g.attrs[EXP_KEY] = info
        # and a pending cell, so that a resume would have work to do
        g["status"][0, 0, 0, 0, 0, 0, 0] = schema.PENDING
    before = _statuses(store)
    with pytest.raises(StoreError, match="schema version 0.*reads schema version 1"):
        Store.open(store)
    assert main(["run", str(suite_file), "--store", str(store), "--workers", "0",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "cube schema version 0" in err and "dpbench" in err
    assert _statuses(store) == before


def test_store_missing_a_variable_is_refused(built: tuple[Path, Path]) -> None:
    _, store = built
    root = zarr.open_group(str(store), mode="r+")
    del root["pure"]["grad_queries"]
    with pytest.raises(StoreError, match="lacks the cube variable\\(s\\) grad_queries"):
        Store.open(store)


def test_roles_give_each_reader_its_variables_in_cube_order() -> None:
    """The readers' lists are derived from the roles the variables declare, in cube order (the
    report's lists before the roles existed, plus the privacy variables it now reads)."""
    assert schema.REPORT_VARIABLES == (
        "excess_risk", "optimum_gap", "trivial_excess_risk", "oracle_excess_risk", "wall_time_s",
        "grad_queries", "func_queries", "epsilon_spent", "delta_spent", "status", "error")
    assert schema.DIFF_VARIABLES == ("excess_risk", "optimum_gap", "trivial_excess_risk",
                                     "oracle_excess_risk", "status")
    assert schema.COST_VARIABLES == ("wall_time_s", "grad_queries", "func_queries")
    assert schema.OPTIONAL_COST_VARIABLES == ("func_queries",)
    assert schema.PRIVACY_VARIABLES == ("epsilon_spent", "delta_spent")
    assert [schema.variable(v).nominal_axis for v in schema.PRIVACY_VARIABLES] == [
        "epsilon", "delta"]
    for role in schema.ROLES:
        names = schema.with_role(role)
        assert list(names) == [v for v in schema.VARIABLE_NAMES if v in names]
    # every cost variable is loaded by the report, every optional one is a cost variable
    assert set(schema.COST_VARIABLES) <= set(schema.REPORT_VARIABLES)
    assert set(schema.OPTIONAL_COST_VARIABLES) <= set(schema.COST_VARIABLES)


def test_a_role_must_be_known_and_a_privacy_variable_names_its_axis() -> None:
    with pytest.raises(ValueError, match="unknown role"):
        schema.Variable("x", "f8", "x", roles=frozenset({"reporting"}))
    with pytest.raises(ValueError, match="nominal_axis"):
        schema.Variable("x", "f8", "x", roles=frozenset({schema.PRIVACY}))
    with pytest.raises(ValueError, match="nominal_axis"):
        schema.Variable("x", "f8", "x", nominal_axis="epsilon")
    with pytest.raises(ValueError, match="unknown variable role"):
        schema.with_role("reporting")
    with pytest.raises(KeyError):
        schema.variable("nope")
