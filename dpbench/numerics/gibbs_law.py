"""Exact output laws of the exponential mechanism's exact samplers, and their privacy loss.

The exact ``"gibbs"`` samplers of :mod:`dpbench.core.exact_samplers` draw θ with density

    π_D(θ) = exp(−k·Σᵢ ℓ(θ; dᵢ)) / Z_D   on a region ⊆ C        (BST14 Algorithm 2)

(the exponential mechanism, the GTU Gibbs sampler with k = β/n, one round of the iterated
exponential mechanism, the second step of localisation). For replace-one neighbours D, D′ whose
row 0 is z, z′ the log density ratio is −k(ℓ(θ; z) − ℓ(θ; z′)) − log Z_D + log Z_D′: closed form up
to the two normalising constants. Two routes compute them [derived]:

**Tilted balls.** On LB-Lin (ℓ = −⟨θ, d⟩) and on the isotropic quadratics ½‖θ − d‖² (LB-Quad,
F1 mean estimation) on C = B(0, R), Σᵢ ℓ = (n·a/2)‖θ‖² − ⟨θ, s⟩ + const with s = Σᵢ dᵢ and a = 0
or 1, so π_D ∝ exp(−(A/2)‖θ‖² + ⟨θ, B⟩) on the ball with A = k·n·a, B = k·s (a von Mises–Fisher
lift when A = 0, a truncated Gaussian N(B/A, I/A) otherwise). With B − B′ = k(z − z′) along the
unit vector u:

* log π_D/π_D′ = ⟨θ, B − B′⟩ − log Z(B) + log Z(B′), linear in θ, so the ε of δ = 0 is
  R‖B − B′‖ + |log Z(B) − log Z(B′)| (the supremum over the ball is at ±R·u);
* Z(B) = ∫ e^{−(A/2)t² + ‖B‖t}·V_{p−1}(√(R² − t²)) dt over t ∈ [−R, R] (slices orthogonal to B),
  V_m(ρ) = ∫_{‖x‖≤ρ} e^{−(A/2)‖x‖²} dx = (2π/A)^{m/2}·P(m/2, Aρ²/2) (P the regularised lower
  incomplete gamma function; π^{m/2}ρ^m/Γ(m/2 + 1) when A = 0), a 1-D quadrature in t = R cos φ;
  closed forms at p = 1 (the interval integral below) and A = 0 (Z = (2πR/‖B‖)^{p/2}·I_{p/2}(‖B‖R),
  the check of the tests);
* the privacy loss depends on t = ⟨θ, u⟩ only, and B, B′ have the same component b⊥ orthogonal
  to u, so ε(δ) is that of the two laws of t (sufficient statistic): density
  ∝ e^{−(A/2)t² + ⟨B, u⟩t}·S(√(R² − t²)) with S(ρ) = ∫_{‖x‖≤ρ} e^{−(A/2)‖x‖² + ⟨x, b⊥⟩} dx over
  the (p − 1)-ball, the same function for D and D′: S = 1 at p = 1, and at p = 2
  S(ρ) = ∫_{−ρ}^{ρ} e^{−(A/2)x² + |b⊥|x} dx in closed form (:func:`log_tilted_interval`, stable
  for every A ≥ 0). So δ > 0 is computed for p ≤ 2 (``None`` above).

**One dimension.** For p = 1 any problem's law is exp(−k·Σᵢ ℓ(θ; dᵢ)) on an interval, normalised by
adaptive quadrature of ``problem.loss`` (:func:`dpbench.privacy.exact_loss.normalised_law_1d`):
the route for the problems without a tilted-ball form, and an independent check of it.

:func:`gibbs_epsilon` and :func:`gibbs_log_density_ratio` choose the route; both return ``None``
where neither applies (p ≥ 2 without the tilted-ball form, a region other than C).

**The Rashomon law** of F1 mean estimation (GTU A6), ∝ exp(−β·max{½‖θ − d̄‖², ψ}) on the ball, is
:class:`RashomonBall`: its normaliser is a radial integral (the fraction of each sphere around d̄
inside C in closed form) and its log density ratio peaks on ∂C or on the Rashomon spheres.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import erf, erfcx, gammainc, gammaln, log_ndtr

from ..core.exact_samplers import exact_sampler
from ..core.problem import Dataset, Problem
from ..core.sets import Ball, BallAt, Box, ConstraintSet, Intersection
from ..core.tags import get_tags
from ..privacy.exact_loss import Law1D, digest, epsilon_1d, memo, normalised_law_1d
from .kernels import resolve_kernel, row_losses

__all__ = ["RashomonBall", "TiltedBall", "gauss_legendre_panels", "gibbs_epsilon", "gibbs_law_1d",
           "gibbs_log_density_ratio", "gibbs_tilt", "interval_of_region", "log_ball_gauss",
           "log_normal_mass", "log_tilted_interval", "log_tilted_segment", "rashomon_epsilon",
           "sum_losses", "tilted_ball_epsilon"]

#: Gauss–Legendre panels × nodes of the quadrature of log Z in φ (t = R cos φ) for p ≥ 2.
_PANELS, _NODES = 512, 16


def _log_lower_gamma(a: float, x: np.ndarray) -> np.ndarray:
    """log P(a, x), P the regularised lower incomplete gamma function, accurate for tiny x
    (the series x^a e^{−x}/Γ(a + 1)·Σₖ xᵏ/((a + 1)…(a + k)) below x = 1e-3, else scipy)."""
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, -np.inf)
    small = (x > 0) & (x < 1e-3)
    if np.any(small):
        xs = x[small]
        term = np.ones_like(xs)
        total = np.ones_like(xs)
        for k in range(1, 12):
            term = term * xs / (a + k)
            total += term
        out[small] = a * np.log(xs) - xs - gammaln(a + 1.0) + np.log(total)
    big = x >= 1e-3
    if np.any(big):
        with np.errstate(divide="ignore"):
            out[big] = np.log(gammainc(a, x[big]))
    return out


def log_ball_gauss(m: int, rho: np.ndarray, A: float) -> np.ndarray:
    """log V_m(ρ) = log ∫_{‖x‖≤ρ} e^{−(A/2)‖x‖²} dx over the m-ball (module docstring); 0 for
    m = 0, −∞ at ρ = 0."""
    rho = np.asarray(rho, dtype=float)
    if m == 0:
        return np.zeros(rho.shape)
    with np.errstate(divide="ignore"):
        if A == 0:
            return (0.5 * m * math.log(math.pi) + m * np.log(rho) - gammaln(0.5 * m + 1.0))
        return 0.5 * m * math.log(2.0 * math.pi / A) + _log_lower_gamma(0.5 * m, 0.5 * A * rho ** 2)


def log_tilted_interval(rho: np.ndarray, A: float, b: float) -> np.ndarray:
    """log ∫_{−ρ}^{ρ} exp(−(A/2)x² + b·x) dx (A ≥ 0, any b), stable for every A, b, ρ ≥ 0
    (−∞ at ρ = 0): :func:`log_tilted_segment` on [−ρ, ρ]."""
    rho = np.asarray(rho, dtype=float)
    return log_tilted_segment(-rho, rho, A, abs(float(b)))


def log_normal_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Φ(b) − Φ(a)) for a ≤ b, elementwise, accurate in both tails (the mass is taken in
    the tail it lies in)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    flip = a > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    lhi, llo = log_ndtr(hi), log_ndtr(lo)
    with np.errstate(divide="ignore"):
        return lhi + np.log1p(-np.exp(np.minimum(llo - lhi, 0.0)))


#: Gauss–Legendre nodes for a segment across which the exponent varies by at most 1
#: (:func:`log_tilted_segment`): exact to rounding there (derivation in its docstring).
_FLAT_NODES = 20


def log_tilted_segment(a: np.ndarray, b: np.ndarray, A: float, B: float) -> np.ndarray:
    """log ∫_a^b e^{f(x)} dx, f(x) = −(A/2)x² + B·x, for a ≤ b (elementwise; −∞ where a = b;
    A ≥ 0, any B), stable for every A, B, a, b. Derived (u = √(A/2)·|m − x|, m = B/A the mode):

    * A = 0: B·top + log((1 − e^{−|B|(b − a)})/|B|), top the end where Bx is larger.
    * the mode inside (a, b): f(m) + log √(π/(2A)) + log(erf(√(A/2)(m − a)) + erf(√(A/2)(b − m)))
      (the two halves of a Gaussian; a sum of positive terms, erf accurate near 0).
    * the mode outside, e the end nearer to it, e′ the other, Δ = f(e) − f(e′) ≥ 0 (f is
      monotone on [a, b]): ∫ = e^{f(e)}·√(π/(2A))·[erfcx(u_e) − e^{−Δ}·erfcx(u_e′)], since
      erfc(u) = e^{−u²}·erfcx(u) and f(m) − u_x² = f(x). erfcx decreases, so for Δ > 1 the
      bracket keeps ≥ 1 − e^{−1} of its first term (no cancellation). For Δ ≤ 1 the bracket
      cancels (the integrand is nearly flat; with a plain Gaussian form, m = B/A ~ 10⁹ at tiny
      A cancels B·m/2 against log Φ, an error of ~1e−4 seen at A = 1e−9): there
      f − f(e) = c₁t + c₂t² on t ∈ [−1, 1] with |c₁| ≤ Δ/2 and |c₂| = A(b − a)²/8 ≤ Δ/4 (f′ has
      one sign on [a, b], so Δ ≥ A(b − a)²/2), the integrand's Taylor series beyond degree
      2·:data:`_FLAT_NODES` − 1 is below 0.75⁴⁰/40! ≈ 1e−53, and Gauss–Legendre with
      :data:`_FLAT_NODES` nodes is exact to rounding. Differences of f are taken factored,
      f(x) − f(y) = (x − y)(B − (A/2)(x + y)), not as differences of two large values.
    """
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    out = np.full(a.shape, -np.inf)
    pos = b > a
    lo, hi = a[pos], b[pos]
    with np.errstate(divide="ignore", over="ignore"):
        if A == 0:
            if B == 0:
                out[pos] = np.log(hi - lo)
            else:
                top = hi if B > 0 else lo
                out[pos] = B * top + np.log(-np.expm1(-abs(B) * (hi - lo))) - math.log(abs(B))
            return out
        m, c = B / A, math.sqrt(A / 2.0)
        half_log = 0.5 * math.log(math.pi / (2.0 * A))
        res = np.empty(lo.shape)
        inside = (lo < m) & (m < hi)
        res[inside] = (B * m / 2.0 + half_log
                       + np.log(erf(c * (m - lo[inside]))
                                + erf(c * (hi[inside] - m))))
        near = np.where(m >= hi, hi, lo)  # the end nearer the mode (outside cases)
        far = np.where(m >= hi, lo, hi)
        drop = (near - far) * (B - 0.5 * A * (near + far))  # Δ = f(near) − f(far) ≥ 0
        f_near = near * (B - 0.5 * A * near)
        steep = ~inside & (drop > 1.0)
        u_near, u_far = c * np.abs(m - near[steep]), c * np.abs(m - far[steep])
        res[steep] = (f_near[steep] + half_log
                      + np.log(erfcx(u_near)
                               - np.exp(-drop[steep]) * erfcx(u_far)))
        flat = ~inside & ~steep
        if np.any(flat):
            t, w = np.polynomial.legendre.leggauss(_FLAT_NODES)
            mid, half = 0.5 * (lo[flat] + hi[flat]), 0.5 * (hi[flat] - lo[flat])
            x = mid[:, None] + half[:, None] * t[None, :]
            e = near[flat][:, None]
            g = np.exp((x - e) * (B - 0.5 * A * (x + e)))
            res[flat] = f_near[flat] + np.log(half * (g @ w))
        out[pos] = res
    return out


def gauss_legendre_panels(lo: float, hi: float, panels: int,
                          nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the composite Gauss–Legendre rule: ``panels`` equal panels of
    [lo, hi], ``nodes`` points each."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(lo, hi, panels + 1)
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[:-1] + edges[1:])
    return ((mid[:, None] + half[:, None] * x[None, :]).ravel(),
            (half[:, None] * w[None, :]).ravel())


@dataclass(frozen=True)
class TiltedBall:
    """The law ∝ exp(−(A/2)‖θ‖² + ⟨θ, B⟩) on the ball B(0, R) ⊂ ℝᵖ (module docstring)."""

    A: float
    B: np.ndarray
    R: float

    @property
    def p(self) -> int:
        return int(np.asarray(self.B).shape[0])

    def log_partition(self) -> float:
        """log Z = log ∫_{B(0,R)} exp(−(A/2)‖θ‖² + ⟨θ, B⟩) dθ (kept: :func:`~dpbench.privacy.
        exact_loss.memo`)."""
        b = float(np.linalg.norm(self.B))
        if self.p == 1:
            return float(log_tilted_interval(np.array([self.R]), self.A, b)[0])
        return memo(digest("tilted ball", self.A, b, self.R, self.p), self._log_partition)

    def _log_partition(self) -> float:
        b = float(np.linalg.norm(self.B))
        phi, w = gauss_legendre_panels(0.0, math.pi, _PANELS, _NODES)
        t = self.R * np.cos(phi)
        rho = self.R * np.sin(phi)
        with np.errstate(divide="ignore"):
            log_f = (-0.5 * self.A * t * t + b * t + log_ball_gauss(self.p - 1, rho, self.A)
                     + np.log(self.R * np.sin(phi) * w))
        top = float(np.max(log_f))
        return top + math.log(float(np.sum(np.exp(log_f - top))))

    def log_density(self, thetas: np.ndarray) -> np.ndarray:
        """The normalised log density at each row of ``thetas`` (−∞ outside the ball)."""
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        out = (-0.5 * self.A * np.einsum("ij,ij->i", thetas, thetas) + thetas @ self.B
               - self.log_partition())
        return np.where(np.linalg.norm(thetas, axis=1) <= self.R * (1 + 1e-12), out, -np.inf)

    def marginal(self, u: np.ndarray) -> Law1D:
        """The law of t = ⟨θ, u⟩ (u a unit vector), p ≤ 2 (module docstring)."""
        if self.p > 2:
            raise ValueError("TiltedBall.marginal: only p <= 2")
        u = np.asarray(u, dtype=float)
        b_u = float(self.B @ u)
        b_perp = float(np.linalg.norm(self.B - b_u * u))
        A, R, p = self.A, self.R, self.p

        def log_weight(t: np.ndarray) -> np.ndarray:
            t = np.asarray(t, dtype=float)
            out = -0.5 * A * t * t + b_u * t
            if p == 2:
                out = out + log_tilted_interval(np.sqrt(np.maximum(R * R - t * t, 0.0)), A, b_perp)
            return out

        log_z = self.log_partition()
        return Law1D(-R, R, lambda t: log_weight(t) - log_z)


def tilted_ball_epsilon(P: TiltedBall, Q: TiltedBall, delta: float) -> float | None:
    """ε(δ) between two tilted-ball laws with the same A and R (module docstring): the closed
    form R‖B − B′‖ + |log Z − log Z′| at δ = 0 (any p), the marginals along u for δ > 0 (p ≤ 2;
    ``None`` above)."""
    diff = np.asarray(P.B, dtype=float) - np.asarray(Q.B, dtype=float)
    norm = float(np.linalg.norm(diff))
    if norm == 0:
        return 0.0
    if delta <= 0:
        return P.R * norm + abs(P.log_partition() - Q.log_partition())
    if P.p > 2:
        return None
    u = diff / norm
    return epsilon_1d(P.marginal(u), Q.marginal(u), delta)


# --- from a problem and a dataset ------------------------------------------------------------

def _is_problem_ball(problem: Problem, region: ConstraintSet) -> float | None:
    """R when ``region`` is the problem's C = B(0, R) (the set itself), else None."""
    c = problem.constraint
    if isinstance(c, Ball) and region == c:
        return float(c.radius)
    return None


