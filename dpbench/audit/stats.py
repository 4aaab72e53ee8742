"""The audit statistics: empirical lower bounds on ε (Clopper–Pearson) and on μ (GDP).

An (ε, δ)-DP mechanism M satisfies, for neighbours D, D′ and EVERY event E,
P[M(D) ∈ E] ≤ e^ε·P[M(D′) ∈ E] + δ (and symmetrically). With TPR = P[E | D₁] ("numerator"
dataset) and FPR = P[E | D₀] ("denominator") this gives ε ≥ log((TPR − δ)/FPR), so one-sided
Clopper–Pearson bounds TPR_lo ≤ TPR and FPR_hi ≥ FPR, each at level α/2, give the lower bound
ε_lb = log((TPR_lo − δ)/FPR_hi), valid with probability ≥ 1 − α (union bound; Jagielski, Ullman,
Oprea, NeurIPS 2020; DP-Sniper, Bichsel et al. S&P 2021; docs/audit.md, 'How the auditor works').

A μ-GDP mechanism (Dong, Roth, Su, JRSS-B 2022) has every test's FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ), so
μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR); with FPR ≤ FPR_hi and FNR = 1 − TPR ≤ FNR_hi = 1 − TPR_lo this
gives μ_lb = Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi) (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski,
Carlini, Terzis, USENIX Security 2023).

Split-sample protocol (never max over thresholds on the samples that are tested): the event —
its threshold t, its side (score > t, score ≤ t, or score = t) and its orientation (which
dataset is the numerator) — is chosen on the SELECTION runs by maximising a plug-in bound (the
same bound computed on the selection counts); the bound is then computed once, on the
CONFIRMATION runs, which are independent of the choice. Two events are selected: one maximising
the ε bound, one maximising the μ bound (GDP favours central thresholds, ε the tails).

The candidate events (docs/audit.md, 'Candidate events'): thresholds at 199 interior quantiles
of the pooled selection scores (the bulk), at the k-th smallest and largest pooled selection
scores for k = 1, 2, 3, 5, 8, … up to the 0.5 % quantile (the tails, where a rare leak and the
ε bound of a small δ live), and atoms: every value repeated at least twice among one side's
selection scores (a continuous output never repeats a value, so a repeat is a point mass, e.g.
a raw record released now and then), tested as the event {score = t}. The candidates are
chosen from the selection runs only, so adding candidates never invalidates the bound; it only
changes which event is confirmed.

The claimed privacy PROFILE δ(ε) (:mod:`dpbench.privacy.profile`: a PLD or RDP curve, μ-GDP,
or the single point) is tested on the same two confirmed events, at no extra α: the profile
claims TPR ≤ e^εᵢ·FPR + δᵢ for every εᵢ of its table, so TPR_lo > minᵢ (e^εᵢ·FPR_hi + δᵢ) refutes
it (:func:`profile_excess`). For a point claim this is the ε test; for a curve it can refute the
claim where the curve binds, away from the stated (ε, δ).

Sharing α: each of the two bounds gets α/2, and each bound's two Clopper–Pearson intervals
α/4. So ε_lb holds at confidence 1 − α/2, μ_lb holds at 1 − α/2, and both hold together at
1 − α: a correct mechanism is flagged (``violation``) with probability ≤ α. Both are stated "at
1 − α" in reports (conservative for each alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri
from scipy.stats import beta as _beta

from ..privacy.gaussian import gdp_epsilon
from ..privacy.profile import PROFILE_EPSILONS

__all__ = ["AuditBound", "audit_bound", "cp_lower", "cp_upper", "epsilon_lower_bounds",
           "gdp_mu_lower_bounds", "per_audit_alpha", "profile_excess", "EVENTS"]

#: The six event families: (side, orientation). "gt" = {score > t}, "le" = {score ≤ t},
#: "eq" = {score = t} (atoms); "10" = numerator D′ (scores1) over denominator D (scores0), "01"
#: the reverse.
EVENTS: tuple[tuple[str, str], ...] = (("gt", "10"), ("gt", "01"), ("le", "10"), ("le", "01"),
                                       ("eq", "10"), ("eq", "01"))

#: Maximum number of candidate thresholds in the bulk (quantiles of the pooled selection scores).
N_THRESHOLDS = 200

#: Most atoms (repeated selection values, the most frequent first) tried as {score = t} events.
MAX_ATOMS = 64

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


@dataclass(frozen=True)
class AuditBound:
    """The result of one audit point (see the module docstring for the guarantees).

    ``threshold``/``event`` describe the event of the ε bound, ``threshold_gdp``/``event_gdp``
    the event of the μ bound. ``epsilon_lb`` ≥ 0 always (ε ≥ 0 is trivially true); ``mu_lb`` is
    NaN when there are no confirmation runs. ``epsilon_lb_gdp`` = gdp_epsilon(mu_lb, δ): the ε
    a μ_lb-GDP mechanism would need at the claimed δ — reported, not a proof for (ε, δ) claims.
    """

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


def _counts(scores0: np.ndarray, scores1: np.ndarray,
            ts: np.ndarray) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(numerator count, denominator count) of each event family at each threshold."""
    s0, s1 = np.sort(scores0), np.sort(scores1)
    le0 = np.searchsorted(s0, ts, side="right").astype(float)
    le1 = np.searchsorted(s1, ts, side="right").astype(float)
    eq0 = le0 - np.searchsorted(s0, ts, side="left")
    eq1 = le1 - np.searchsorted(s1, ts, side="left")
    gt0, gt1 = s0.size - le0, s1.size - le1
    return {("gt", "10"): (gt1, gt0), ("gt", "01"): (gt0, gt1),
            ("le", "10"): (le1, le0), ("le", "01"): (le0, le1),
            ("eq", "10"): (eq1, eq0), ("eq", "01"): (eq0, eq1)}


