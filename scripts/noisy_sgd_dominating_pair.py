#!/usr/bin/env python
"""Which pair dominates one step of batch-1 DP-SGD under replace-one neighbours?

``python scripts/noisy_sgd_dominating_pair.py [--accountant-table]`` (≈ 1–2 min on one core;
the accountant table adds a few minutes). Prints Markdown; docs/bst14.md, "Which accountant is
certified (replace-one, batch 1)", explains the question and quotes the output.

One step of BST14's Algorithm 1 in units of nL (the ball of radius nL holds every
n·clip_L(∇ℓ)): noise s = σ/(nL) = 2z, sampling rate q = 1/n; with all common rows at a (the worst
case, by joint convexity) the two output laws are

    P = q·N(b) + (1 − q)·N(a),   Q = q·N(b′) + (1 − q)·N(a),   a, b, b′ in the unit disk.

For many configurations (a, b, b′), q ∈ {1/10, 1/100, 1/1000}, s ∈ {0.5, 1, 2, 5, 20} and
γ = e^ε (ε from −3 to 8, so γ < 1 too) we compute H_γ(P‖Q) = ∫ (p − γq)₊ with
:func:`dpbench.privacy.hockey_stick.mixture_hockey_stick` (exact in 1-D, a trapezoid rule over
the second coordinate in 2-D whose error we estimate by halving its grid) and compare with the
candidate pairs:

(i)   dp-accounting's PLD pair for ``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` under
      REPLACE_ONE: (1 − q)N(0, z²) + qN(∓1, z²), i.e. a = 0, b = −2, b′ = 2 in our units
      (dp-accounting reads z as σ over the per-record norm bound, we as σ over twice it);
(ii)  "remove with sensitivity 2": R = (qN(2) + (1 − q)N(0), N(0));
(iii) the symmetric pair (1 − q)N(0) + qN(1) vs (1 − q)N(0) + qN(−1), which is dp-accounting's
      REPLACE_ONE pair at noise multiplier 2z;
(iv)  P*: the pair whose profile is R's for γ ≥ 1 and the swapped R′ = (N(0), qN(2) + (1 − q)N(0))
      for γ < 1 (the pair :mod:`dpbench.privacy.accountant` composes).

A candidate dominates if H(config) ≤ H(candidate) everywhere. Every pair has H_γ ≥ (1 − γ)₊, so
we compare the excesses: we report max [H(config) − (1 − γ)₊]/[H(candidate) − (1 − γ)₊] (where
either excess is above rounding) and max H(config) − H(candidate), with the configuration
attaining them, and count the entries whose ratio exceeds 1 + 1e-9.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from scipy.stats import norm

from dpbench.privacy.hockey_stick import mixture_hockey_stick

QS = (0.1, 0.01, 0.001)
SS = (0.5, 1.0, 2.0, 5.0, 20.0)
EPSILONS = np.array([-3, -1, -0.3, -0.1, -0.01, 0, 0.01, 0.05, 0.1, 0.3, 1, 2, 4, 8], dtype=float)
GAMMAS = np.exp(EPSILONS)
#: Every pair has H_γ ≥ (1 − γ)₊; ratios compare the excess H − (1 − γ)₊ of config and candidate.
TRIVIAL = np.maximum(1.0 - GAMMAS, 0.0)
#: Ratios are taken where either excess exceeds this: 1e-30 for γ ≥ 1 (H is computed to a
#: relative precision there), 1e-10 for γ < 1 (the excess is a difference of numbers near 1 − γ,
#: good to ~1e-14 absolute).
FLOOR = np.where(GAMMAS >= 1, 1e-30, 1e-10)
RATIO_FLOOR = 1e-30
#: A ratio above 1 + this counts as a violation (rounding of the 2-D rule is ~1e-13).
VIOLATION = 1e-9
N_RANDOM_PLANE = 14
N_RANDOM_LINE = 12
SEED = 20240611


def _unit(deg: float) -> tuple[float, float]:
    return (math.cos(math.radians(deg)), math.sin(math.radians(deg)))


def configurations() -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(label, a, b, b′): structured ones, then random ones (in the disk or on its circle)."""
    e1, m1 = (1.0, 0.0), (-1.0, 0.0)
    out = []
    for label, a in [("0", (0, 0)), ("b′ = −e1", m1), ("b = e1", e1), ("0.5e1", (0.5, 0)),
                     ("−0.5e1", (-0.5, 0)), ("e2", (0, 1)), ("0.5e2", (0, 0.5)),
                     ("∠30°", _unit(30)), ("∠60°", _unit(60)), ("∠120°", _unit(120)),
                     ("∠150°", _unit(150))]:
        out.append((f"b=e1, b′=−e1, a={label}", a, e1, m1))
    for deg in (90, 150, 179):
        bp = _unit(deg)
        for label, a in [("b′", bp), ("b", e1), ("0", (0, 0)), ("−e1", m1)]:
            out.append((f"b=e1, b′=∠{deg}°, a={label}", a, e1, bp))
    for label, b, bp, a in [("b=0.6e1, b′=−0.6e1, a=b′", (0.6, 0), (-0.6, 0), (-0.6, 0)),
                            ("b=0.6e1, b′=−0.6e1, a=−e1", (0.6, 0), (-0.6, 0), m1),
                            ("b=e1, b′=0, a=0", e1, (0, 0), (0, 0)),
                            ("b=e1, b′=0, a=−e1", e1, (0, 0), m1),
                            ("b=e1, b′=−0.9e1, a=b′", e1, (-0.9, 0), (-0.9, 0))]:
        out.append((label, a, b, bp))
    rng = np.random.default_rng(SEED)
    for i in range(N_RANDOM_PLANE):
        pts = rng.normal(size=(3, 2))
        radius = np.ones(3) if i % 2 else np.sqrt(rng.uniform(size=3))
        pts = pts / np.linalg.norm(pts, axis=1)[:, None] * radius[:, None]
        out.append((f"random plane #{i}", *pts))
    for i in range(N_RANDOM_LINE):
        x = rng.uniform(-1, 1, size=3)
        if i % 2:
            x[1:] = [1.0, -1.0]
        out.append((f"random line #{i}", (x[0], 0.0), (x[1], 0.0), (x[2], 0.0)))
    return [(label, *(np.asarray(v, dtype=float) for v in pts)) for label, *pts in out]