def gibbs_tilt(problem: Problem, data: Dataset, k: float, region: ConstraintSet
               ) -> TiltedBall | None:
    """The tilted-ball form of exp(−k·Σᵢ ℓ(θ; dᵢ)) on ``region``, or ``None``: LB-Lin (tag
    ``closed_form = "lb_lin"``: A = 0) and the isotropic quadratics (tag
    ``isotropic_quadratic``: A = k·n) when ``region`` is C = B(0, R) itself; B = k·Σᵢ dᵢ."""
    R = _is_problem_ball(problem, region)
    if R is None:
        return None
    tags = get_tags(problem)
    s = np.asarray(data.X, dtype=float).sum(axis=0)
    if tags.closed_form == "lb_lin":
        return TiltedBall(0.0, k * s, R)
    if tags.isotropic_quadratic is not None:
        return TiltedBall(k * data.n, k * s, R)
    return None


def interval_of_region(region: ConstraintSet) -> tuple[float, float] | None:
    """[lo, hi] of a one-dimensional region (a ball, a box, or an intersection of balls), or
    ``None``."""
    if isinstance(region, Box):
        a = region.half_width(1)
        return -a, a
    if isinstance(region, Ball):
        return -float(region.radius), float(region.radius)
    if isinstance(region, BallAt):
        c = float(region.center_point[0])
        return c - region.radius, c + region.radius
    if isinstance(region, Intersection):
        ends = [interval_of_region(s) for s in region.sets]
        if any(e is None for e in ends):
            return None
        lo = max(e[0] for e in ends)  # type: ignore[index]
        hi = min(e[1] for e in ends)  # type: ignore[index]
        return (lo, hi) if hi > lo else None
    return None