def _tail_ranks(n: int) -> np.ndarray:
    """0-based ranks 0, 1, 2, 4, 7, 12, … (Fibonacci-like) below the 0.5 % quantile of n."""
    ranks, a, b = [], 1, 2
    while a - 1 < max(1, n // N_THRESHOLDS):
        ranks.append(a - 1)
        a, b = b, a + b
    return np.asarray(ranks, dtype=int)


def _atoms(sel0: np.ndarray, sel1: np.ndarray) -> np.ndarray:
    """Values repeated at least twice among one side's selection scores, most frequent first
    (at most :data:`MAX_ATOMS`)."""
    found: dict[float, int] = {}
    for side in (sel0, sel1):
        values, counts = np.unique(side, return_counts=True)
        for v, c in zip(values[counts >= 2], counts[counts >= 2]):
            found[float(v)] = max(found.get(float(v), 0), int(c))
    ordered = sorted(found, key=lambda v: (-found[v], v))[:MAX_ATOMS]
    return np.asarray(sorted(ordered), dtype=float)


def _describe(side: str, orient: str, t: float) -> str:
    num, den = ("D′", "D") if orient == "10" else ("D", "D′")
    op = {"gt": ">", "le": "≤", "eq": "="}[side]
    return f"P[score {op} {t:.6g} | {num}] vs P[· | {den}]"


def _select(sel0: np.ndarray, sel1: np.ndarray, score_fn) -> tuple[str, str, float]:  # type: ignore[no-untyped-def]
    """The event (side, orientation, threshold) maximising ``score_fn(k_num, k_den, n)`` on the
    selection runs, over the candidates of the module docstring."""
    pooled = np.sort(np.concatenate([sel0, sel1]))
    qs = np.linspace(0.0, 1.0, N_THRESHOLDS + 1)[1:-1]
    ranks = _tail_ranks(pooled.size)
    ts = np.unique(np.concatenate([np.quantile(pooled, qs), pooled[ranks],
                                   pooled[pooled.size - 1 - ranks]]))
    atoms = _atoms(sel0, sel1)
    counts = {False: _counts(sel0, sel1, ts),
              True: _counts(sel0, sel1, atoms) if atoms.size else None}
    n = sel0.size
    best: tuple[float, str, str, float] = (-math.inf, "gt", "10", float(ts[0]))
    for side, orient in EVENTS:
        is_atom = side == "eq"
        if counts[is_atom] is None:
            continue
        cand = atoms if is_atom else ts
        k_num, k_den = counts[is_atom][(side, orient)]
        vals = score_fn(k_num, k_den, n)
        i = int(np.argmax(vals))
        if vals[i] > best[0]:
            best = (float(vals[i]), side, orient, float(cand[i]))
    return best[1], best[2], best[3]


def _confirm_counts(conf0: np.ndarray, conf1: np.ndarray, side: str, orient: str,
                    t: float) -> tuple[np.ndarray, np.ndarray]:
    k_num, k_den = _counts(conf0, conf1, np.array([t]))[(side, orient)]
    return k_num, k_den


def _validate(scores0: np.ndarray, scores1: np.ndarray, select: np.ndarray,
              alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _check_alpha(alpha)
    s0 = np.asarray(scores0, dtype=np.float64).reshape(-1)
    s1 = np.asarray(scores1, dtype=np.float64).reshape(-1)
    sel = np.asarray(select, dtype=bool).reshape(-1)
    if not (s0.shape == s1.shape == sel.shape):
        raise ValueError(f"scores0, scores1 and select must have the same length, got "
                         f"{s0.size}, {s1.size}, {sel.size}")
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
        raise ValueError("audit scores must be finite")
    return s0, s1, sel


def audit_bound(scores0: np.ndarray, scores1: np.ndarray, select: np.ndarray, *,
                epsilon_claimed: float, delta_claimed: float, mu_claimed: float,
                alpha: float, profile_delta: np.ndarray | None = None) -> AuditBound:
    """Empirical lower bounds on ε and μ from scores on D (``scores0``) and D′ (``scores1``).

    ``select`` marks the selection runs (the rest confirm); run r of D and run r of D′ are in the
    same half. See the module docstring: ε_lb (Clopper–Pearson, split sample) holds at 1 − α/2,
    μ_lb (GDP, Nasr et al. 2023) at 1 − α/2, both together at 1 − α. ``violation`` is
    ε_lb > ε_claimed, or μ_lb > μ_claimed when the ledger claims μ-GDP (a μ_lb alone proves
    nothing against a pure or approximate claim without GDP; it is then only reported), or a
    confirmed event outside the claimed profile ``profile_delta`` (δ on PROFILE_EPSILONS).
    Empty selection or confirmation: ε_lb = 0, μ_lb = NaN, no violation.
    """
    s0, s1, sel = _validate(scores0, scores1, select, alpha)
    n_sel, n_conf = int(sel.sum()), int((~sel).sum())
    if n_sel == 0 or n_conf == 0:
        return AuditBound(0.0, math.nan, math.nan, n_sel, n_conf, math.nan, "none", False)
    a_each = alpha / 4.0  # α/2 per bound, α/4 per Clopper–Pearson side
    delta = float(delta_claimed)

    def eps_fn(k_num: np.ndarray, k_den: np.ndarray, n: int) -> np.ndarray:
        return epsilon_lower_bounds(k_num, k_den, n, delta, a_each)

    def mu_fn(k_num: np.ndarray, k_den: np.ndarray, n: int) -> np.ndarray:
        return gdp_mu_lower_bounds(k_num, k_den, n, a_each)

    side, orient, t = _select(s0[sel], s1[sel], eps_fn)
    k_num, k_den = _confirm_counts(s0[~sel], s1[~sel], side, orient, t)
    eps_lb = max(0.0, float(eps_fn(k_num, k_den, n_conf)[0]))
    excess = [float(profile_excess(k_num, k_den, n_conf, profile_delta, a_each)[0])
              if profile_delta is not None else -math.inf]
    side_g, orient_g, t_g = _select(s0[sel], s1[sel], mu_fn)
    k_num, k_den = _confirm_counts(s0[~sel], s1[~sel], side_g, orient_g, t_g)
    mu_lb = max(0.0, float(mu_fn(k_num, k_den, n_conf)[0]))
    if profile_delta is not None:
        excess.append(float(profile_excess(k_num, k_den, n_conf, profile_delta, a_each)[0]))
    profile_violation = max(excess) > 0
    eps_gdp = gdp_epsilon(mu_lb, delta) if (mu_lb > 0 and 0 < delta < 1) else (
        0.0 if mu_lb == 0 else math.nan)
    violation = eps_lb > float(epsilon_claimed) * (1 + _RTOL) or (
        math.isfinite(mu_claimed) and mu_lb > float(mu_claimed) * (1 + _RTOL)) or profile_violation
    return AuditBound(eps_lb, mu_lb, float(eps_gdp), n_sel, n_conf, t,
                      _describe(side, orient, t), bool(violation), t_g,
                      _describe(side_g, orient_g, t_g), bool(profile_violation))
