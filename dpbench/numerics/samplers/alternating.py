"""The alternating (proximal) sampler with the rejection RGO of Gopi, Lee and Liu (COLT 2022).

Samples π ∝ exp(−E_{i∈[n]} g_i(x) − ψ(x)) with g_i = k·f(·; s_i) (each G_s = k·G_f-Lipschitz) and
ψ(x) = (λ/2)‖x − c‖² + I_K(x) (μ_s-strongly convex with μ_s = λ, or the loss's own modulus).
GLL'22 Theorems 16, 17, Algorithms 1, 2 and Lemmas 22–24 (S1); the exact 𝒢_y draws (S2), the
parameter rule, the pitfall numbers P1–P4, P10, P12 and the measured costs are in docs/rem.md
("Samplers and what is certified", "Exact 𝒢_y draws (S2)", "Pitfalls").

* **Algorithm 1** (Lee–Shen–Tian 2021): y_t = x_{t−1} + √η·ζ, then x_t from the restricted
  Gaussian oracle (RGO) ∝ exp(−E_i g_i(x) − ψ(x) − ‖x − y_t‖²/(2η)).
* **Algorithm 2** (GLL'22, new): the RGO by rejection. Draw x, z iid from
  𝒢_y ∝ exp(−ψ(x) − ‖x − y‖²/(2η)); ρ = 1 + Σ_{α ≥ 1} Π_{i ≤ α}(g_{j_{iα}}(z) − g_{j_{iα}}(x)), the
  loop reaching step α with probability exactly 1/α! (break with probability α/(α + 1)) and fresh
  uniform indices at every α, so E[ρ | x, z] = exp(E g(z) − E g(x)) (Lemma 22); accept x when
  u ≤ ρ/2. The only bias comes from ρ ∉ [0, 2] (counted: the ρ-truncation frequency).
* **S2** exact 𝒢_y = N(m, s²I) truncated to K, 1/s² = λ + 1/η, m = (λc + y/η)s²: on a box,
  coordinate-wise exact truncated normals (Robert 1995 rejection: normal, uniform or
  exponential proposals, each exact); on a ball, rejection of N(m, s²I) (exact; acceptance is high
  because s ≈ √η is tiny and m within O(√η) of K); on R^d a plain Gaussian.
  Gibbs / Langevin approximations are never used (pitfall P4).

Expected cost per outer step (from the loop's stopping probabilities; measured values in
docs/rem.md): e index draws and 2e ≈ 5.44 value queries per proposal, ≈ 2 proposals, ≈ 4e ≈ 10.9
queries per step.

**Parameter rule** (:func:`theory_parameters`, Theorem 17 with our implementable constants c_η,
C_T; docs/rem.md): T₀ = ⌈G_s²/μ_s⌉, then three times δ_in = τ/(2T),
η = min{1/μ_s, 1/(c_η G_s² log(400/δ_in))}, T = ⌈C_T (ημ_s)⁻¹ log((d/μ_s + D₀²)/(η τ/2))⌉.
Everything is computed from public quantities (G_f, k, μ, d, D₀ = diam K, τ): pitfall P2. The
sampler's G_s and μ_s are scaled by k (pitfall P3).

The inner loop is numba-compiled over a problem's per-example loss kernel
(:mod:`dpbench.numerics.kernels`, the generator passed in); :func:`alternating_sample_numpy` is the plain
numpy loop for problems without a kernel (and the benchmark's reference).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit

from ...core.kernel import LossKernel
from ...core.problem import Dataset
from ...core.sets import Ball, BallAt, Box, ConstraintSet
from ...core.time_limit import checkpoint
from ..kernels import kernel_arrays

__all__ = ["SamplerPlan", "theory_parameters", "alternating_sample", "alternating_sample_numpy",
           "gaussian_oracle", "domain_code", "AlternatingStats", "truncnorm_std",
           "truncnorm_std_many", "ball_gaussian_sampler"]

#: Domain codes of the compiled 𝒢_y sampler.
RD, BOX, BALL = 0, 1, 2
#: Outer steps per compiled call (the deadline is checked between calls).
_CHUNK = 2000
#: Gaussian proposals per ball draw before the sampler gives up (a mis-specified η).
MAX_BALL_PROPOSALS = 10_000_000


@dataclass(frozen=True)
class SamplerPlan:
    """The sampler's public parameters (Theorem 17 rule): step η, theory steps T, accuracy τ."""

    eta: float
    steps_theory: int
    tau: float
    g_s: float
    mu_s: float
    c_eta: float
    c_t: float

    @property
    def eta_g2(self) -> float:
        """η·G_s², the quantity that controls the RGO bias (Lemma 24; docs/rem.md)."""
        return self.eta * self.g_s ** 2