def sum_losses(problem: Problem, data: Dataset, thetas: np.ndarray) -> np.ndarray:
    """Σᵢ ℓ(θ; dᵢ) at each row of ``thetas`` (``problem.loss``, one θ at a time)."""
    thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
    return np.array([float(np.sum(problem.loss(t, data))) for t in thetas])


def gibbs_law_1d(problem: Problem, data: Dataset, k: float, region: ConstraintSet
                 ) -> Law1D | None:
    """The law exp(−k·Σᵢ ℓ(θ; dᵢ)) on a 1-D ``region``, normalised by quadrature of
    ``problem.loss`` (the data points, where losses such as |θ − d| kink, are breakpoints);
    ``None`` unless p = 1 and the region is an interval."""
    if data.p != 1:
        return None
    ends = interval_of_region(region)
    if ends is None:
        return None
    return memo(digest("gibbs law 1d", problem, data, k, *ends),
                lambda: _gibbs_law_1d(problem, data, k, *ends))


def _gibbs_law_1d(problem: Problem, data: Dataset, k: float, lo: float, hi: float) -> Law1D:
    kinks = np.unique(np.asarray(data.X, dtype=float).ravel())
    if data.y is not None:
        x = np.asarray(data.X, dtype=float)[:, 0]
        nz = x != 0
        kinks = np.unique(np.concatenate([kinks, np.asarray(data.y, dtype=float)[nz] / x[nz]]))

    def log_weight(t: np.ndarray) -> np.ndarray:
        return -k * sum_losses(problem, data, np.asarray(t, dtype=float).reshape(-1, 1))

    return normalised_law_1d(log_weight, lo, hi, breakpoints=kinks)


