"""The privacy ledger: what a mechanism actually spent, returned with every release."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


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
    """

    charges: tuple[Charge, ...] = field(default_factory=tuple)
    epsilon: float = 0.0
    delta: float = 0.0
    accounting: str = "basic composition"
    neighbouring: str = "replace-one"
    certified: bool = True

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

    def within(self, epsilon: float, delta: float, rtol: float = 1e-9) -> bool:
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
            "charges": [c.__dict__ for c in self.charges],
        }
