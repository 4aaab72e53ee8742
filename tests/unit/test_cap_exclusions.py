"""Exclusions only where theory puts them: a jump to the trivial level at either end of any axis
is never hidden (docs/analysis.md, "What is excluded").

Synthetic curves with a known slope s (60 seeds per point, lognormal noise with coefficient of
variation 0.3, so the slope's CI half-width is about 0.03), fitted by ``fit_curve`` against a
rate card and checked as a declared expectation with the default tolerance 0.1:

* a **genuine cap**: the curve min(0.9·T, C·x^s) with the trivial level T reached at the end
  where the card's bound is largest: excluded, the row agrees (or, on an axis along which the
  card gives no direction, stays in the fit and the row is inconclusive);
* a **planted jump**: the same power law, but the first or last two points lifted to the
  trivial level where the law puts them at ≤ 1/8 of it: the row never agrees.

The cube is seeded, so each case is deterministic; the margins (a jump 8–60× above the law
against the JUMP_FACTOR of 2; a slope error of 0 against a band of 0.1 for the genuine caps)
leave nothing to chance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbench.analysis import check_expectations
from dpbench.analysis.rates import fit_curve
from dpbench.config.suite import Expectation
from dpbench.core.ratecard import RateCard

#: Axis kinds: the card's exponent along the axis (None: the card has none: an extra axis).
AXES = {"n": -1.0, "epsilon": -1.0, "p": 1.0, "radius": None}
SEEDS, CV, TRIVIAL = 60, 0.3, 1.0


def _card() -> RateCard:
    """The card of every case: exponents along n, p and ε; none along the extra axis."""
    return RateCard(expression="p/(n*epsilon)", exponents={"n": -1, "p": 1, "epsilon": -1},
                    citation="synthetic", cap="L*D")


def _samples(means: np.ndarray, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log1p(CV * CV))
    return [m * rng.lognormal(-sigma * sigma / 2, sigma, SEEDS) for m in means]


def _check(axis: str, means: np.ndarray, x: np.ndarray, slope: float) -> tuple[str, str]:
    fixed = {k: v for k, v in {"n": 1000, "p": 4, "epsilon": 1.0}.items() if k != axis}
    fit = fit_curve("synthetic", "alg", "prob", axis, fixed, list(x), _samples(means, 7),
                    trivial=[TRIVIAL] * len(x), card=_card(),
                    constants={"L": 1.0, "D": 1e6}, n_resamples=1000, rng=3)
    exp = Expectation("row", "alg", "prob", axis, slope)
    [c] = check_expectations([fit], [exp], "synthetic")
    return c.outcome, c.reason


def _grid(axis: str) -> np.ndarray:
    return np.geomspace(1.0, 32.0, 6) * {"n": 100, "epsilon": 0.25, "p": 2, "radius": 0.5}[axis]


def _law(axis: str, x: np.ndarray, level_at_informative: float) -> tuple[np.ndarray, float]:
    """(C·x^s, s) with the law at ``level_at_informative``·T at the point nearest the card's
    cap end but one (so the end point itself is at or above the trivial level for caps)."""
    s = AXES[axis] if AXES[axis] is not None else -1.0
    law = (x / x[1]) ** s if s < 0 else (x / x[-2]) ** s
    return law * level_at_informative * TRIVIAL, s


@pytest.mark.parametrize("axis", list(AXES))
@pytest.mark.parametrize("end", ["low", "high"])
def test_a_jump_to_the_trivial_level_at_either_end_never_agrees(axis: str, end: str) -> None:
    x = _grid(axis)
    means, s = _law(axis, x, 0.02)  # the law stays ≤ 1/8 of T at every point
    assert means.max() <= TRIVIAL / 8
    jumped = means.copy()
    if end == "low":
        jumped[:2] = TRIVIAL
    else:
        jumped[-2:] = TRIVIAL
    outcome, reason = _check(axis, jumped, x, s)
    assert outcome in ("disagrees", "inconclusive"), reason
    assert outcome != "agrees"
    assert "jump" in reason or "blow-up" in reason or "trivial level" in reason, reason
    # and the same curve without the jump agrees, so the jump is what the row catches
    assert _check(axis, means, x, s)[0] == "agrees"


@pytest.mark.parametrize("axis", list(AXES))
def test_a_genuine_cap_at_the_card_end_is_excluded(axis: str) -> None:
    x = _grid(axis)
    law, s = _law(axis, x, 0.55)
    means = np.minimum(0.9 * TRIVIAL, law)  # the law reaches T beyond the end point: a cap
    capped_end = 0 if (AXES[axis] or -1.0) < 0 else len(x) - 1
    assert means[capped_end] >= 0.5 * TRIVIAL
    outcome, reason = _check(axis, means, x, s)
    if AXES[axis] is None:  # no direction from theory: kept, and the row cannot agree
        assert outcome == "inconclusive" and "no direction" in reason, reason
    else:
        assert outcome == "agrees", reason
