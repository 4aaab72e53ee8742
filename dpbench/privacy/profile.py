"""Privacy profiles: the whole curve δ(ε) a release claims, not one (ε, δ) point.

A mechanism is (ε, δ(ε))-DP for every ε ≥ 0 along its *privacy profile* δ(·) (Balle, Barthe,
Gaboardi 2018). One (ε, δ) point is a single sample of that curve, and an audit that only sees
the point can refute the mechanism only where the point binds (docs/audit.md, 'What a claim
lets the audit test'). A :class:`PrivacyProfile` carries the curve as a table of upper bounds
δᵢ ≥ δ(εᵢ) on an increasing ε grid; since δ(·) is non-increasing, δ(ε) ≤ δᵢ for every ε ≥ εᵢ,
so reading the table as a step function (:meth:`PrivacyProfile.delta_at`) is itself a valid
upper bound between the grid points.

``kind`` records where the curve comes from, tightest first:

* ``"gdp"`` — μ-GDP (Dong, Roth, Su 2022): δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), exact for
  a Gaussian pair (Balle and Wang 2018, Thm 8);
* ``"pld"`` — a privacy-loss-distribution accountant (dp-accounting), pessimistic estimate;
* ``"rdp"`` — Rényi DP converted to (ε, δ) at every ε (Canonne, Kamath, Steinke 2020, Prop. 12:
  δ = exp((α − 1)(ε_α − ε))/α · (1 − 1/α)^(α − 1), minimised over the orders α);
* ``"point"`` — only the (ε, δ) the ledger states (δ(ε′) ≤ δ for ε′ ≥ ε, nothing below).

``epsilon_rdp`` keeps the RDP accountant's ε at the ledger's δ beside a tighter accountant's
figure, so the two can be compared (docs/bst14.md, 'Which accountant is certified').
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["PROFILE_EPSILONS", "PROFILE_KINDS", "PrivacyProfile"]

PROFILE_KINDS = ("gdp", "pld", "rdp", "point")

#: The ε grid on which profiles are tabulated (and stored by the audit): 0 to 10 in steps of 0.05.
PROFILE_EPSILONS: np.ndarray = np.round(np.arange(0.0, 10.0 + 1e-9, 0.05), 10)


@dataclass(frozen=True)
class PrivacyProfile:
    """Upper bounds ``deltas[i]`` ≥ δ(``epsilons[i]``) of a release's privacy profile.

    ``epsilons`` strictly increasing and ≥ 0; ``deltas`` in [0, 1] and non-increasing (a table
    that is not is refused: no privacy profile increases). ``source`` says how the table was
    computed (theorem, accountant).
    """

    kind: str
    epsilons: tuple[float, ...]
    deltas: tuple[float, ...]
    source: str = ""
    epsilon_rdp: float | None = None
    mu: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in PROFILE_KINDS:
            raise ValueError(f"profile kind must be one of {', '.join(PROFILE_KINDS)}, got "
                             f"{self.kind!r}")
        e = np.asarray(self.epsilons, dtype=float)
        d = np.asarray(self.deltas, dtype=float)
        if e.ndim != 1 or e.shape != d.shape or e.size == 0:
            raise ValueError("a privacy profile needs equally long, non-empty epsilons and deltas")
        if not (np.all(np.isfinite(e)) and e[0] >= 0 and np.all(np.diff(e) > 0)):
            raise ValueError("profile epsilons must be finite, >= 0 and strictly increasing")
        if not (np.all((d >= 0) & (d <= 1)) and np.all(np.diff(d) <= 1e-15)):
            raise ValueError("profile deltas must lie in [0, 1] and not increase with epsilon")

    # --- constructors -------------------------------------------------------------------------
    @classmethod
    def from_gdp(cls, mu: float, source: str = "", **kw: object) -> PrivacyProfile:
        """The exact profile of μ-GDP on :data:`PROFILE_EPSILONS`."""
        from .gaussian import gdp_delta  # scipy: not loaded by `import dpbench`

        if not (math.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
        deltas = np.minimum.accumulate([min(1.0, max(0.0, gdp_delta(mu, float(e))))
                                        if mu > 0 else 0.0 for e in PROFILE_EPSILONS])
        return cls("gdp", tuple(PROFILE_EPSILONS.tolist()), tuple(deltas.tolist()),
                   source or f"{mu:.6g}-GDP (Dong, Roth, Su 2022)", mu=float(mu), **kw)  # type: ignore[arg-type]

    @classmethod
    def from_point(cls, epsilon: float, delta: float, source: str = "") -> PrivacyProfile:
        """Only the stated point: δ(ε′) ≤ δ for ε′ ≥ ε (and the trivial 1 below ε)."""
        eps = [0.0, float(epsilon)] if epsilon > 0 else [0.0]
        dts = [1.0, float(delta)] if epsilon > 0 else [float(delta)]
        return cls("point", tuple(eps), tuple(dts), source or f"({epsilon:g}, {delta:g})-DP")

    @classmethod
    def from_rdp(cls, orders: Sequence[float], rdp: Sequence[float], source: str = "",
                 **kw: object) -> PrivacyProfile:
        """RDP ε_α at the given orders α > 1, converted at every ε of :data:`PROFILE_EPSILONS`
        (Canonne, Kamath, Steinke 2020, Prop. 12; module docstring)."""
        a = np.asarray(orders, dtype=float)
        r = np.asarray(rdp, dtype=float)
        if a.shape != r.shape or a.size == 0 or not np.all(a > 1):
            raise ValueError("RDP orders must be > 1 and match the RDP values")
        with np.errstate(over="ignore", invalid="ignore"):
            logd = ((a[None, :] - 1) * (r[None, :] - PROFILE_EPSILONS[:, None])
                    - np.log(a[None, :]) + (a[None, :] - 1) * np.log1p(-1 / a[None, :]))
        logd = np.where(np.isfinite(r)[None, :], logd, np.inf)
        deltas = np.minimum(1.0, np.exp(np.min(logd, axis=1)))
        deltas = np.minimum.accumulate(deltas)
        return cls("rdp", tuple(PROFILE_EPSILONS.tolist()), tuple(deltas.tolist()),
                   source or "RDP converted (Canonne, Kamath, Steinke 2020, Prop. 12)", **kw)  # type: ignore[arg-type]

    # --- reading ------------------------------------------------------------------------------
    def delta_at(self, epsilons: np.ndarray | Sequence[float] | float) -> np.ndarray:
        """Upper bounds on δ(ε) at ``epsilons``: the table read as a non-increasing step
        function (the δ of the largest grid ε at or below each ε; 1 below the grid)."""
        e = np.asarray(epsilons, dtype=float)
        grid = np.asarray(self.epsilons, dtype=float)
        i = np.searchsorted(grid, e, side="right") - 1
        table = np.asarray(self.deltas, dtype=float)
        return np.where(i >= 0, table[np.clip(i, 0, None)], 1.0)

    def epsilon_at(self, delta: float) -> float:
        """The smallest grid ε whose δ bound is ≤ ``delta`` (∞ when none is)."""
        ok = np.nonzero(np.asarray(self.deltas) <= delta)[0]
        return float(self.epsilons[ok[0]]) if ok.size else math.inf

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "source": self.source, "epsilon_rdp": self.epsilon_rdp,
                "epsilons": list(self.epsilons), "deltas": list(self.deltas)}
