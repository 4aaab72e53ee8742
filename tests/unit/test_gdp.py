"""The exact GDP ↔ (ε, δ) conversions, the ledger's GDP claim and the scaled cube constraint."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpbench.core.sets import Box
from dpbench.privacy.gaussian import gdp_delta, gdp_epsilon, gdp_mu
from dpbench.privacy.ledger import Charge, PrivacyLedger


@pytest.mark.parametrize(("eps", "delta", "mu_ref"), [
    # GLL'22 calibration table (docs/rem.md, "Reference values") (s_exact), three significant digits as printed.
    (0.1, 1e-5, 0.0325), (1.0, 1e-5, 0.2681), (1.0, 1e-3, 0.3884), (5.0, 1e-5, 1.121),
    (10.0, 1e-8, 1.624),
])
def test_gdp_mu_reproduces_spec_table(eps: float, delta: float, mu_ref: float) -> None:
    mu = gdp_mu(eps, delta)
    assert mu == pytest.approx(mu_ref, rel=2e-3)
    assert gdp_delta(mu, eps) <= delta
    # The root is tight: a slightly larger μ violates δ.
    assert gdp_delta(mu * (1 + 1e-9), eps) > delta


def test_gdp_delta_matches_dong_roth_su_formula() -> None:
    for mu, eps in [(0.3, 0.5), (1.0, 1.0), (2.0, 3.0)]:
        ref = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert gdp_delta(mu, eps) == pytest.approx(ref, rel=1e-10)


def test_gdp_epsilon_inverts_gdp_delta() -> None:
    for mu, delta in [(0.2681, 1e-5), (1.0, 1e-6), (3.0, 1e-3)]:
        eps = gdp_epsilon(mu, delta)
        assert gdp_delta(mu, eps) <= delta
        assert gdp_delta(mu, eps * (1 - 1e-9)) > delta
    assert gdp_epsilon(1e-6, 0.5) == 0.0


def test_ledger_gdp_mu_composes_and_is_none_unless_every_charge_is_gdp() -> None:
    led = PrivacyLedger.from_charges(Charge("a", 1.0, 1e-6, gdp_mu=0.3),
                                     Charge("b", 1.0, 1e-6, gdp_mu=0.4))
    assert led.gdp_mu == pytest.approx(0.5)
    assert led.to_dict()["gdp_mu"] == pytest.approx(0.5)
    assert PrivacyLedger.from_charges(Charge("a", 1.0, gdp_mu=0.3), Charge("b", 1.0)).gdp_mu is None
    assert PrivacyLedger().gdp_mu is None


def test_box_is_the_inscribed_cube_with_fixed_diameter() -> None:
    box = Box(1.0)
    for p in (1, 4, 25):
        a = box.half_width(p)
        corner = np.full(p, a)
        assert np.linalg.norm(2 * corner) == pytest.approx(box.diameter)
        assert box.contains(corner) and not box.contains(corner * 1.01)
        assert np.array_equal(box.project(np.full(p, 5.0)), corner)
        x = box.sample_uniform(p, np.random.default_rng(0))
        assert box.contains(x)
    batch = np.array([[2.0, -2.0], [0.1, 0.2]])
    assert np.allclose(box.project(batch), [[box.half_width(2), -box.half_width(2)], [0.1, 0.2]])
