"""The audit statistics: empirical lower bounds on ε (Clopper–Pearson) and on μ (GDP).

An (ε, δ)-DP mechanism M satisfies, for neighbours D, D′ and EVERY event E,
P[M(D₁) ∈ E] ≤ e^ε·P[M(D₀) ∈ E] + δ for both orders (D₁, D₀) of the pair. With TPR = P[E | D₁]
("numerator" dataset) and FPR = P[E | D₀] ("denominator") this gives ε ≥ log((TPR − δ)/FPR), so
one-sided Clopper–Pearson bounds TPR_lo ≤ TPR and FPR_hi ≥ FPR give the lower bound
ε_lb = log((TPR_lo − δ)/FPR_hi) (Jagielski, Ullman, Oprea, NeurIPS 2020; DP-Sniper, Bichsel et
al., S&P 2021; docs/audit.md, 'How the auditor works').

A μ-GDP mechanism (Dong, Roth, Su, JRSS-B 2022) has every test's FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ), so
μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR); with FPR ≤ FPR_hi and FNR = 1 − TPR ≤ FNR_hi = 1 − TPR_lo this
gives μ_lb = Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi) (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski,
Carlini, Terzis, USENIX Security 2023).

The claimed privacy PROFILE δ(ε) (:mod:`dpbench.privacy.profile`: a PLD or RDP curve, μ-GDP,
or the single point) is refuted by an event with TPR_lo > minᵢ (e^εᵢ·FPR_hi + δᵢ)
(:func:`profile_excess`).

The ε bound of an event is the larger of that Clopper–Pearson rectangle and the **joint test**
of its inequality (:mod:`dpbench.audit.joint`: one statistic K₁ − e^ε·K₀ of both sides' counts,
about half the runs for the same bound on a Gaussian pair's tail events).

**Levels.** An audit point confirms E events, fixed before its confirmation runs
(:mod:`dpbench.audit.events`). Each event gets α/E: half for its joint test (α/(2E)), half for
its two one-sided Clopper–Pearson intervals (α/(4E) each, :func:`event_alpha`). With
probability ≥ 1 − α all of them hold at once, and every function of them — the ε bounds, the μ
bound and the profile test of every event — holds simultaneously: a correct mechanism is
flagged with probability ≤ α at the point, and ≤ the run's α over all points (Bonferroni,
:func:`per_audit_alpha`).

**Resolution** (:func:`resolution`): what a clean result proves depends on the budget. For the
confirmation runs and level a point had, it is the smallest true ε (at the claimed δ) of a
reference mechanism — Gaussian for an (ε, δ) claim, Laplace for a pure one — that the audit
would flag in at least half of the runs with the best possible event: a pass of a slow plugin
at a small budget says how large a violation it could have missed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri
from scipy.stats import beta as _beta

from ..privacy.gaussian import gdp_epsilon
from ..privacy.profile import PROFILE_EPSILONS

__all__ = ["AuditBound", "EventBound", "audit_bound", "bounds_from_counts", "cp_lower", "cp_upper", "epsilon_lower_bounds",
           "event_alpha", "gdp_mu_lower_bounds", "joint_epsilon_lower_bounds", "per_audit_alpha", "profile_excess",
           "resolution"]

_RTOL = 1e-9


def _check_alpha(alpha: float, name: str = "alpha") -> None:
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"{name} must be in (0, 1), got {alpha!r}")


def cp_lower(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided Clopper–Pearson lower bound on a binomial p from k successes in n trials:
    the α-quantile of Beta(k, n − k + 1); 0 when k = 0. P[p ≥ bound] ≥ 1 − α.

    Vectorised over ``k`` (and ``n``); n = 0 gives 0 (no information).
    """
    _check_alpha(alpha)
    k = np.asarray(k, dtype=float)
    n = np.broadcast_to(np.asarray(n, dtype=float), k.shape)
    with np.errstate(invalid="ignore"):
        q = _beta.ppf(alpha, np.maximum(k, 1.0), np.maximum(n - k + 1, 1.0))
    return np.where((k > 0) & (n > 0), q, 0.0)