def theory_parameters(g_s: float, mu_s: float, d: int, d0: float, tau: float, *,
                      c_eta: float = 64.0, c_t: float = 1.0, rounds: int = 3) -> SamplerPlan:
    """η and T of Theorem 17 by our fixed-point rule (docs/rem.md), public inputs only."""
    if not (g_s > 0 and mu_s > 0 and tau > 0):
        raise ValueError(f"need G_s, mu_s, tau > 0, got {g_s!r}, {mu_s!r}, {tau!r}")
    t = math.ceil(g_s ** 2 / mu_s)
    eta = 1.0 / mu_s
    for _ in range(rounds):
        d_in = tau / (2.0 * t)
        eta = min(1.0 / mu_s, 1.0 / (c_eta * g_s ** 2 * math.log(400.0 / d_in)))
        t = math.ceil(c_t / (eta * mu_s) * math.log((d / mu_s + d0 ** 2) / (eta * tau / 2.0)))
    return SamplerPlan(eta, max(int(t), 1), tau, g_s, mu_s, c_eta, c_t)


# --- exact truncated normals (Robert 1995), compiled ------------------------------------------
@njit(cache=True)
def _tn_right(a, b, rng):  # type: ignore[no-untyped-def]
    """Standard normal on [a, b], 0 ≤ a < b ≤ ∞: uniform or exponential proposal (both exact)."""
    w = b - a
    if a * w + 0.5 * w * w <= 1.0:
        while True:
            z = a + w * rng.random()
            if rng.random() <= math.exp(0.5 * (a * a - z * z)):
                return z
    lam = 0.5 * (a + math.sqrt(a * a + 4.0))
    while True:
        z = a - math.log(1.0 - rng.random()) / lam
        if z <= b and rng.random() <= math.exp(-0.5 * (z - lam) * (z - lam)):
            return z


@njit(cache=True)
def truncnorm_std(a, b, rng):  # type: ignore[no-untyped-def]
    """An exact draw of the standard normal restricted to [a, b] (a < b, infinite ends allowed)."""
    if a >= 0.0:
        return _tn_right(a, b, rng)
    if b <= 0.0:
        return -_tn_right(-b, -a, rng)
    if b - a >= 2.5:
        while True:
            z = rng.standard_normal()
            if a <= z <= b:
                return z
    while True:
        z = a + (b - a) * rng.random()
        if rng.random() <= math.exp(-0.5 * z * z):
            return z


@njit(cache=True)
def truncnorm_std_many(a, b, rng):  # type: ignore[no-untyped-def]
    """Independent exact draws of the standard normal restricted to [a[i], b[i]], one per entry
    (:func:`truncnorm_std` in order: entry i is the draw a lone call would make next)."""
    out = np.empty(a.shape[0])
    for i in range(a.shape[0]):
        out[i] = truncnorm_std(a[i], b[i], rng)
    return out


@njit(cache=True)
def _gaussian_oracle(m, s, kind, half, radius, ball_c, rng, out):  # type: ignore[no-untyped-def]
    """Writes an exact draw of N(m, s²I) truncated to K into ``out``; returns the proposals used
    (−1 when a ball draw gave up after MAX_BALL_PROPOSALS)."""
    p = m.shape[0]
    if kind == BOX:
        for j in range(p):
            out[j] = m[j] + s * truncnorm_std((-half - m[j]) / s, (half - m[j]) / s, rng)
            out[j] = min(max(out[j], -half), half)
        return 1
    for tries in range(1, MAX_BALL_PROPOSALS + 1):
        sq = 0.0
        for j in range(p):
            out[j] = m[j] + s * rng.standard_normal()
            dj = out[j] - ball_c[j]
            sq += dj * dj
        if kind == RD or sq <= radius * radius:
            return tries
    return -1