def line(a: float, b: float, bp: float, q: float, s: float) -> np.ndarray:
    return mixture_hockey_stick([a], [b], [bp], q, s, GAMMAS)


def candidates(q: float, s: float) -> dict[str, np.ndarray]:
    remove = line(0, 2, 0, q, s)       # R  = (qN(2) + (1 − q)N(0), N(0))
    add = line(0, 0, 2, q, s)          # R′ = (N(0), qN(2) + (1 − q)N(0))
    return {
        "(i) REPLACE_ONE at z": line(0, -2, 2, q, s),
        "(ii) R (remove, Δ = 2)": remove,
        "(iii) symmetric ±1": line(0, 1, -1, q, s),
        "(iv) P* (R for γ ≥ 1, R′ for γ < 1)": np.where(GAMMAS >= 1, remove, add),
    }


def gaussian_delta(mu: float, eps: np.ndarray) -> np.ndarray:
    """Balle and Wang 2018, Thm 8: H_{e^ε}(N(μ, 1) ‖ N(0, 1))."""
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def accuracy_checks() -> list[str]:
    eps = np.array([-3, -1, -0.1, 0, 0.01, 0.5, 1, 3, 10], dtype=float)
    worst_1d = worst_2d = worst_closed = 0.0
    for s in SS:
        for d in (0.1, 1.0, 2.0):
            h = mixture_hockey_stick([0.0], [d], [0.0], 1.0, s, np.exp(eps))
            worst_1d = max(worst_1d, float(np.max(np.abs(h - gaussian_delta(d / s, eps)))))
        # the 2-D path (a off the line through b, b′; q = 1 so a carries no weight)
        h = mixture_hockey_stick([0.0, 0.7], [1.0, 0.0], [-1.0, 0.0], 1.0, s, np.exp(eps))
        worst_2d = max(worst_2d, float(np.max(np.abs(h - gaussian_delta(2 / s, eps)))))
        for q in QS:  # γ ≥ 1: H(R) = q·δ_Gauss at log(1 + (γ − 1)/q) (advanced joint convexity)
            pos = EPSILONS >= 0
            closed = q * gaussian_delta(2 / s, np.log1p(np.expm1(EPSILONS[pos]) / q))
            h = line(0, 2, 0, q, s)[pos]
            ok = closed > RATIO_FLOOR
            worst_closed = max(worst_closed, float(np.max(np.abs(h[ok] / closed[ok] - 1))))
    return [
        "| check | max error |",
        "|---|---|",
        f"| 1-D integrator vs Balle–Wang closed form (μ in [0.005, 4]) | {worst_1d:.1e} (abs.) |",
        f"| 2-D integrator (q = 1, a off the line) vs closed form | {worst_2d:.1e} (abs.) |",
        f"| H(R), γ ≥ 1, vs q·δ_Gauss(2/s, log(1 + (γ−1)/q)) | {worst_closed:.1e} (rel.) |",
    ]