def cp_upper(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound: the (1 − α)-quantile of Beta(k + 1, n − k); 1 when
    k = n. P[p ≤ bound] ≥ 1 − α. Vectorised; n = 0 gives 1."""
    _check_alpha(alpha)
    k = np.asarray(k, dtype=float)
    n = np.broadcast_to(np.asarray(n, dtype=float), k.shape)
    with np.errstate(invalid="ignore"):
        q = _beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1.0))
    return np.where(k < n, q, 1.0)


def epsilon_lower_bounds(k_num: np.ndarray, k_den: np.ndarray, n: int, delta: float,
                         alpha_each: float) -> np.ndarray:
    """log((TPR_lo − δ)/FPR_hi) per event, CP at ``alpha_each`` per side; −inf when TPR_lo ≤ δ.

    ``k_num``/``k_den``: counts of the event among ``n`` runs on the numerator/denominator set.
    """
    tpr_lo = cp_lower(k_num, n, alpha_each)
    fpr_hi = cp_upper(k_den, n, alpha_each)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log((tpr_lo - delta) / fpr_hi)
    return np.where(tpr_lo > delta, out, -np.inf)


def gdp_mu_lower_bounds(k_num: np.ndarray, k_den: np.ndarray, n: int,
                        alpha_each: float) -> np.ndarray:
    """Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi) per event (Nasr et al. 2023), CP at ``alpha_each`` per side;
    −inf when either rate bound is degenerate (FPR_hi = 1 or FNR_hi = 1)."""
    fpr_hi = cp_upper(k_den, n, alpha_each)
    fnr_hi = 1.0 - cp_lower(k_num, n, alpha_each)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = ndtri(1.0 - fpr_hi) - ndtri(fnr_hi)
    return np.where(np.isfinite(out), out, -np.inf)


def profile_excess(k_num: np.ndarray, k_den: np.ndarray, n: int, profile_delta: np.ndarray,
                   alpha_each: float) -> np.ndarray:
    """TPR_lo − minᵢ (e^εᵢ·FPR_hi + δᵢ) per event over the profile table (δᵢ on
    :data:`~dpbench.privacy.profile.PROFILE_EPSILONS`); > 0 refutes the profile."""
    tpr_lo = cp_lower(k_num, n, alpha_each)
    fpr_hi = cp_upper(k_den, n, alpha_each)
    d = np.asarray(profile_delta, dtype=float)
    ok = np.isfinite(d)
    if not ok.any():
        return np.full(np.shape(tpr_lo), -np.inf)
    e = PROFILE_EPSILONS[ok]
    allowed = np.min(np.exp(e)[None, :] * np.atleast_1d(fpr_hi)[:, None] + d[ok][None, :], axis=1)
    return np.atleast_1d(tpr_lo) - allowed


def per_audit_alpha(alpha_total: float, n_audits: int) -> float:
    """Bonferroni: the level of each of ``n_audits`` audit points so that the family-wise error
    (any correct mechanism flagged anywhere in the run) is ≤ ``alpha_total``."""
    _check_alpha(alpha_total, "alpha_total")
    if not (isinstance(n_audits, (int, np.integer)) and n_audits >= 1):
        raise ValueError(f"n_audits must be an integer >= 1, got {n_audits!r}")
    return float(alpha_total) / int(n_audits)


def event_alpha(alpha_point: float, n_events: int) -> float:
    """The level of each one-sided Clopper–Pearson interval when a point confirms ``n_events``
    events at ``alpha_point``: α/(4E); each event's joint test gets twice that, α/(2E) (module
    docstring, 'Levels')."""
    _check_alpha(alpha_point, "alpha_point")
    return float(alpha_point) / (4.0 * max(int(n_events), 1))


def joint_epsilon_lower_bounds(k_num: np.ndarray, k_den: np.ndarray, n: int, delta: float,
                               alpha_each: float) -> np.ndarray:
    """The joint test's ε bound per event (:func:`dpbench.audit.joint.joint_epsilon_lb`) at
    twice ``alpha_each`` (the level :func:`event_alpha` leaves for it)."""
    from .joint import joint_epsilon_lb

    return np.array([joint_epsilon_lb(int(a), int(b), int(n), float(delta), 2.0 * alpha_each)
                     for a, b in zip(np.reshape(k_num, -1), np.reshape(k_den, -1))], dtype=float)


@dataclass(frozen=True)
class EventBound:
    """The bounds one confirmed event gives: its counts on the numerator (``k_num``) and
    denominator (``k_den``) side out of ``n`` confirmation runs per side."""

    k_num: int
    k_den: int
    n: int
    epsilon_lb: float
    mu_lb: float
    profile_excess: float


def bounds_from_counts(k_num: np.ndarray, k_den: np.ndarray, n: int, *, delta: float,
                       alpha_each: float, profile_delta: np.ndarray | None = None
                       ) -> list[EventBound]:
    """The ε bound, μ bound and profile excess of every confirmed event (all valid together at
    ``alpha_each`` per interval; module docstring). Bounds are clipped at 0 (ε ≥ 0 and μ ≥ 0
    hold trivially); with n = 0 they are 0 and the excess −inf."""
    k_num = np.asarray(k_num, dtype=float).reshape(-1)
    k_den = np.asarray(k_den, dtype=float).reshape(-1)
    if n <= 0:
        return [EventBound(int(a), int(b), 0, 0.0, 0.0, -math.inf) for a, b in zip(k_num, k_den)]
    eps = np.maximum(np.maximum(epsilon_lower_bounds(k_num, k_den, n, delta, alpha_each),
                                joint_epsilon_lower_bounds(k_num, k_den, n, delta, alpha_each)),
                     0.0)
    mu = np.maximum(gdp_mu_lower_bounds(k_num, k_den, n, alpha_each), 0.0)
    excess = (profile_excess(k_num, k_den, n, profile_delta, alpha_each)
              if profile_delta is not None else np.full(k_num.shape, -np.inf))
    return [EventBound(int(a), int(b), int(n), float(e), float(m), float(x))
            for a, b, e, m, x in zip(k_num, k_den, eps, mu, excess)]


def _best_expected(tpr: np.ndarray, fpr: np.ndarray, runs: int, delta: float,
                   alpha_each: float) -> tuple[float, float]:
    """(ε bound, μ bound) at the expected counts runs·tpr, runs·fpr, maximised over events."""
    from .joint import predicted_joint_epsilon

    k1 = np.floor(runs * np.asarray(tpr))
    k0 = np.ceil(runs * np.asarray(fpr))
    eps = np.maximum(epsilon_lower_bounds(k1, k0, runs, delta, alpha_each),
                     predicted_joint_epsilon(k1 / runs, k0 / runs, runs, delta, 2 * alpha_each))
    mu = gdp_mu_lower_bounds(k1, k0, runs, alpha_each)
    return float(np.max(eps)), float(np.max(mu))


def resolution(runs: int, alpha_each: float, epsilon_claimed: float, delta_claimed: float,
               mu_claimed: float = math.nan) -> float:
    """The smallest true ε (at the claimed δ) of a reference mechanism that ``runs`` confirmation
    runs per side at ``alpha_each`` per interval would flag with the best event, at the expected
    counts (in about half of the runs): a Gaussian (μ-GDP, threshold events of its likelihood
    ratio; the μ test too when a μ is claimed) for an (ε, δ) claim, a Laplace location pair (its
    tail events, where the ratio is e^ε) for a pure one. ``inf`` when no such mechanism exists
    below ε = 50 (the budget is too small to refute anything)."""
    from scipy.special import ndtr

    from ..privacy.gaussian import gdp_epsilon

    if runs <= 0 or not (math.isfinite(epsilon_claimed) and epsilon_claimed > 0):
        return math.inf
    ts = np.linspace(-4.0, 12.0, 321) if delta_claimed > 0 else np.linspace(0.0, 45.0, 451)

    if delta_claimed > 0:
        def flagged(mu: float) -> bool:
            e, m = _best_expected(ndtr(mu - ts), ndtr(-ts), runs, delta_claimed, alpha_each)
            return e > epsilon_claimed or (math.isfinite(mu_claimed) and m > mu_claimed)

        def true_eps(mu: float) -> float:
            return gdp_epsilon(mu, delta_claimed)
        top = 60.0
    else:
        def flagged(e_true: float) -> bool:
            tail = np.clip(ts, e_true, None)
            tpr = 0.5 * np.exp(-(tail - e_true))
            fpr = 0.5 * np.exp(-tail)
            e, _ = _best_expected(tpr, fpr, runs, 0.0, alpha_each)
            return e > epsilon_claimed

        def true_eps(e_true: float) -> float:
            return e_true
        top = 50.0
    if not flagged(top):
        return math.inf
    lo, hi = 0.0, top
    for _ in range(36):
        mid = 0.5 * (lo + hi)
        if flagged(mid):
            hi = mid
        else:
            lo = mid
    return float(true_eps(hi))


@dataclass(frozen=True)
class AuditBound:
    """The result of :func:`audit_bound` (one score, split sample). ``threshold``/``event``
    describe the event of the ε bound, ``threshold_gdp``/``event_gdp`` that of the μ bound."""

    epsilon_lb: float
    mu_lb: float
    epsilon_lb_gdp: float
    n_select: int
    n_confirm: int
    threshold: float
    event: str
    violation: bool
    threshold_gdp: float = math.nan
    event_gdp: str = "none"
    profile_violation: bool = False


def audit_bound(scores0: np.ndarray, scores1: np.ndarray, select: np.ndarray, *,
                epsilon_claimed: float, delta_claimed: float, mu_claimed: float,
                alpha: float, profile_delta: np.ndarray | None = None) -> AuditBound:
    """Lower bounds on ε and μ from the scores of one score function on D (``scores0``) and D′
    (``scores1``), split by ``select`` (run r of D and of D′ in the same half): the events
    (:func:`dpbench.audit.events.select_events`: thresholds, intervals, atoms; the best for ε,
    and for μ when ``mu_claimed`` is finite) are chosen on the selection runs and confirmed on
    the others, at ``alpha`` for all of them (module docstring). The building block of scripts
    and tests that audit a score they computed themselves; ``dpbench audit`` uses the same
    functions on several scores (:mod:`dpbench.audit.procedure`).
    """
    from ..privacy.gaussian import gdp_epsilon
    from .events import select_events

    _check_alpha(alpha)
    s0 = np.asarray(scores0, dtype=np.float64).reshape(-1)
    s1 = np.asarray(scores1, dtype=np.float64).reshape(-1)
    sel = np.asarray(select, dtype=bool).reshape(-1)
    if not (s0.shape == s1.shape == sel.shape):
        raise ValueError(f"scores0, scores1 and select must have the same length, got "
                         f"{s0.size}, {s1.size}, {sel.size}")
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
        raise ValueError("audit scores must be finite")
    n_sel, n_conf = int(sel.sum()), int((~sel).sum())
    if n_sel == 0 or n_conf == 0:
        return AuditBound(0.0, math.nan, math.nan, n_sel, n_conf, math.nan, "none", False)
    want_mu = math.isfinite(mu_claimed)
    n_events = 2 if want_mu else 1
    choices = select_events(0, s0[sel], s1[sel], n_confirm=n_conf, delta=float(delta_claimed),
                            alpha_each=event_alpha(alpha, n_events), want_mu=want_mu)
    if not choices:
        return AuditBound(0.0, math.nan, math.nan, n_sel, n_conf, math.nan, "none", False)
    events = [c.event for c in choices]
    a_each = event_alpha(alpha, len(events))
    c0, c1 = s0[~sel], s1[~sel]
    k1 = np.array([np.count_nonzero(e.contains(c1)) for e in events])
    k0 = np.array([np.count_nonzero(e.contains(c0)) for e in events])
    num = np.array([e.numerator == 1 for e in events])
    bounds = bounds_from_counts(np.where(num, k1, k0), np.where(num, k0, k1), n_conf,
                                delta=float(delta_claimed), alpha_each=a_each,
                                profile_delta=profile_delta)
    eps_lb = max(b.epsilon_lb for b in bounds)
    mu_lb = max(b.mu_lb for b in bounds)
    profile_violation = max(b.profile_excess for b in bounds) > 0
    eps_gdp = gdp_epsilon(mu_lb, delta_claimed) if (mu_lb > 0 and 0 < delta_claimed < 1) else (
        0.0 if mu_lb == 0 else math.nan)
    violation = eps_lb > float(epsilon_claimed) * (1 + _RTOL) or (
        want_mu and mu_lb > float(mu_claimed) * (1 + _RTOL)) or profile_violation
    ev, eg = events[0], events[-1]
    return AuditBound(eps_lb, mu_lb, float(eps_gdp), n_sel, n_conf, ev.lo, ev.describe(),
                      bool(violation), eg.lo, eg.describe(), bool(profile_violation))
