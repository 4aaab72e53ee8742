"""The audit point verdict: a clean point says "pass" only when its bounds came near the claim."""

from __future__ import annotations

import math

import pytest

from dpbench.audit.verdicts import UNINFORMATIVE_BELOW, VERDICTS, point_verdict, tightness


@pytest.mark.parametrize("args, expected", [
    ((0.05, 1.0), 0.05),
    ((-0.3, 1.0), 0.0),                      # a negative lower bound reaches nothing
    ((0.5, 2.0), 0.25),
    ((0.0, 1.0, 0.2, 0.25), 0.8),            # the μ claim is reached further than the ε claim
    ((0.4, 1.0, 0.01, 0.25), 0.4),
    ((0.4, math.inf), math.nan),             # no finite claim: nothing to be tight against
    ((math.nan, 1.0), math.nan),
])
def test_tightness(args: tuple[float, ...], expected: float) -> None:
    got = tightness(*args)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


@pytest.mark.parametrize("expect, applicable, runs, violation, tight, verdict", [
    ("private", True, 100, True, 2.5, "VIOLATION"),
    ("private", True, 100, True, 0.0, "VIOLATION"),      # a μ violation with ε_lb = 0
    ("private", True, 100, False, UNINFORMATIVE_BELOW, "pass"),
    ("private", True, 100, False, 0.099, "uninformative"),
    ("private", True, 100, False, math.nan, "uninformative"),
    ("violation", True, 100, True, 0.0, "detected"),
    ("violation", True, 100, False, 0.5, "not detected"),
    ("private", True, 0, False, math.nan, "no runs"),
    ("private", False, 0, False, math.nan, "n/a"),
])
def test_point_verdict(expect: str, applicable: bool, runs: int, violation: bool, tight: float,
                       verdict: str) -> None:
    assert point_verdict(expect, applicable, runs, violation, tight) == verdict
    assert verdict in VERDICTS
