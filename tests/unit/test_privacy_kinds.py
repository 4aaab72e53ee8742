"""The rule of privacy kinds against δ (issue 18): a pure mechanism runs at δ = 0 at every grid
δ, an (ε, δ) one needs δ > 0, a reference ignores both; the errors name ``delta`` and the rule."""

from __future__ import annotations

import textwrap

import pytest

from dpbench.config.suite import parse_suite
from dpbench.core.algorithm import check_privacy_args
from dpbench.core.errors import SuiteError, UserInputError
from dpbench.core.grid import GridPoint
from dpbench.core.seeding import canonical, data_identity, mechanism_identity
from dpbench.engine.cells import CellStreams
from dpbench.engine.plan import expand

VALUES = {"n": 10, "p": 2, "epsilon": 1.0, "delta": 1e-6, "radius": 0.5}
POINT = GridPoint.from_values(VALUES)


def test_a_pure_mechanism_runs_at_delta_zero() -> None:
    got = POINT.for_privacy("pure")
    assert got.identity() == {**VALUES, "delta": 0.0}
    assert POINT.delta == 1e-6                         # the grid point is not modified
    # at δ = 0 (where pure mechanisms always ran) the point, hence the identity, is unchanged
    zero = GridPoint.from_values({**VALUES, "delta": 0.0})
    assert zero.for_privacy("pure") == zero
    data = data_identity("lb_quad", {}, 10, 2, 3)
    assert canonical(mechanism_identity("output_perturbation", {}, data, got.identity())) == (
        canonical(mechanism_identity("output_perturbation", {}, data, zero.identity())))


def test_the_typed_point_keys_streams_as_the_untyped_one_did() -> None:
    """Old stores resume: the identity of a typed point hashes like the dict it replaced, with
    the values as a suite spells them (1 and 1.0 alike)."""
    raw = {"n": 10, "p": 2, "epsilon": 1, "delta": 0, "radius": 0.5}
    assert canonical(GridPoint.from_values(raw).identity()) == canonical(raw)
    assert GridPoint.from_values(raw).value("radius") == 0.5
    with pytest.raises(KeyError):
        GridPoint.from_values(raw).value("missing")


@pytest.mark.parametrize("privacy", ["approx", "none"])
def test_other_kinds_run_at_the_grid_point(privacy: str) -> None:
    assert POINT.for_privacy(privacy) == POINT
    zero = GridPoint.from_values({**VALUES, "delta": 0.0})
    assert zero.for_privacy(privacy).delta == 0.0


def test_release_arguments_name_delta_and_the_rule() -> None:
    check_privacy_args("op", "pure", 1.0, 0.0)
    check_privacy_args("sgd", "approx", 1.0, 1e-6)
    check_privacy_args("ref", "none", 1.0, 1e-6)       # references accept any budget
    check_privacy_args("ref", "none", 1.0, 0.0)
    with pytest.raises(UserInputError) as info:
        check_privacy_args("op", "pure", 1.0, 1e-6)
    assert "delta=1e-06" in str(info.value) and "allowed: delta = 0" in str(info.value)
    assert "ε-DP implies (ε, δ)-DP" in str(info.value)
    with pytest.raises(UserInputError) as info:
        check_privacy_args("sgd", "approx", 1.0, 0.0)
    assert "delta must be in (0, 1), got delta=0" in str(info.value)


SUITE = textwrap.dedent("""
    name: s
    seeds: 2
    experiments:
      - name: e
        problems: [{problem: lb_quad}]
        algorithms:
          - {label: op, algorithm: output_perturbation}
          - {label: sgd, algorithm: noisy_sgd}
          - {label: ref, algorithm: nonprivate_erm}
        grid: {n: [4, 8], p: [2], epsilon: [1.0], delta: DELTAS}
""")


def test_a_suite_may_mix_pure_and_approx_mechanisms() -> None:
    exp = parse_suite(SUITE.replace("DELTAS", "[1e-6, 1e-5]")).experiments[0]
    assert [a.label for a in exp.algorithms] == ["op", "sgd", "ref"]
    assert exp.grid["delta"] == [1e-6, 1e-5]


def test_an_approx_mechanism_at_delta_zero_is_refused() -> None:
    with pytest.raises(SuiteError) as info:
        parse_suite(SUITE.replace("DELTAS", "[0, 1e-5]"), "bad.yaml")
    assert info.value.problems == [
        "experiments[0].algorithms[sgd]: noisy_sgd is an (ε, δ)-DP mechanism but grid.delta "
        "contains 0 (grid.delta is [0.0, 1e-05]); allowed: delta values in (0, 1) (an (ε, δ) "
        "mechanism needs delta > 0 at every grid point; pure ε-DP mechanisms may sit at any "
        "delta, including 0, and run at delta = 0)"]
    # without a delta axis the grid is δ = 0: refused too, as a missing axis
    with pytest.raises(SuiteError, match=r"grid\.delta: required: the experiment has \(ε, δ\)"):
        parse_suite(SUITE.replace(", delta: DELTAS", ""), "bad.yaml")


def test_an_audit_still_tests_a_pure_mechanism_at_delta_zero() -> None:
    audit = textwrap.dedent("""
        name: a
        audit: {runs: 200, selection_runs: 200}
        audits:
          - name: op
            algorithms: [{algorithm: output_perturbation}]
            problems: [{problem: lb_quad}]
            canaries: [sphere]
            grid: {n: [10], p: [2], epsilon: [1.0], delta: [1.0e-6]}
    """)
    with pytest.raises(SuiteError, match=r"pure ε-DP mechanism but grid\.delta is \[1e-06\]; "
                                         r"allowed: delta: \[0\]"):
        parse_suite(audit, "audit.yaml")


def test_cell_streams_key_a_pure_cell_by_delta_zero() -> None:
    """The engine's streams for a pure chunk at δ > 0 are those of the same chunk at δ = 0;
    an (ε, δ) chunk keeps its own δ."""
    mixed = parse_suite(SUITE.replace("DELTAS", "[1e-6]"))
    zero = parse_suite(SUITE.replace("DELTAS", "[0]").replace(
        "      - {label: sgd, algorithm: noisy_sgd}\n", ""))
    chunks, _ = expand(mixed, mixed.experiments[0])
    ref_chunks, _ = expand(zero, zero.experiments[0])
    by = {(c.algorithm_name, c.point.n): c for c in chunks}
    ref = {(c.algorithm_name, c.point.n): c for c in ref_chunks}
    for n in (4, 8):
        pure, pure0 = by[("output_perturbation", n)], ref[("output_perturbation", n)]
        streams, streams0 = CellStreams(pure, "pure"), CellStreams(pure0, "pure")
        assert pure.point.delta == 1e-6 and streams.point.delta == 0.0
        assert streams.mechanism.words(1) == streams0.mechanism.words(1)
        approx = CellStreams(by[("noisy_sgd", n)], "approx")
        assert approx.point.delta == 1e-6
        assert approx.mechanism.words(1) != CellStreams(
            by[("noisy_sgd", n)], "pure").mechanism.words(1)