@njit(cache=False)
def _chain(loss, X, y, prm, k, lam, center, eta, kind, half, radius, ball_c, x, steps, rng,
           counts):  # type: ignore[no-untyped-def]
    """``steps`` outer steps of Algorithm 1 with Algorithm 2's RGO, from ``x`` (updated in place).

    counts: [value queries, proposals, ρ-truncations (ρ < 0 or ρ > 2), index draws, failures]."""
    n = X.shape[0]
    p = x.shape[0]
    s = 1.0 / math.sqrt(lam + 1.0 / eta)
    sq_eta = math.sqrt(eta)
    m = np.empty(p)
    xp = np.empty(p)
    zp = np.empty(p)
    for _ in range(steps):
        for j in range(p):
            yj = x[j] + sq_eta * rng.standard_normal()
            m[j] = (lam * center[j] + yj / eta) * s * s
        while True:
            counts[1] += 1
            if _gaussian_oracle(m, s, kind, half, radius, ball_c, rng, xp) < 0:
                counts[4] += 1
                return
            if _gaussian_oracle(m, s, kind, half, radius, ball_c, rng, zp) < 0:
                counts[4] += 1
                return
            rho = 1.0
            alpha = 1
            while True:
                prod = 1.0
                for _i in range(alpha):
                    idx = rng.integers(0, n)
                    prod *= k * (loss(zp, X, y, prm, idx) - loss(xp, X, y, prm, idx))
                counts[0] += 2 * alpha
                counts[3] += alpha
                rho += prod
                if rng.random() < alpha / (alpha + 1.0):
                    break
                alpha += 1
            if rho < 0.0 or rho > 2.0:
                counts[2] += 1
            if rng.random() <= 0.5 * rho:
                break
        for j in range(p):
            x[j] = xp[j]


@njit(cache=False)
def _chains(loss, X, y, prm, k, lam, center, eta, kind, half, radius, ball_c, xs, steps, rng,
            counts):  # type: ignore[no-untyped-def]
    """:func:`_chain` for every row of ``xs`` in turn (``steps`` steps each, in place): one
    compiled call advances many independent chains (stops at the first failure)."""
    for r in range(xs.shape[0]):
        _chain(loss, X, y, prm, k, lam, center, eta, kind, half, radius, ball_c, xs[r], steps,
               rng, counts)
        if counts[4]:
            return


def domain_code(constraint: ConstraintSet, p: int) -> tuple[int, float, float, np.ndarray] | None:
    """(kind, box half-width, ball radius, ball centre) of K for the compiled 𝒢_y, or ``None``."""
    if isinstance(constraint, Box):
        return BOX, constraint.half_width(p), math.inf, np.zeros(p)
    if isinstance(constraint, Ball):
        return BALL, math.inf, constraint.radius, np.zeros(p)
    if isinstance(constraint, BallAt):
        return BALL, math.inf, constraint.radius, constraint.center(p)
    return None


def gaussian_oracle(m: np.ndarray, s: float, constraint: ConstraintSet,
                    rng: np.random.Generator) -> np.ndarray:
    """An exact draw of 𝒢 = N(m, s²I) truncated to K (S2), K a box or a ball."""
    m = np.ascontiguousarray(m, dtype=float)
    code = domain_code(constraint, m.size)
    if code is None:
        raise ValueError(f"no exact truncated-Gaussian sampler for {type(constraint).__name__}")
    out = np.empty_like(m)
    if _gaussian_oracle(m, float(s), code[0], code[1], code[2], code[3], rng, out) < 0:
        raise RuntimeError("gaussian_oracle: ball rejection gave up (negligible mass)")
    return out


@dataclass
class AlternatingStats:
    """Counters of a run (summed over chains): value queries, proposals, ρ-truncations, steps."""

    queries: int = 0
    proposals: int = 0
    truncations: int = 0
    index_draws: int = 0
    steps: int = 0

    @property
    def queries_per_step(self) -> float:
        return self.queries / max(self.steps, 1)

    @property
    def proposals_per_step(self) -> float:
        return self.proposals / max(self.steps, 1)

    @property
    def truncation_rate(self) -> float:
        """Fraction of proposals whose ρ fell outside [0, 2] (the RGO's only bias, Lemma 22)."""
        return self.truncations / max(self.proposals, 1)

    def as_info(self) -> dict[str, float]:
        return {"queries": self.queries, "proposals": self.proposals,
                "rho_truncations": self.truncations, "steps": self.steps,
                "queries_per_step": self.queries_per_step,
                "proposals_per_step": self.proposals_per_step,
                "truncation_rate": self.truncation_rate}


