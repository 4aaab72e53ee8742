"""Bad input: every case gives a clear error naming the field and the allowed values, the CLI
exits 2, and nothing is created or modified."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from dpbench.cli.main import main
from dpbench.config.suite import parse_suite
from dpbench.core.errors import SuiteError

GOOD = textwrap.dedent("""
    name: s
    seeds: 2
    experiments:
      - name: e
        problems: [{problem: lb_lin}]
        algorithms:
          - {label: a, algorithm: noisy_sgd, params: {sigma_mode: accountant}}
        grid: {n: [4, 8], p: [2], epsilon: [1.0], delta: [1e-5]}
""")


def _mutate(path: str, value: object) -> str:
    doc = yaml.safe_load(GOOD.replace("1e-5", "1.0e-5"))
    node = doc
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = keys[-1]
    if value is _DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return yaml.safe_dump(doc)


_DELETE = object()

BAD = [
    # (mutation path, value, fragments the message must contain)
    ("experiments.0.algorithms.0.algorithm", "noisy_sdg", ["unknown algorithm 'noisy_sdg'", "did you mean 'noisy_sgd'"]),
    ("experiments.0.problems.0.problem", "lb_lni", ["unknown problem", "did you mean 'lb_lin'"]),
    ("experiments.0.algorithms.0.params", {"sigma_mod": "paper"}, ["unknown parameter 'sigma_mod'", "did you mean 'sigma_mode'"]),
    ("experiments.0.algorithms.0.params", {"sigma_mode": "exact"}, ["sigma_mode", "'paper'", "'accountant'"]),
    ("experiments.0.algorithms.0.params", {"sigma_mode": 3}, ["sigma_mode", "one of"]),
    ("experiments.0.grid.epsilon", [0.0], ["experiments[0].grid.epsilon[0]", "epsilon must be a finite number > 0"]),
    ("experiments.0.grid.epsilon", [-1], ["epsilon must be a finite number > 0"]),
    ("experiments.0.grid.delta", [1.5], ["delta must be a number in [0, 1)"]),
    ("experiments.0.grid.delta", [0.0], ["(ε, δ)-DP mechanism", "delta contains 0"]),
    ("experiments.0.grid.n", [1, 8], ["n must be an integer >= 2"]),
    ("experiments.0.grid.n", [4.5], ["n must be an integer >= 2"]),
    ("experiments.0.grid.p", [0], ["p must be an integer >= 1"]),
    ("experiments.0.grid.n", [], ["empty grid"]),
    ("experiments.0.grid.n", [4, 4], ["duplicate values"]),
    ("experiments.0.grid.p", _DELETE, ["grid.p", "required axis is missing"]),
    ("experiments.0.grid.delta", _DELETE, ["grid.delta", "required"]),
    ("experiments.0.grid.radiuss", [1.0], ["unknown axis", "did you mean 'radius'"]),
    ("experiments.0.seeds", 0, ["seeds", "integer >= 1"]),
    ("experiments.0.algorithms", [], ["non-empty list"]),
    ("experiments", [], ["experiments", "non-empty list"]),
    ("root_seed", -3, ["root_seed", "integer >= 0"]),
    ("name", "bad name!", ["name", "identifier"]),
    ("experiments.0.grdi", {}, ["unknown field", "did you mean 'grid'"]),
]


@pytest.mark.parametrize("path,value,fragments", BAD, ids=[b[0] + "=" + repr(b[1])[:20] for b in BAD])
def test_bad_suite_is_a_clear_error(path: str, value: object, fragments: list[str]) -> None:
    with pytest.raises(SuiteError) as info:
        parse_suite(_mutate(path, value), "bad.yaml")
    msg = str(info.value)
    assert msg.startswith("bad.yaml:")
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in:\n{msg}"


def test_duplicate_labels_and_pure_with_delta() -> None:
    """A pure mechanism at δ > 0 is allowed (it runs at δ = 0); the duplicate label is not."""
    text = GOOD.replace(
        "- {label: a, algorithm: noisy_sgd, params: {sigma_mode: accountant}}",
        "- {label: a, algorithm: noisy_sgd}\n      - {label: a, algorithm: nonprivate_erm}\n"
        "      - {label: op, algorithm: output_perturbation}")
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "bad.yaml")
    msg = str(info.value)
    assert "duplicate label 'a'" in msg
    assert "pure" not in msg and len(info.value.problems) == 1


def test_every_error_is_reported_not_only_the_first() -> None:
    text = GOOD.replace("n: [4, 8]", "n: [1]").replace("epsilon: [1.0]", "epsilon: [0]")
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "bad.yaml")
    assert len(info.value.problems) == 2


def test_malformed_yaml_and_valid_scientific_notation() -> None:
    with pytest.raises(SuiteError, match="malformed YAML"):
        parse_suite("name: [unclosed", "bad.yaml")
    suite = parse_suite(GOOD, "good.yaml")
    assert suite.experiments[0].grid["delta"] == [1e-5]  # '1e-5' (no dot) is read as a float
    assert suite.experiments[0].dims == ("algorithm", "problem", "n", "p", "epsilon", "delta", "seed")


def test_extra_axis_routed_to_problem_params() -> None:
    text = GOOD.replace("delta: [1e-5]}", "delta: [1e-5], radius: [0.5, 1.0]}")
    exp = parse_suite(text).experiments[0]
    assert exp.dims[-2] == "radius" and exp.extra_routing == {"radius": "problem"}
    assert exp.problems[0].build({"radius": 0.5}).constraint.diameter == 1.0


@pytest.mark.parametrize("mutation", [("experiments.0.grid.epsilon", [0.0]),
                                      ("experiments.0.algorithms.0.algorithm", "nope")])
def test_cli_bad_suite_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  mutation: tuple[str, object]) -> None:
    suite = tmp_path / "bad.yaml"
    suite.write_text(_mutate(*mutation))
    store = tmp_path / "store.zarr"
    assert main(["run", str(suite), "--store", str(store), "--workers", "0", "--quiet"]) == 2
    assert not store.exists()
    assert main(["validate", str(suite)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "error" in err


def test_cli_store_that_holds_something_else(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "good.yaml"
    suite.write_text(GOOD)
    other = tmp_path / "other"
    other.mkdir()
    (other / "precious.txt").write_text("keep me")
    assert main(["run", str(suite), "--store", str(other), "--workers", "0", "--quiet"]) == 2
    assert sorted(p.name for p in other.iterdir()) == ["precious.txt"]
    assert "holds something else" in capsys.readouterr().err
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["run", str(suite), "--store", str(afile), "--workers", "0", "--quiet"]) == 2
    assert afile.read_text() == "x"


def test_cli_missing_suite_file_and_bad_workers(tmp_path: Path) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    suite = tmp_path / "good.yaml"
    suite.write_text(GOOD)
    assert main(["run", str(suite), "--store", str(tmp_path / "s"), "--workers", "-1"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["run", str(suite)])  # --store missing: argparse usage error
    assert info.value.code == 2
