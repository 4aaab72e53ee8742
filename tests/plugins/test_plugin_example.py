"""The out-of-tree plugin example and ``dpbench new-plugin``, installed into this environment.

The example package (examples/dpbench-plugin-example) is pip-installed without build isolation
(no network needed), discovered through its entry point, run through its comparison suite, and
uninstalled at the end. A package freshly scaffolded by ``dpbench new-plugin`` is installed into
its own directory (``pip --target``), which only that test's subprocesses see: the other xdist
workers, whose tests assert that no plugin fails to load, never meet it half installed.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from tests.support.plugins import EXAMPLES, installed, needs_build_backend, pip_install_into
from tests.support.plugins import dpbench as _dpbench

EXAMPLE = EXAMPLES / "dpbench-plugin-example"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def example_installed():
    with installed(EXAMPLE, "dpbench-plugin-example", ["dpbench_plugin_example"]) as path:
        yield path


def test_example_is_listed(example_installed):
    r = _dpbench("list", "algorithms")
    assert r.returncode == 0, r.stderr
    assert "gaussian_output_perturbation" in r.stdout
    assert "PluginWarning" not in r.stderr


def test_example_compare_suite_runs(example_installed, tmp_path):
    store = tmp_path / "compare.zarr"
    r = _dpbench("run", str(example_installed / "suites" / "compare.yaml"), "--store", str(store),
                 "--workers", "0", "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    ds = xr.open_zarr(store, group="strongly_convex", consolidated=False)
    assert "gaussian_output_perturbation" in ds.algorithm.values
    status = ds.status.values
    assert np.isin(status, [1, 3]).all(), ds.error.values[~np.isin(status, [1, 3])]
    assert (ds.status.sel(algorithm="gaussian_output_perturbation").values == 1).all()
    excess = ds.excess_risk.where(ds.status == 1).values
    assert np.nanmin(excess) >= -1e-9
    spent = ds.delta_spent.sel(algorithm="gaussian_output_perturbation").values
    assert np.allclose(spent, 1e-5)


def test_new_plugin_scaffold_installs_and_is_listed(tmp_path):
    needs_build_backend()
    r = _dpbench("new-plugin", "scaffolded_mech", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    root = tmp_path / "scaffolded-mech"
    for rel in ("pyproject.toml", "README.md", "scaffolded_mech/__init__.py",
                "scaffolded_mech/mechanism.py", "tests/test_mechanism.py",
                "suites/scaffolded_mech.yaml"):
        assert (root / rel).is_file(), rel
    text = (root / "scaffolded_mech" / "mechanism.py").read_text()
    assert "class ScaffoldedMech(Algorithm)" in text and "TODO" not in text
    env = pip_install_into(root, tmp_path / "site")
    r = _dpbench("list", "algorithms", env=env)
    assert r.returncode == 0, r.stderr
    assert "scaffolded_mech" in r.stdout
    assert "PluginWarning" not in r.stderr
    r = _dpbench("validate", str(root / "suites" / "scaffolded_mech.yaml"), env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_new_plugin_directory_option(tmp_path):
    from dpbench.cli.main import main

    assert main(["new-plugin", "other_mech", "--directory", str(tmp_path / "x")]) == 0
    assert (tmp_path / "x" / "other_mech" / "mechanism.py").is_file()
    (tmp_path / "empty").mkdir()
    assert main(["new-plugin", "other_mech", "--directory", str(tmp_path / "empty")]) == 0


@pytest.mark.parametrize("name", ["My-Mech", "1mech", "my mech", "class", "a__b", "noisy_sgd", ""])
def test_new_plugin_bad_name(tmp_path, capsys, name):
    from dpbench.cli.main import main

    assert main(["new-plugin", name, "--directory", str(tmp_path / "p")]) == 2
    assert "invalid plugin name" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_new_plugin_refuses_existing_directory(tmp_path, capsys):
    from dpbench.cli.main import main

    target = tmp_path / "p"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    assert main(["new-plugin", "my_mech", "--directory", str(target)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]


def test_example_mechanism_is_the_scaffold_template() -> None:
    """The example package is the scaffold rendered for its name: one source of truth, so the
    template and the documented example cannot drift apart."""
    from dpbench.cli.scaffold import render

    files = render("gaussian_output_perturbation")
    rendered = next(v for k, v in files.items() if k.endswith("mechanism.py"))
    shipped = (EXAMPLE / "dpbench_plugin_example" / "mechanism.py").read_text()
    assert rendered == shipped