def _samples_exactly(problem: Problem, d0: Dataset, d1: Dataset, k: float,
                     region: ConstraintSet) -> bool:
    """Whether the problem's exact ``"gibbs"`` sampler draws both datasets' laws on ``region``
    (a registered factory that does not decline them)."""
    return all(exact_sampler("gibbs", problem, d, k, region) is not None for d in (d0, d1))


def gibbs_epsilon(problem: Problem, d0: Dataset, d1: Dataset, k: float, region: ConstraintSet,
                  delta: float) -> float | None:
    """ε(δ) between the exponential-mechanism laws exp(−k·Σℓ) on ``region`` of D = ``d0`` and
    D′ = ``d1`` (module docstring), or ``None`` when no route applies or the problem has no exact
    sampler for the pair (then ``run`` does not draw this law exactly)."""
    if not _samples_exactly(problem, d0, d1, k, region):
        return None
    P, Q = gibbs_tilt(problem, d0, k, region), gibbs_tilt(problem, d1, k, region)
    if P is not None and Q is not None:
        return tilted_ball_epsilon(P, Q, delta)
    P1, Q1 = gibbs_law_1d(problem, d0, k, region), gibbs_law_1d(problem, d1, k, region)
    if P1 is None or Q1 is None:
        return None
    return epsilon_1d(P1, Q1, delta)


