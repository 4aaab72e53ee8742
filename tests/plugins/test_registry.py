"""Plugin registry: built-ins, run-time registration, and broken third-party entry points."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dpbench.core import registry
from dpbench.core.errors import UserInputError


def _fake_distribution(root: Path, name: str, entry_points: str) -> None:
    info = root / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_builtins_are_registered() -> None:
    algos = registry.available("algorithms")
    assert {"nonprivate_erm", "noisy_sgd", "output_perturbation"} <= set(algos)
    assert {"lb_lin", "lb_quad", "hinge_svm", "logistic"} <= set(registry.available("problems"))
    assert registry.get_algorithm("noisy_sgd").privacy == "approx"


def test_unknown_name_suggests_closest() -> None:
    with pytest.raises(UserInputError, match="did you mean 'noisy_sgd'"):
        registry.get_algorithm("noisy_sg")


def test_broken_and_good_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "goodplugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from dpbench.algorithms.nonprivate import NonPrivateERM\n"
        "class Copy(NonPrivateERM):\n    name = 'copy_ref'\n"
        "class NotAPlugin:\n    pass\n")
    _fake_distribution(tmp_path, "broken_plugin", "[dpbench.algorithms]\n"
                       "broken = no_such_module_xyz:Mechanism\n"
                       "copy_ref = goodplugin:Copy\n"
                       "wrong_type = goodplugin:NotAPlugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.warns(registry.PluginWarning) as record:
            algos = registry.available("algorithms", refresh=True)
        messages = " | ".join(str(w.message) for w in record)
        assert "could not load dpbench.algorithms plugin 'broken'" in messages
        assert "no_such_module_xyz" in messages
        assert "'wrong_type'" in messages and "not a subclass" in messages
        assert "copy_ref" in algos and "broken" not in algos and "wrong_type" not in algos
        assert "noisy_sgd" in algos  # built-ins unaffected
    finally:
        monkeypatch.undo()
        sys.modules.pop("goodplugin", None)
        registry.available("algorithms", refresh=True)


def test_cli_list_survives_a_broken_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from dpbench.cli.main import main

    _fake_distribution(tmp_path, "broken_problem", "[dpbench.problems]\nbad = nope_mod:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._cache.clear()
    try:
        assert main(["list"]) == 0
        out = capsys.readouterr()
        assert "noisy_sgd" in out.out and "lb_quad" in out.out
        assert "could not load dpbench.problems plugin 'bad'" in out.err
    finally:
        monkeypatch.undo()
        registry._cache.clear()


def test_broken_zoo_is_hidden_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    from dpbench.cli.main import main

    regular = registry.available("algorithms")
    everything = registry.available("algorithms", include_broken=True)
    broken = sorted(set(everything) - set(regular))
    # The shipped zoo; an installed third-party red team (examples/dpbench-redteam) adds more.
    from dpbench.audit.zoo import BROKEN

    assert set(BROKEN) <= set(broken)
    assert registry.get_algorithm(broken[0]) is everything[broken[0]]  # audit suites can name it
    assert main(["list", "algorithms"]) == 0
    assert "broken_" not in capsys.readouterr().out
    assert main(["list", "algorithms", "--broken"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in broken) and "deliberately broken" in out


def test_plugins_load_by_name_and_a_named_broken_one_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``get`` imports only the plugin it names; a broken plugin named by a suite is refused with
    its reason (exit 2 in the CLI), not reported as an unknown name."""
    _fake_distribution(tmp_path, "lazy_plugin", "[dpbench.algorithms]\n"
                       "lazy_broken = no_such_module_abc:Mechanism\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._cache.clear()
    try:
        assert "lazy_broken" in registry.names("algorithms")  # known without importing it
        assert registry.get_algorithm("nonprivate_erm").name == "nonprivate_erm"
        with pytest.warns(registry.PluginWarning), \
                pytest.raises(UserInputError, match="algorithm 'lazy_broken' is registered but "
                              "cannot be used: could not load .*no_such_module_abc"):
            registry.get_algorithm("lazy_broken")
    finally:
        monkeypatch.undo()
        registry._cache.clear()
