"""The privacy ledger: what a mechanism actually spent, returned with every release."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .profile import PrivacyProfile

#: The relative round-off by which a spent ε or δ may exceed its budget and still be within it
#: (:meth:`PrivacyLedger.within`; the report's privacy-spent table applies the same rule).
BUDGET_RTOL = 1e-9


@dataclass(frozen=True)
class Charge:
    """One privacy charge: a sub-mechanism and the (ε, δ) it spends under replace-one neighbours.

    ``gdp_mu`` is set when the charge is also μ-GDP (Dong–Roth–Su): a Gaussian mechanism of
    sensitivity Δ and noise σ is (Δ/σ)-GDP, the REM and Langevin paths are GDP by their theorems.
    The privacy audit tests the GDP claim as well as the (ε, δ) one when every charge has it.
    """

    mechanism: str
    epsilon: float
    delta: float = 0.0
    theorem: str = ""
    certified: bool = True
    gdp_mu: float | None = None


@dataclass(frozen=True)
class PrivacyLedger:
    """The privacy a release spent.

    ``epsilon``/``delta`` are the totals: the accountant's figure when ``accounting`` names one,
    otherwise basic composition of the charges. ``certified`` is False for nominal guarantees (for
    example an MCMC sampler whose output law only approximates the private target).

    ``profile`` is the whole privacy profile δ(ε) the release claims (a PLD or RDP accountant's
    curve, :mod:`dpbench.privacy.profile`); without one, :attr:`claimed_profile` derives it from
    the charges' GDP μ when every charge states one, else it is the single point (ε, δ). The
    privacy audit tests the claimed profile, so a mechanism that states its curve can be
    refuted wherever the curve binds, not only at its (ε, δ) (docs/plugins.md, 'Privacy ledger').
    """

    charges: tuple[Charge, ...] = field(default_factory=tuple)
    epsilon: float = 0.0
    delta: float = 0.0
    accounting: str = "basic composition"
    neighbouring: str = "replace-one"
    certified: bool = True
    profile: PrivacyProfile | None = None

    @classmethod
    def from_charges(cls, *charges: Charge, **kw: Any) -> PrivacyLedger:
        """Totals by basic composition (sum of ε, sum of δ)."""
        eps = math.fsum(c.epsilon for c in charges)
        delta = math.fsum(c.delta for c in charges)
        certified = all(c.certified for c in charges)
        return cls(tuple(charges), eps, delta, certified=certified, **kw)

    @classmethod
    def non_private(cls) -> PrivacyLedger:
        """The ledger of a non-private reference: infinite ε."""
        return cls((Charge("non-private", math.inf, 0.0, "none"),), math.inf, 0.0, "none")

    @property
    def gdp_mu(self) -> float | None:
        """The μ of μ-GDP the whole release satisfies, when every charge is GDP (composition:
        μ = √Σμᵢ²), else None."""
        mus = [c.gdp_mu for c in self.charges]
        if not mus or any(m is None for m in mus):
            return None
        return math.sqrt(math.fsum(m * m for m in mus))  # type: ignore[operator]

    @property
    def claimed_profile(self) -> PrivacyProfile:
        """The profile the release claims: ``profile`` when stated, else μ-GDP when every charge
        states a μ, else the point (ε, δ)."""
        if self.profile is not None:
            return self.profile
        mu = self.gdp_mu
        if mu is not None:
            return PrivacyProfile.from_gdp(mu)
        return PrivacyProfile.from_point(self.epsilon, self.delta)

    def within(self, epsilon: float, delta: float, rtol: float = BUDGET_RTOL) -> bool:
        """True when the spent (ε, δ) fits in the budget (ε, δ)."""
        return self.epsilon <= epsilon * (1 + rtol) and self.delta <= delta * (1 + rtol) + 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "accounting": self.accounting,
            "neighbouring": self.neighbouring,
            "certified": self.certified,
            "gdp_mu": self.gdp_mu,
            "profile": None if self.profile is None else self.profile.to_dict(),
            "charges": [c.__dict__ for c in self.charges],
        }