def alternating_sample(kernel: LossKernel, data: Dataset, *, k: float, lam: float,
                       center: np.ndarray, constraint: ConstraintSet, eta: float, steps: int,
                       x0: np.ndarray, rng: np.random.Generator,
                       chains: int = 1) -> tuple[np.ndarray, AlternatingStats]:
    """Run ``chains`` independent chains of ``steps`` outer steps from ``x0`` (compiled loop).

    Target ∝ exp(−k·F(x; D) − (λ/2)‖x − c‖²) on K, F the average of the kernel's per-example loss;
    returns the final states (chains, p) and the summed counters. One compiled call
    (:func:`_chains`) advances a block of ``max(1, _CHUNK // steps)`` chains by up to ``_CHUNK``
    steps each, chain after chain (the deadline is checked between calls); every chain runs
    :func:`_chain`'s steps on its own fresh draws of ``rng``, so the chains are i.i.d. (a single
    chain draws exactly what it did as a lone run).
    """
    code = domain_code(constraint, data.p)
    if code is None:
        raise ValueError(f"alternating sampler: unsupported constraint {type(constraint).__name__}")
    X, y = kernel_arrays(data)
    center = np.ascontiguousarray(center, dtype=float)
    out = np.empty((chains, data.p))
    out[:] = np.asarray(x0, dtype=float)
    counts = np.zeros(5, dtype=np.int64)
    per_call = max(1, _CHUNK // max(steps, 1))
    for lo in range(0, chains, per_call):
        block = out[lo:lo + per_call]
        for done in range(0, steps, _CHUNK):
            _chains(kernel.loss, X, y, kernel.prm, float(k), float(lam), center, float(eta),
                    code[0], float(code[1]), float(code[2]), code[3], block,
                    min(_CHUNK, steps - done), rng, counts)
            if counts[4]:
                raise RuntimeError("alternating sampler: a ball draw of 𝒢_y gave up; η too large?")
            checkpoint()
    stats = AlternatingStats(int(counts[0]), int(counts[1]), int(counts[2]), int(counts[3]),
                             steps * chains)
    return out, stats


def alternating_sample_numpy(loss_row: Callable[[np.ndarray, int], float], n: int, *, k: float,
                             lam: float, center: np.ndarray, constraint: ConstraintSet,
                             eta: float, steps: int, x0: np.ndarray,
                             rng: np.random.Generator) -> tuple[np.ndarray, AlternatingStats]:
    """The same chain as a plain numpy/python loop over ``loss_row(x, i)`` = f(x; s_i) (problems
    without a compiled kernel; the benchmark's reference). Same law, a different random stream."""
    x = np.array(x0, dtype=float)
    center = np.asarray(center, dtype=float)
    s = 1.0 / math.sqrt(lam + 1.0 / eta)
    st = AlternatingStats(steps=steps)
    for t in range(steps):
        m = (lam * center + (x + math.sqrt(eta) * rng.standard_normal(x.size)) / eta) * s * s
        while True:
            st.proposals += 1
            xp = gaussian_oracle(m, s, constraint, rng)
            zp = gaussian_oracle(m, s, constraint, rng)
            rho, alpha = 1.0, 1
            while True:
                idx = rng.integers(0, n, size=alpha)
                rho += float(np.prod([k * (loss_row(zp, int(i)) - loss_row(xp, int(i)))
                                      for i in idx]))
                st.queries += 2 * alpha
                st.index_draws += alpha
                if rng.random() < alpha / (alpha + 1.0):
                    break
                alpha += 1
            st.truncations += int(rho < 0.0 or rho > 2.0)
            if rng.random() <= 0.5 * rho:
                break
        x = xp
        if t % 256 == 0:
            checkpoint()
    return x, st


# --- S2 on a ball, exact fallback (t along q, r ⊥ q) --------------------------------------------
def _log_t_marginal(t: np.ndarray, a: float, m: float, radius: float, d: int) -> np.ndarray:
    """log of N(t; m, 1/a)·F_{χ²_{d−1}}(a(R² − t²)): the marginal of t = ⟨x, q/‖q‖⟩ (S2)."""
    from scipy import stats

    v = np.maximum(a * (radius * radius - t * t), 0.0)
    with np.errstate(divide="ignore"):
        return -0.5 * a * (t - m) ** 2 + stats.chi2.logcdf(v, d - 1)


def _t_grid(a: float, m: float, radius: float, d: int, points: int = 4097,
            rounds: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A grid over the bulk of the t-marginal (refined until ≥ 256 cells cover the region where
    the log-density is within 60 of its maximum) and the normalised CDF on it."""
    lo, hi = -radius, radius
    for _ in range(rounds):
        grid = np.linspace(lo, hi, points)
        h = _log_t_marginal(grid, a, m, radius, d)
        keep = np.flatnonzero(h >= h.max() - 60.0)
        i0, i1 = max(keep[0] - 1, 0), min(keep[-1] + 1, points - 1)
        if i1 - i0 >= 256:
            break
        lo, hi = grid[i0], grid[i1]
    dens = np.exp(h - h.max())
    cdf = np.concatenate(([0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(grid))))
    return grid, cdf / cdf[-1]


def ball_gaussian_sampler(q: np.ndarray, a: float, radius: float
                          ) -> Callable[[np.random.Generator], np.ndarray]:
    """Draws of ∝ exp(−(a/2)‖x − q‖²) on B(0, R) ⊂ R^d for any q (the [derived] exact fallback of
    docs/rem.md, S2): x = t·u + r·w with u = q/‖q‖, w uniform on the unit sphere of u^⊥; t from its
    1-D marginal N(t; ‖q‖, 1/a)·F_{χ²_{d−1}}(a(R² − t²)) by inverse CDF on an adaptive grid (4097
    points refined onto the bulk, trapezoid rule: accurate to quadrature error), then
    a·r² | t ~ χ²_{d−1} truncated to [0, a(R² − t²)] by its exact ppf.

    Unlike rejection from N(q, I/a) it works when ‖q‖ ≫ R (REM-ERM on a ball, where the Gaussian
    mass inside the ball is negligible). The draw function carries its vectorised form
    ``draw.many(rng, size)`` (:func:`dpbench.core.exact_samplers.draw_many`): the same steps on
    arrays (in d ≥ 2 written out twice: numpy's row-wise dot products and norms round differently
    from the 1-D ones, and a lone draw must stay what it was)."""
    from scipy import stats

    q = np.asarray(q, dtype=float)
    d = q.size
    m = float(np.linalg.norm(q))
    u = q / m if m > 0 else np.eye(d)[0]
    if d == 1:
        sd = 1.0 / math.sqrt(a)
        lo, hi = (-radius - q[0]) / sd, (radius - q[0]) / sd

        def many_1d(rng: np.random.Generator, size: int) -> np.ndarray:
            z = stats.truncnorm.rvs(lo, hi, size=size, random_state=rng)
            return (q[0] + sd * np.asarray(z, dtype=float)).reshape(size, 1)

        def draw_1d(rng: np.random.Generator) -> np.ndarray:
            return many_1d(rng, 1)[0]

        draw_1d.many = many_1d  # type: ignore[attr-defined]
        return draw_1d
    grid, cdf = _t_grid(a, m, radius, d)

    def draw(rng: np.random.Generator) -> np.ndarray:
        t = float(np.interp(rng.random(), cdf, grid))
        v = max(a * (radius * radius - t * t), 0.0)
        c = float(stats.chi2.cdf(v, d - 1))
        w01 = rng.random()
        r2 = (float(stats.chi2.ppf(w01 * c, d - 1)) if c > 1e-280
              else v * w01 ** (2.0 / (d - 1))) / a
        g = rng.standard_normal(d)
        g -= (g @ u) * u
        g /= np.linalg.norm(g)
        x = t * u + math.sqrt(max(r2, 0.0)) * g
        nx = float(np.linalg.norm(x))
        return x if nx <= radius else x * (radius / nx)

    def many(rng: np.random.Generator, size: int) -> np.ndarray:
        t = np.interp(rng.random(size), cdf, grid)
        v = np.maximum(a * (radius * radius - t * t), 0.0)
        c = stats.chi2.cdf(v, d - 1)
        w01 = rng.random(size)
        ok = c > 1e-280
        r2 = v * w01 ** (2.0 / (d - 1))
        r2[ok] = stats.chi2.ppf(w01[ok] * c[ok], d - 1)
        r2 /= a
        g = rng.standard_normal((size, d))
        g -= (g @ u)[:, None] * u
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        x = t[:, None] * u + np.sqrt(np.maximum(r2, 0.0))[:, None] * g
        nx = np.linalg.norm(x, axis=1)
        out = nx > radius
        x[out] *= (radius / nx[out])[:, None]
        return x

    draw.many = many  # type: ignore[attr-defined]
    return draw