def _canary_loss_difference(problem: Problem, d0: Dataset, d1: Dataset,
                            thetas: np.ndarray) -> np.ndarray:
    """ℓ(θ; z) − ℓ(θ; z′) for the differing row 0 at each row of ``thetas``: the compiled kernel
    when the problem has one it can trust (millions of audit releases), else ``problem.loss``."""
    z = Dataset(d0.X[:1], None if d0.y is None else d0.y[:1], dict(d0.meta))
    z1 = Dataset(d1.X[:1], None if d1.y is None else d1.y[:1], dict(d1.meta))
    kernel = resolve_kernel(problem)
    if kernel is not None:
        return row_losses(kernel, thetas, z) - row_losses(kernel, thetas, z1)
    return sum_losses(problem, z, thetas) - sum_losses(problem, z1, thetas)


def gibbs_log_density_ratio(problem: Problem, d0: Dataset, d1: Dataset, k: float,
                            region: ConstraintSet, thetas: np.ndarray) -> np.ndarray | None:
    """log π_D(θ) − log π_D′(θ) at each row of ``thetas`` (module docstring), or ``None``:
    ⟨θ, B − B′⟩ − log Z + log Z′ for tilted balls, −k(ℓ(θ; z) − ℓ(θ; z′)) − log Z + log Z′ with
    the quadrature constants in one dimension."""
    if not _samples_exactly(problem, d0, d1, k, region):
        return None
    thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
    P, Q = gibbs_tilt(problem, d0, k, region), gibbs_tilt(problem, d1, k, region)
    if P is not None and Q is not None:
        return (thetas @ (np.asarray(P.B) - np.asarray(Q.B))
                - P.log_partition() + Q.log_partition())
    P1, Q1 = gibbs_law_1d(problem, d0, k, region), gibbs_law_1d(problem, d1, k, region)
    if P1 is None or Q1 is None:
        return None
    mid = np.array([[0.5 * (P1.lo + P1.hi)]])
    constant = float(P1.logpdf(mid[:, 0])[0] - Q1.logpdf(mid[:, 0])[0]
                     + k * _canary_loss_difference(problem, d0, d1, mid)[0])
    return constant - k * _canary_loss_difference(problem, d0, d1, thetas)


