"""Constraint sets C with projection, membership and diameter.

BST14 §1.3: ‖C‖ is the **diameter** (not the radius); every privacy calibration that uses ‖C‖ must
read :attr:`ConstraintSet.diameter`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


class ConstraintSet:
    """A closed bounded convex set in R^p. Subclasses implement the three oracles."""

    def project(self, theta: np.ndarray) -> np.ndarray:
        """Euclidean projection; ``theta`` may be (p,) or a batch (m, p)."""
        raise NotImplementedError

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        """Membership oracle (up to ``tol``)."""
        raise NotImplementedError

    @property
    def diameter(self) -> float:
        """‖C‖ = sup ‖x − y‖ over x, y in C."""
        raise NotImplementedError

    def center(self, p: int) -> np.ndarray:
        """A data-independent point of C, used as the start of iterative mechanisms."""
        raise NotImplementedError

    # --- optional: polytopes (Frank–Wolfe; docs/frank-wolfe.md) --------------------------------
    #: True when the set is the convex hull of a finite vertex set and implements :meth:`lmo`,
    #: :meth:`vertices` and :attr:`l1_radius` (``L1Ball``, ``Polytope``).
    has_vertices: ClassVar[bool] = False

    def vertices(self, p: int) -> np.ndarray:
        """The vertex set S (|S|, p) with C = conv(S) (polytopes only; data-independent)."""
        raise NotImplementedError(f"{type(self).__name__} is not given by a finite vertex set")

    def lmo(self, g: np.ndarray) -> np.ndarray:
        """Linear-minimisation oracle: a vertex s ∈ argmin_{s ∈ C} ⟨s, g⟩ (polytopes only)."""
        raise NotImplementedError(f"{type(self).__name__} has no linear-minimisation oracle")

    @property
    def l1_radius(self) -> float:
        """‖C‖₁ = max_{θ ∈ C} ‖θ‖₁ (TTZ15's ‖C‖₁, the ℓ1 size of the largest vertex)."""
        raise NotImplementedError

    @property
    def l1_diameter(self) -> float:
        """sup ‖x − y‖₁ over x, y in C."""
        raise NotImplementedError


@dataclass(frozen=True)
class Ball(ConstraintSet):
    """The Euclidean ball of ``radius`` centred at the origin."""

    radius: float = 1.0

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.ndim == 1:  # the hot path of iterative mechanisms: one vector per step
            norm1 = math.sqrt(float(theta.dot(theta)))
            return theta if norm1 <= self.radius else theta * (self.radius / norm1)
        norm = np.linalg.norm(theta, axis=-1, keepdims=True)
        scale = np.minimum(1.0, self.radius / np.maximum(norm, np.finfo(float).tiny))
        return theta * scale

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        return np.linalg.norm(np.asarray(theta, dtype=float), axis=-1) <= self.radius * (1 + tol)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def center(self, p: int) -> np.ndarray:
        return np.zeros(p)

    def sample_uniform(self, p: int, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of the ball: a data-independent start (docs/langevin.md)."""
        return _uniform_in_ball(p, self.radius, rng)


def _uniform_in_ball(p: int, radius: float, rng: np.random.Generator) -> np.ndarray:
    """Uniform in B(0, radius) ⊂ R^p: a uniform direction times radius·U^{1/p}."""
    g = rng.standard_normal(p)
    g /= max(math.sqrt(float(g @ g)), np.finfo(float).tiny)
    return g * (radius * rng.random() ** (1.0 / p))


@dataclass(frozen=True)
class Box(ConstraintSet):
    """The cube [−r/√p, r/√p]^p inscribed in the ball of radius ``radius`` r (GTU §5 F2).

    Scaling the half-width by 1/√p keeps the diameter 2r fixed in p-sweeps (our rule: a cube
    of fixed side has a diameter growing like √p, which would bend p-slopes). ``half_width(p)`` is
    the side half-length.
    """

    radius: float = 1.0

    def half_width(self, p: int) -> float:
        return self.radius / math.sqrt(p)

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        a = self.half_width(theta.shape[-1])
        return np.clip(theta, -a, a)

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        theta = np.asarray(theta, dtype=float)
        a = self.half_width(theta.shape[-1])
        return np.max(np.abs(theta), axis=-1) <= a * (1 + tol)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def center(self, p: int) -> np.ndarray:
        return np.zeros(p)

    def sample_uniform(self, p: int, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of the cube (a data-independent start, GTU Lemma B.5)."""
        a = self.half_width(p)
        return rng.uniform(-a, a, size=p)


class BallAt(ConstraintSet):
    """The Euclidean ball of ``radius`` centred at ``center`` (a fixed vector).

    Used for localisation (BST14 Algorithm 4): C₀ = C ∩ B(θ₀, r₀) with a *private* θ₀ and a
    data-independent r₀.
    """

    def __init__(self, center: np.ndarray, radius: float) -> None:
        self.center_point = np.array(center, dtype=float)
        self.center_point.flags.writeable = False
        self.radius = float(radius)

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return self.center_point + Ball(self.radius).project(theta - self.center_point)

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        return Ball(self.radius).contains(np.asarray(theta, dtype=float) - self.center_point, tol)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    def center(self, p: int) -> np.ndarray:
        return self.center_point.copy()

    def sample_uniform(self, p: int, rng: np.random.Generator) -> np.ndarray:
        """A uniform point of the ball (a data-independent start when the centre is public)."""
        return self.center_point + _uniform_in_ball(p, self.radius, rng)


class Intersection(ConstraintSet):
    """C₁ ∩ C₂ ∩ … of balls (``Ball`` or ``BallAt``), assumed non-empty.

    Projection by Dykstra's alternating projections (Boyle and Dykstra 1986), run to a fixed tolerance;
    membership is the conjunction; the diameter is bounded by the smallest member's diameter (the
    public bound ‖C₀‖ ≤ 2r₀ of BST14 Algorithm 4). ``center`` is the point where iterative
    mechanisms start: the projection of the last member's centre, a post-processing of whatever
    made the sets (for localisation: of the private θ₀).
    """

    def __init__(self, *sets: ConstraintSet, tol: float = 1e-12, max_iter: int = 10_000) -> None:
        if not sets:
            raise ValueError("Intersection needs at least one set")
        self.sets = tuple(sets)
        self.tol = tol
        self.max_iter = max_iter

    def balls(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Centres (m, p) and radii (m,) of the member balls (for compiled kernels)."""
        centers, radii = [], []
        for s in self.sets:
            if isinstance(s, Ball):
                centers.append(np.zeros(p))
            elif isinstance(s, BallAt):
                centers.append(s.center_point)
            else:
                raise TypeError(f"Intersection.balls: {type(s).__name__} is not a ball")
            radii.append(s.radius)
        return np.array(centers, dtype=float), np.array(radii, dtype=float)

    def _project_one(self, x: np.ndarray) -> np.ndarray:
        if all(s.contains(x, tol=0.0) for s in self.sets):
            return x
        y = x.copy()
        corrections = [np.zeros_like(x) for _ in self.sets]
        for _ in range(self.max_iter):
            prev = y
            for j, s in enumerate(self.sets):
                z = s.project(y + corrections[j])
                corrections[j] = y + corrections[j] - z
                y = z
            if float(np.linalg.norm(y - prev)) <= self.tol * (1.0 + float(np.linalg.norm(y))):
                break
        # Dykstra converges to the projection; finish with a feasibility-restoring pass so the
        # result is inside every set up to rounding.
        for s in self.sets:
            y = s.project(y)
        return y

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.ndim == 1:
            return self._project_one(theta)
        return np.stack([self._project_one(row) for row in theta])

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        theta = np.asarray(theta, dtype=float)
        out = self.sets[0].contains(theta, tol)
        for s in self.sets[1:]:
            out = np.logical_and(out, s.contains(theta, tol))
        return out if theta.ndim > 1 else bool(out)

    @property
    def diameter(self) -> float:
        return min(s.diameter for s in self.sets)

    def center(self, p: int) -> np.ndarray:
        return self.project(self.sets[-1].center(p))


# --------------------------------------------------------------------------------------------------
# Polytopes: the ℓ1 ball and the convex hull of given vertices (docs/frank-wolfe.md)
# --------------------------------------------------------------------------------------------------
def project_l1_ball(theta: np.ndarray, radius: float) -> np.ndarray:
    """Exact Euclidean projection onto {‖θ‖₁ ≤ radius}, row-wise for a batch (m, p).

    The sort-based algorithm of Duchi, Shalev-Shwartz, Singer and Chandra (ICML 2008, Fig. 1;
    Held, Wolfe and Crowder 1974 for the simplex): outside the ball the projection is the soft
    threshold sign(v)·(|v| − τ)₊ with τ > 0 the unique root of Σⱼ(|vⱼ| − τ)₊ = radius. Sorting
    u = |v| decreasingly, ρ = max{j : uⱼ − (Σ_{i≤j} uᵢ − radius)/j > 0} and
    τ = (Σ_{i≤ρ} uᵢ − radius)/ρ. O(p log p) per row; exact up to rounding.
    """
    theta = np.asarray(theta, dtype=float)
    if theta.ndim == 1:
        return project_l1_ball(theta[None, :], radius)[0]
    out = theta.copy()
    a = np.abs(theta)
    outside = a.sum(axis=1) > radius
    if not np.any(outside):
        return out
    v = a[outside]
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - radius
    j = np.arange(1, v.shape[1] + 1)
    positive = u - css / j > 0          # true on a prefix 1..ρ
    rho = positive.sum(axis=1)           # ≥ 1 since u₁ − (u₁ − r) = r > 0
    tau = css[np.arange(v.shape[0]), rho - 1] / rho
    out[outside] = np.sign(theta[outside]) * np.maximum(v - tau[:, None], 0.0)
    return out


@dataclass(frozen=True)
class L1Ball(ConstraintSet):
    """The ℓ1 ball {‖θ‖₁ ≤ radius} = conv{±radius·eⱼ}: a polytope with 2p vertices.

    ``diameter`` is the **Euclidean** diameter 2r (BST14's ‖C‖; attained by ±r·e₁),
    ``l1_radius`` = r is TTZ15's ‖C‖₁ (Talwar, Thakurta, Zhang 2015, Thm 3.1), ``l1_diameter`` = 2r.
    Projection: :func:`project_l1_ball` (exact, sort-based). LMO: −r·sign(g_j)·e_j with
    j = argmax |g_j| (ties: the smallest index).
    """

    radius: float = 1.0
    has_vertices: ClassVar[bool] = True

    def project(self, theta: np.ndarray) -> np.ndarray:
        return project_l1_ball(theta, self.radius)

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        return np.sum(np.abs(np.asarray(theta, dtype=float)), axis=-1) <= self.radius * (1 + tol)

    @property
    def diameter(self) -> float:
        return 2.0 * self.radius

    @property
    def l1_radius(self) -> float:
        return float(self.radius)

    @property
    def l1_diameter(self) -> float:
        return 2.0 * self.radius

    def center(self, p: int) -> np.ndarray:
        return np.zeros(p)

    def vertices(self, p: int) -> np.ndarray:
        """The 2p vertices: rows r·e₁, …, r·e_p, then −r·e₁, …, −r·e_p."""
        eye = self.radius * np.eye(p)
        return np.concatenate([eye, -eye])

    def lmo(self, g: np.ndarray) -> np.ndarray:
        g = np.asarray(g, dtype=float)
        j = int(np.argmax(np.abs(g)))
        s = np.zeros(g.shape[0])
        s[j] = -self.radius if g[j] > 0 else self.radius
        return s


class Polytope(ConstraintSet):
    """conv(V) for given vertices V (m, p) (a V-polytope; the rows need not all be extreme).

    Projection: Wolfe's minimum-norm-point algorithm (P. Wolfe, "Finding the nearest point in a
    polytope", Math. Programming 11, 1976) applied to the shifted points V − z: an active-set
    method over the simplex of vertex weights that terminates finitely; every iterate is a convex
    combination, hence inside conv(V). It stops when the Frank–Wolfe (duality) gap
    γ(x) = ⟨x − z, x⟩ − minᵢ⟨x − z, vᵢ⟩ of ½‖x − z‖² falls below ``tol``·scale², and since the
    objective is 1-strongly convex, ‖x − Π(z)‖ ≤ √(2γ) (:meth:`projection_gap` returns γ for any
    point, a certificate independent of how it was computed). ``diameter`` is the exact maximum
    pairwise vertex distance, ``center`` the vertex mean (data-independent), ``lmo`` the argmin
    over the rows (ties: the first).
    """

    has_vertices: ClassVar[bool] = True

    def __init__(self, vertices: np.ndarray, tol: float = 1e-13, max_iter: int = 10_000) -> None:
        V = np.array(vertices, dtype=float)
        if V.ndim != 2 or V.shape[0] < 1 or not np.all(np.isfinite(V)):
            raise ValueError("Polytope needs a finite (m, p) array of vertices, m ≥ 1")
        V.flags.writeable = False
        self.V = V
        self.tol = tol
        self.max_iter = max_iter

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Polytope) and np.array_equal(self.V, other.V)

    def __hash__(self) -> int:
        return hash(self.V.tobytes())

    def _check_dim(self, p: int) -> None:
        if p != self.V.shape[1]:
            raise ValueError(f"Polytope lives in R^{self.V.shape[1]}, got dimension {p}")

    def vertices(self, p: int) -> np.ndarray:
        self._check_dim(p)
        return self.V.copy()

    def lmo(self, g: np.ndarray) -> np.ndarray:
        g = np.asarray(g, dtype=float)
        self._check_dim(g.shape[0])
        return self.V[int(np.argmin(self.V @ g))].copy()

    @property
    def diameter(self) -> float:
        G = self.V @ self.V.T
        sq = np.diag(G)[:, None] + np.diag(G)[None, :] - 2.0 * G
        return float(math.sqrt(max(0.0, float(sq.max()))))

    @property
    def l1_radius(self) -> float:
        return float(np.abs(self.V).sum(axis=1).max())

    @property
    def l1_diameter(self) -> float:
        return float(max(np.abs(self.V - v).sum(axis=1).max() for v in self.V))

    def center(self, p: int) -> np.ndarray:
        self._check_dim(p)
        return self.V.mean(axis=0)

    def contains(self, theta: np.ndarray, tol: float = 1e-12) -> bool | np.ndarray:
        """Membership: ‖θ − Π(θ)‖ ≤ tol·(1 + ‖C‖) (through the certified projection)."""
        theta = np.asarray(theta, dtype=float)
        rows = np.atleast_2d(theta)
        scale = 1.0 + self.diameter + float(np.abs(self.V).max())
        out = np.array([float(np.linalg.norm(self._project_one(x) - x)) <= max(tol, 1e-9) * scale
                        for x in rows])
        return out if theta.ndim > 1 else bool(out[0])

    def projection_gap(self, x: np.ndarray, z: np.ndarray) -> float:
        """γ = ⟨x − z, x⟩ − minᵢ⟨x − z, vᵢ⟩ ≥ ½‖x − z‖² − min_C ½‖· − z‖² ≥ ½‖x − Π(z)‖²
        for x ∈ C (the duality gap of the projection problem)."""
        d = np.asarray(x, dtype=float) - np.asarray(z, dtype=float)
        return float(d @ x - np.min(self.V @ d))

    def _project_one(self, z: np.ndarray) -> np.ndarray:
        P = self.V - z                        # the projection is z + (min-norm point of conv(P))
        scale2 = float(np.max(np.sum(P * P, axis=1))) or 1.0
        i0 = int(np.argmin(np.sum(P * P, axis=1)))
        S = [i0]
        w = np.array([1.0])
        x = P[i0].copy()
        for _ in range(self.max_iter):
            # major cycle: the vertex most opposed to x; stop on a certified small gap
            scores = P @ x
            j = int(np.argmin(scores))
            if float(x @ x) - float(scores[j]) <= self.tol * scale2 or j in S:
                break
            S.append(j)
            w = np.append(w, 0.0)
            while True:  # minor cycle: affine minimiser of the active points, clipped to the hull
                Q = P[S]
                k = len(S)
                K = np.zeros((k + 1, k + 1))
                K[:k, :k] = Q @ Q.T
                K[:k, k] = K[k, :k] = 1.0
                rhs = np.zeros(k + 1)
                rhs[k] = 1.0
                a = np.linalg.lstsq(K, rhs, rcond=None)[0][:k]
                if np.all(a > 1e-15):
                    w = a / a.sum()
                    break
                neg = a <= 1e-15
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratios = np.where(neg, w / (w - a), np.inf)
                step = float(np.clip(np.min(ratios), 0.0, 1.0))
                w = w + step * (a - w)
                keep = w > 1e-15
                keep[int(np.argmin(np.where(neg, ratios, np.inf)))] = False
                if not np.any(keep):
                    keep[int(np.argmax(w))] = True
                S = [s for s, kk in zip(S, keep) if kk]
                w = np.maximum(w[keep], 0.0)
                w /= w.sum()
            x = w @ P[S]
        # x is a convex combination of the rows of P: z + x ∈ conv(V) up to rounding
        return z + x

    def project(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        self._check_dim(theta.shape[-1])
        if theta.ndim == 1:
            return self._project_one(theta)
        return np.stack([self._project_one(row) for row in theta])


def centred_ball_radius(constraint: ConstraintSet, p: int) -> float | None:
    """R when projecting onto ``constraint`` in R^p is projecting onto the centred ball B(0, R)
    (a :class:`Ball`; for p = 1 also a box or an ℓ1 ball, the interval
    [−R, R]), else ``None``."""
    if isinstance(constraint, Ball):
        return float(constraint.radius)
    if p == 1 and isinstance(constraint, Box):
        return float(constraint.half_width(1))
    if p == 1 and isinstance(constraint, L1Ball):
        return float(constraint.radius)
    return None