def sweep() -> tuple[dict, dict, float, int]:
    """Per candidate and side of γ = 1: max ratio and difference (with where), violations; and
    per configuration its largest excess ratio to P*."""
    configs = configurations()
    best: dict[tuple[str, str], list] = {}
    closest: dict[str, tuple] = {}
    worst_err = 0.0
    count = 0
    for label, a, b, bp in configs:
        for q in QS:
            for s in SS:
                h, err = mixture_hockey_stick(a, b, bp, q, s, GAMMAS, error=True)
                count += h.size
                for name, c in candidates(q, s).items():
                    # Compare the parts above the bound (1 − γ)₊ that every pair meets (for γ < 1
                    # both H are close to 1 − γ and their plain ratio is close to 1 whatever the
                    # pair); below FLOOR the parts are rounding.
                    hx, cx = h - TRIVIAL, c - TRIVIAL
                    big = np.maximum(hx, cx) > FLOOR
                    with np.errstate(divide="ignore", invalid="ignore"):
                        ratio = np.where(big, hx / cx, 0.0)
                        # with the 2-D rule's error estimate added (0 on a line)
                        ratio_hi = np.where(big, (hx + err) / cx, 0.0)
                    diff = h - c
                    for side, mask in (("all", np.ones_like(big)), ("γ ≥ 1", GAMMAS >= 1),
                                       ("γ < 1", GAMMAS < 1)):
                        i = int(np.argmax(np.where(mask, ratio, -np.inf)))
                        j = int(np.argmax(np.where(mask, diff, -np.inf)))
                        entry = best.setdefault((name, side), [-np.inf, None, -np.inf, None, 0])
                        if ratio[i] > entry[0]:
                            entry[0:2] = ratio[i], (label, q, s, EPSILONS[i],
                                                    float(err[i] / max(c[i], 1e-300)))
                        if diff[j] > entry[2]:
                            entry[2:4] = diff[j], (label, q, s, EPSILONS[j])
                        entry[4] += int(np.sum(mask & (ratio_hi > 1 + VIOLATION)))
                    if name.startswith("(iv)"):  # (at γ = 1 every ‖b − b′‖ = 2 ties: H = TV)
                        worst_err = max(worst_err, float(np.max(np.where(
                            c > RATIO_FLOOR, err / np.maximum(c, 1e-300), 0.0))))
                        i = int(np.argmax(np.where(GAMMAS != 1, ratio, -np.inf)))
                        if label not in closest or ratio[i] > closest[label][0]:
                            closest[label] = (ratio[i], q, s, EPSILONS[i])
    return best, closest, worst_err, count


def fmt_ratio(r: float) -> str:
    return "∞" if not np.isfinite(r) else f"{r:.6g} (r − 1 = {r - 1:+.1e})"


def fmt_where(w: tuple) -> str:
    return f"{w[0]}; q = {w[1]:g}, s = {w[2]:g}, ε = {w[3]:g}"