# --- the Rashomon law on F1 (GTU A6) -----------------------------------------------------------

@dataclass(frozen=True)
class RashomonBall:
    """The law ∝ exp(−β·max{½‖θ − c‖², ψ}) on the ball B(0, R) ∋ c: the Rashomon Gibbs law
    π_{β,ψ} of F1 mean estimation, whose 𝓛 − 𝓛* = ½‖θ − d̄‖² with c = d̄ (GTU Def. 1.4; the exact
    sampler :func:`dpbench.numerics.samplers.rashomon.rashomon_radial_sampler`) [derived]:

    * log Z = −βψ + log ∫₀^{R+‖c‖} e^{−β(max{r²/2, ψ} − ψ)}·|S^{p−1}|r^{p−1}·φ(r) dr, φ(r) the
      fraction of the sphere S(c, r) inside the ball: P(w ≤ τ) for w = ⟨ĉ, v⟩, v uniform on
      S^{p−1}, τ = (R² − ‖c‖² − r²)/(2‖c‖r), i.e. the regularised incomplete beta function
      I_{(1+τ)/2}((p − 1)/2, (p − 1)/2) (p ≥ 2; 1[r ≤ R] when c = 0); adaptive quadrature split
      at r = √(2ψ) and R − ‖c‖ (p = 1: :meth:`law_1d`);
    * for two centres c, c′ the log ratio β(f(θ − c′) − f(θ − c)) − log Z + log Z′,
      f(x) = max{½‖x‖², ψ}, is, where it is positive, convex on each piece cut out by the two
      spheres S(c, √(2ψ)), S(c′, √(2ψ)) (linear outside both, ½‖θ − c′‖² − ψ inside the first
      only, 0 inside both; ≤ 0 inside the second only); its maximum over the ball is therefore
      on ∂B(0, R) or on one of the two spheres (the extreme points of the pieces), a 1-D search
      at p = 2 (:func:`rashomon_epsilon`).
    """

    center: np.ndarray
    beta: float
    psi: float
    R: float

    @property
    def p(self) -> int:
        return int(np.asarray(self.center).shape[0])

    def log_weight(self, thetas: np.ndarray) -> np.ndarray:
        """−β·max{½‖θ − c‖², ψ} at each row."""
        d = np.atleast_2d(np.asarray(thetas, dtype=float)) - np.asarray(self.center, dtype=float)
        return -self.beta * np.maximum(0.5 * np.einsum("ij,ij->i", d, d), self.psi)

    def law_1d(self) -> Law1D:
        """The law at p = 1, normalised by quadrature (kinks at c ± √(2ψ); kept:
        :func:`~dpbench.privacy.exact_loss.memo`)."""
        c, a = float(np.asarray(self.center)[0]), math.sqrt(2.0 * self.psi)

        def build() -> Law1D:
            return normalised_law_1d(lambda t: self.log_weight(np.asarray(t).reshape(-1, 1)),
                                     -self.R, self.R, breakpoints=(c - a, c + a))

        return memo(digest("rashomon 1d", c, self.beta, self.psi, self.R), build)

    def log_density(self, thetas: np.ndarray) -> np.ndarray:
        """The normalised log density at each row of ``thetas`` (inside the ball)."""
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        if self.p == 1:
            return self.law_1d().logpdf(thetas[:, 0])
        return self.log_weight(thetas) - self.log_partition()

    def log_partition(self) -> float:
        """log Z (class docstring), p ≥ 2 (kept: :func:`~dpbench.privacy.exact_loss.memo`)."""
        return memo(digest("rashomon", np.asarray(self.center, dtype=float).tolist(), self.beta,
                           self.psi, self.R), self._log_partition)

    def _log_partition(self) -> float:
        from scipy import integrate
        from scipy.special import betainc

        p = self.p
        c = float(np.linalg.norm(self.center))
        half = 0.5 * (p - 1)
        log_sphere = math.log(2.0) + 0.5 * p * math.log(math.pi) - float(gammaln(0.5 * p))

        def frac(r: float) -> float:
            if c == 0:
                return 1.0 if r <= self.R else 0.0
            tau = (self.R ** 2 - c * c - r * r) / (2.0 * c * r) if r > 0 else 1.0
            return float(betainc(half, half, min(1.0, max(0.0, 0.5 * (1.0 + tau)))))

        def integrand(r: float) -> float:
            excess = max(0.5 * r * r, self.psi) - self.psi
            return math.exp(-self.beta * excess) * r ** (p - 1) * frac(r)

        top = self.R + c
        pts = sorted({x for x in (math.sqrt(2.0 * self.psi), self.R - c) if 0 < x < top})
        edges = [0.0, *pts, top]
        total = sum(integrate.quad(integrand, a, b, epsabs=0.0, epsrel=1e-11, limit=200)[0]
                    for a, b in zip(edges[:-1], edges[1:]))
        return -self.beta * self.psi + log_sphere + math.log(total)


def _rashomon_sup_2d(P: RashomonBall, Q: RashomonBall) -> float:
    """sup |log π_P/π_Q| over the disc at p = 2 (:class:`RashomonBall`: on the circle ∂B(0, R)
    or on the two spheres of radius √(2ψ), each searched on 20 000 angles and refined)."""
    from scipy import optimize

    a = math.sqrt(2.0 * P.psi)
    const = Q.log_partition() - P.log_partition()
    curves = [(np.zeros(2), P.R), (np.asarray(P.center, dtype=float), a),
              (np.asarray(Q.center, dtype=float), a)]
    best = 0.0
    for centre, radius in curves:
        def ratio(phi: np.ndarray, centre: np.ndarray = centre, radius: float = radius
                  ) -> np.ndarray:
            pts = centre + radius * np.stack([np.cos(phi), np.sin(phi)], axis=-1)
            inside = np.einsum("ij,ij->i", pts, pts) <= P.R * P.R * (1 + 1e-12)
            value = P.log_weight(pts) - Q.log_weight(pts) + const
            return np.where(inside, value, np.nan)

        phi = np.linspace(0.0, 2.0 * math.pi, 20_001)
        vals = ratio(phi)
        if not np.any(np.isfinite(vals)):
            continue
        for sign in (1.0, -1.0):
            i = int(np.nanargmax(sign * vals))
            lo, hi = phi[max(i - 1, 0)], phi[min(i + 1, phi.size - 1)]
            res = optimize.minimize_scalar(
                lambda x: -sign * float(np.nan_to_num(ratio(np.array([x]))[0], nan=sign * vals[i])),
                bounds=(lo, hi), method="bounded", options={"xatol": 1e-14})
            best = max(best, sign * float(vals[i]), -float(res.fun))
    return best


def rashomon_epsilon(P: RashomonBall, Q: RashomonBall, delta: float) -> float | None:
    """ε(δ) between two Rashomon laws with the same β, ψ, R: any δ at p = 1 (quadrature),
    δ = 0 at p = 2 (:func:`_rashomon_sup_2d`); ``None`` otherwise."""
    if P.p == 1:
        return epsilon_1d(P.law_1d(), Q.law_1d(), delta)
    if P.p == 2 and delta <= 0:
        return _rashomon_sup_2d(P, Q)
    return None