def accountant_table() -> list[str]:
    """ε(RDP) vs ε(PLD of P*) at the z values of docs/bst14.md, and the calibrated z."""
    import dp_accounting
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
    from scipy.special import logsumexp

    from dpbench.algorithms.noisy_sgd import paper_noise_multiplier
    from dpbench.privacy.accountant import (
        calibrate_noisy_sgd,
        calibrate_noisy_sgd_pld,
        dominating_step_pmf,
        noisy_sgd_epsilon,
        noisy_sgd_epsilon_pld,
        pld_interval,
        rdp_orders,
    )

    def dpa(relation, mult, q, steps, delta, interval):
        acc = dp_accounting.pld.PLDAccountant(relation, value_discretization_interval=interval)
        acc.compose(dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(mult)), steps))
        return acc.get_epsilon(delta)

    def rdp_of_star(z, n, steps, delta):
        # Rényi divergences of P* itself (from its pessimistic one-step PLD), composed and
        # converted like any RDP: the same pair as the PLD accountant, another conversion.
        interval = pld_interval(z, n, steps)
        lower, probs, _ = dominating_step_pmf(z, n, interval)
        losses = (lower + np.arange(probs.size)) * interval
        orders = np.array([a for a in rdp_orders() if a > 1])
        rdp = np.array([logsumexp((a - 1) * losses, b=probs) / (a - 1) for a in orders])
        return compute_epsilon(orders, steps * rdp, delta)[0]

    rows = [
        ("| n | target ε | δ | z (paper) | ε RDP | ε PLD | z needed, RDP | z needed, PLD "
         "| at RDP's z: ε PLD | ε RDP of P* | dp-acc. ADD_OR_REMOVE / REPLACE_ONE(2z) |"),
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    cases = [(100, 1.0, 1e-4), (100, 1.0, 1e-6), (1000, 1.0, 1e-6), (10_000, 1.0, 1e-6),
             (10_000, 1.0, 1e-8), (1000, 0.1, 1e-6), (1000, 0.5, 1e-6), (1000, 2.0, 1e-6),
             (1000, 4.0, 1e-6)]
    for n, target, delta in cases:
        t0 = time.perf_counter()
        steps = n * n - 1
        zp = paper_noise_multiplier(n, target, delta)
        z_rdp = calibrate_noisy_sgd(target, delta, n, steps)
        z_pld = calibrate_noisy_sgd_pld(target, delta, n, steps)
        q = 1.0 / n
        if n <= 1000:  # dp-accounting's own window is too wide for T = 10⁸
            interval = 1e-5 if n <= 100 else 2e-6
            relation = dp_accounting.NeighboringRelation
            others = (f"{dpa(relation.ADD_OR_REMOVE_ONE, z_rdp, q, steps, delta, interval):.4f} / "
                      f"{dpa(relation.REPLACE_ONE, 2 * z_rdp, q, steps, delta, interval):.4f}")
        else:
            others = "—"
        eps_rdp = noisy_sgd_epsilon(zp, n, steps, delta)
        rows.append(
            f"| {n} | {target:g} | {delta:g} | {zp:.1f} | {eps_rdp:.4f} "
            f"| {noisy_sgd_epsilon_pld(zp, n, steps, delta):.4f} | {z_rdp:.3f} | {z_pld:.3f} "
            f"| {noisy_sgd_epsilon_pld(z_rdp, n, steps, delta):.4f} "
            f"| {rdp_of_star(z_rdp, n, steps, delta):.4f} | {others} |")
        print(f"  ({n}, {target}, {delta}) done in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--accountant-table", action="store_true",
                        help="also tabulate ε(RDP) vs ε(PLD) and the calibrated z (a few minutes)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    lines = ["## Integrator accuracy", "", *accuracy_checks(), ""]
    best, closest, worst_err, count = sweep()
    n_cfg = len(configurations())
    lines += [
        (f"## Dominance sweep ({n_cfg} configurations × {len(QS)} q × {len(SS)} s × "
         f"{len(EPSILONS)} ε = {count} values of H)"), "",
        f"Largest estimated 2-D integration error relative to H(P*): {worst_err:.1e}.",
        (f"Violations: entries whose excess ratio, with the 2-D error estimate added to "
         f"H(config), exceeds 1 + {VIOLATION:g}."), "",
        ("| candidate | side | max excess ratio | attained at | violations "
         "| max H(config) − H(cand.) | attained at |"),
        "|---|---|---|---|---|---|---|"]
    for (name, side), (r, wr, d, wd, nviol) in best.items():
        lines.append(f"| {name} | {side} | {fmt_ratio(r)} | {fmt_where(wr)} | {nviol} "
                     f"| {d:.3g} | {fmt_where(wd)} |")
    lines += ["", ("Configurations closest to P* (largest excess ratio to P* over q, s and ε ≠ 0; "
                   "at ε = 0 every configuration with ‖b − b′‖ = 2 ties, H being q·TV):"), "",
              "| configuration | max excess ratio to P* | at |", "|---|---|---|"]
    for label, (r, q, s, e) in sorted(closest.items(), key=lambda kv: -kv[1][0])[:14]:
        lines.append(f"| {label} | {fmt_ratio(r)} | q = {q:g}, s = {s:g}, ε = {e:g} |")
    if args.accountant_table:
        lines += ["", "## ε(RDP) vs ε(PLD of P*), T = n² − 1", "", *accountant_table()]
    print("\n".join(lines))
    print(f"\n({time.perf_counter() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
