"""The problem checks of the harness: declarations, data, declared data bounds, Lipschitz bound,
convexity, certified optimum, kernel, active non-smoothness (see :mod:`dpbench.testing`)."""


from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..core.errors import NotApplicable, UserInputError
from ..core.problem import CORE_CONSTANTS, DATA_BOUNDS, Dataset, Problem
from ..core.seeding import data_identity, make_rng


def _data(problem: Problem, n: int, p: int, seed: int = 0) -> Dataset:
    return problem.generate(n, p, make_rng(data_identity(problem.name, problem.identity_params(),
                                                         n, p, seed), 0))


# --- problem check: declared non-smoothness is active inside C ---------------------------------

@dataclass(frozen=True)
class KinkActivity:
    """What :func:`kink_activity` found: which examples have a certified kink inside C.

    ``fraction`` is the share of the n examples whose loss ℓ(·; dᵢ) has a certified gradient jump
    on some test chord, ``at_optimum`` the share found on the chords through the certified
    optimum θ*. Every certificate is a pair of points u, v of the shrunk set c + (1 − η/2)(C − c)
    (inside the interior of C) with ‖u − v‖ ≤ ``h_max`` and ‖∇ℓᵢ(u) − ∇ℓᵢ(v)‖ ≥ ``threshold``,
    so such an ℓᵢ is not β-smooth on C for any β < ``beta_detect`` = threshold / h_max.
    """

    problem: str
    n: int
    p: int
    chords: int
    kinked: int
    fraction: float
    at_optimum: float
    threshold: float
    h_max: float
    beta_detect: float


def _as_problem(problem: Problem | type[Problem]) -> Problem:
    return problem() if isinstance(problem, type) else problem


def _check_dimension(problem: Problem, n: int, p: int | None, seed: int) -> tuple[int, Dataset]:
    """(p, data): the given p, else the problem's own ``dimension`` (a data set's), else the
    first of 3, 1 that the problem's generator accepts."""
    if p is None:
        p = problem.dimension
    if p is not None:
        return p, _data(problem, n, p, seed)
    for q in (3, 1):
        try:
            return q, _data(problem, n, q, seed)
        except (NotApplicable, UserInputError):
            if q == 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def kink_activity(problem: Problem | type[Problem], *, n: int = 100, p: int | None = None,
                  seed: int = 0, anchors: int = 4, directions: int = 3, grid: int = 65,
                  bisections: int = 24, jump: float = 0.01, interior: float = 0.05
                  ) -> KinkActivity:
    """Find the examples whose loss has a kink met by chords inside C (see
    :func:`check_nonsmooth_active`); a deterministic function of its arguments.

    Data: n rows of the problem's law in dimension p (default: 3, or 1 when the generator
    refuses 3), drawn exactly as the engine draws seed ``seed``. Chords: through 1 + ``anchors``
    points — the certified optimum θ* (pulled towards the centre c of C by the factor 1 − η,
    η = ``interior``, only if it is not already in c + (1 − η)(C − c)) and ``anchors`` points
    drawn uniformly in C (from a generator seeded by the problem, n, p and ``seed``, independent
    of the data) and scaled by 1 − η towards c — each in ``directions`` random directions, as long
    as fits in c + (1 − η/2)(C − c). On each chord the per-example gradients are evaluated on
    ``grid`` equally spaced points; an interval where an example's gradient moves by at least
    ``jump``·L is bisected ``bisections`` times, following the half where it moves more. A
    discontinuity keeps its jump; a β-smooth loss's jump shrinks with the interval (to at most
    β·h), so the example is counted only if the jump is still ≥ ``jump``·L at the end.
    """
    problem = _as_problem(problem)
    p, data = _check_dimension(problem, n, p, seed)

    rng = make_rng({"check": "nonsmooth_active", "problem": problem.name,
                    "params": problem.get_params(), "n": n, "p": p, "seed": seed}, 0)
    C = problem.constraint
    c = np.asarray(C.center(p), dtype=float)
    D = float(C.diameter)
    L = float(problem.lipschitz)
    if not math.isfinite(L):  # no declared scale: use the gradients at the centre
        L = float(np.linalg.norm(problem.grad(c, data), axis=1).max())
    threshold = jump * L

    def inside(q: np.ndarray, kappa: float) -> bool:
        """q ∈ c + κ(C − c)."""
        return bool(C.contains(c + (q - c) / kappa, tol=0.0))

    def uniform() -> np.ndarray:
        sample = getattr(C, "sample_uniform", None)
        if sample is not None:
            return np.asarray(sample(p, rng), dtype=float)
        return np.asarray(C.project(c + rng.standard_normal(p) * D), dtype=float)

    theta_star = np.asarray(problem.solve(data).theta, dtype=float)
    if not inside(theta_star, 1.0 - interior):
        theta_star = c + (1.0 - interior) * (theta_star - c)
    points = [theta_star] + [c + (1.0 - interior) * (uniform() - c) for _ in range(anchors)]

    found = np.zeros(data.n, dtype=bool)
    at_opt = np.zeros(data.n, dtype=bool)
    ts = np.linspace(0.0, 1.0, grid)
    chords = 0
    h_max = 0.0
    for k, q in enumerate(points):
        for _ in range(directions):
            u = rng.standard_normal(p)
            u /= max(float(np.linalg.norm(u)), np.finfo(float).tiny)
            s = D / 2.0
            while s > 1e-6 * D and not (inside(q - s * u, 1.0 - interior / 2.0)
                                        and inside(q + s * u, 1.0 - interior / 2.0)):
                s /= 2.0
            if s <= 1e-6 * D:
                continue
            chords += 1
            a, b = q - s * u, q + s * u
            h_max = max(h_max, 2.0 * s / (grid - 1) / 2.0**bisections)
            G = np.stack([problem.grad(a + t * (b - a), data) for t in ts])   # (grid, n, p)
            jumps = np.linalg.norm(np.diff(G, axis=0), axis=2)                # (grid − 1, n)
            where = jumps.argmax(axis=0)
            for i in np.flatnonzero((jumps.max(axis=0) >= threshold) & ~found):
                j = int(where[i])
                lo, hi, g_lo, g_hi = ts[j], ts[j + 1], G[j, i], G[j + 1, i]
                row = np.array([i])
                for _ in range(bisections):
                    mid = 0.5 * (lo + hi)
                    g_mid = problem.grad(a + mid * (b - a), data, row)[0]
                    if np.linalg.norm(g_mid - g_lo) >= np.linalg.norm(g_hi - g_mid):
                        hi, g_hi = mid, g_mid
                    else:
                        lo, g_lo = mid, g_mid
                if np.linalg.norm(g_hi - g_lo) >= threshold:
                    found[i] = True
                    at_opt[i] = k == 0
    return KinkActivity(problem=problem.name, n=data.n, p=p, chords=chords,
                        kinked=int(found.sum()), fraction=float(found.mean()),
                        at_optimum=float(at_opt.mean()), threshold=threshold, h_max=h_max,
                        beta_detect=threshold / h_max if h_max > 0 else math.inf)


def check_nonsmooth_active(problem: Problem | type[Problem], *, n: int = 100,
                           p: int | None = None, seed: int = 0,
                           min_fraction: float = 0.05) -> None:
    """A problem that declares β = ∞ is non-smooth where optimisers go: inside C, for its law.

    Problems with a finite declared β pass untested. Otherwise :func:`kink_activity` draws n = 100
    rows (p = 3, or 1 for one-dimensional problems; dataset seed ``seed``), and the check requires
    that at least ``min_fraction`` of the examples have a kink certified on the test chords: chords
    through the certified optimum θ* and through data-independent uniform points of C, all kept
    strictly inside C (scaled by 0.95–0.975 towards the centre). Each certificate shows a gradient
    jump ≥ 0.01·L between points at most ~1e-9·D apart, i.e. that the example's loss is not
    β-smooth on C for any β up to about 10⁷·L/D; by convexity (directional derivatives only jump
    up) the average loss then has kinks inside C too.

    What it measures: kinks of codimension one (hinge y⟨θ, x⟩ = 1, |θⱼ − sⱼ|, (y − xθ)₊) are
    crossed by generic chords wherever they meet the interior of C; point kinks (‖θ − d‖) are met
    only at θ*, i.e. when the law puts a positive fraction of rows where the optimum is (e.g. the
    duplicated rows of ``median``). A hinge whose kink lies outside the interior of C (R·‖x‖ ≤ 1:
    margins < 1 everywhere inside) is linear there and fails, as does a median whose θ* sits
    between data points. Deterministic: the data come from the engine's seeded stream and the
    chords from a generator seeded by (problem, parameters, n, p, seed), so the verdict never
    changes between runs.
    """
    problem = _as_problem(problem)
    if math.isfinite(problem.smoothness):
        return
    act = kink_activity(problem, n=n, p=p, seed=seed)
    assert act.fraction >= min_fraction, (
        f"problem {problem.name!r} ({problem!r}) declares beta=inf but only "
        f"{act.kinked}/{act.n} examples (p={act.p}) have a kink met inside C by {act.chords} "
        f"chords through theta* and random interior points (need >= {min_fraction:.0%}): the loss "
        "is smooth (e.g. linear) on the interior of C for its data law, so results labelled "
        "non-smooth measure a smooth problem; enlarge C or move the data so the kinks bind")


# --- the problem harness -----------------------------------------------------------------------

def _problem_points(problem: Problem, p: int, data: Dataset, k: int, tag: str) -> np.ndarray:
    """k data-independent points of C (uniform where C can sample, else projected Gaussians),
    from a generator seeded by the problem, p and ``tag``."""

    rng = make_rng({"check": tag, "problem": problem.name, "params": problem.get_params(),
                    "n": data.n, "p": p}, 0)
    C = problem.constraint
    c = np.asarray(C.center(p), dtype=float)
    D = float(C.diameter)
    sample = getattr(C, "sample_uniform", None)
    out = []
    for _ in range(k):
        if sample is not None:
            out.append(np.asarray(sample(p, rng), dtype=float))
        else:
            out.append(np.asarray(C.project(c + rng.standard_normal(p) * D), dtype=float))
    return np.array(out)


def check_problem_declarations(problem: Problem, n: int = 40, p: int | None = None,
                               seed: int = 0) -> None:
    """Name, version and citation are declared; the public constants are consistent:
    L > 0 finite, 0 ≤ Δ ≤ β (β may be ∞), 0 < diameter < ∞; the parameters round-trip."""
    for attr in ("name", "citation"):
        assert isinstance(getattr(problem, attr, None), str) and getattr(problem, attr), (
            f"{problem!r} must declare a non-empty {attr!r}")
    assert isinstance(problem.version, str) and problem.version, (
        f"{problem.name}: version must be a non-empty string, got {problem.version!r}")
    L, m, beta = float(problem.lipschitz), float(problem.strong_convexity), float(problem.smoothness)
    D = float(problem.constraint.diameter)
    assert math.isfinite(L) and L > 0, f"{problem.name}: Lipschitz constant {L!r} must be finite > 0"
    assert 0 <= m <= beta, f"{problem.name}: need 0 <= strong convexity {m!r} <= smoothness {beta!r}"
    assert math.isfinite(D) and D > 0, f"{problem.name}: diameter {D!r} must be finite > 0"
    again = type(problem)(**problem.get_params())
    assert again.get_params() == problem.get_params(), (
        f"{problem.name}: parameters do not round-trip through the constructor")


def check_problem_data(problem: Problem, n: int = 40, p: int | None = None, seed: int = 0) -> None:
    """The generator honours (n, p) and is a deterministic function of its data stream."""
    p, data = _check_dimension(problem, n, p, seed)
    again = _data(problem, n, p, seed)
    assert data.n == n and data.p == p, (
        f"{problem.name}: asked for (n, p) = ({n}, {p}), got ({data.n}, {data.p})")
    assert np.array_equal(data.X, again.X) and (
        data.y is None or np.array_equal(data.y, again.y)), (
        f"{problem.name}: the same data stream gave different datasets")


#: Dataset sizes and extra seeds the data bounds are checked on (beside the harness's own n and
#: seed), and the larger dimension tried when the generator accepts it.
_BOUND_SIZES = (2, 200)
_BOUND_SEEDS = 3
_BOUND_DIM = 10


def check_problem_bounds(problem: Problem, n: int = 40, p: int | None = None,
                         seed: int = 0) -> None:
    """The declared data bounds (:meth:`~dpbench.core.problem.Problem.data_bounds`) are public
    constants and hold on generated data.

    Declaring a bound is optional; every declared name must be one of
    :data:`~dpbench.core.problem.DATA_BOUNDS` (``data_norm``, ``label_bound``, ``data_norm_inf``)
    with a value ≥ 0 (``math.inf``: the universe is unbounded), and
    :meth:`~dpbench.core.problem.Problem.constants` must publish it beside unchanged L, D,
    Delta, beta. Then, on n ∈ {2, n, 200} rows of seeds ``seed`` … ``seed + 2`` in dimension p
    (and p = 10 when the generator accepts it), every feature vector has ‖x‖₂ ≤ ``data_norm``
    and ‖x‖∞ ≤ ``data_norm_inf``, and every label |y| ≤ ``label_bound`` (to a relative 1e-9); a
    problem that declares ``label_bound`` must generate labels.
    """
    declared = problem.data_bounds()
    assert isinstance(declared, dict), (
        f"{problem.name}: data_bounds() must return a dict, got {type(declared).__name__}")
    allowed = ", ".join(DATA_BOUNDS)
    for name, value in declared.items():
        assert name in DATA_BOUNDS, (
            f"{problem.name}: data_bounds() declares {name!r}; allowed names: {allowed} "
            "(docs/plugins.md, 'Public constants')")
        assert isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
            value, bool) and float(value) >= 0, (
            f"{problem.name}: data bound {name} = {value!r} must be a number >= 0 (math.inf: "
            "unbounded)")
    consts = problem.constants()
    props = problem.properties()
    for name in CORE_CONSTANTS:
        assert consts.get(name) == float(props[name]), (
            f"{problem.name}: constants()[{name!r}] = {consts.get(name)!r} differs from the "
            f"declared property {props[name]!r}")
    for name, value in declared.items():
        assert consts.get(name) == float(value), (
            f"{problem.name}: constants() must publish the data bound {name} = {value!r}, got "
            f"{consts.get(name)!r}")
    if not declared:
        return
    p, _ = _check_dimension(problem, n, p, seed)
    dims = [p]
    try:
        _data(problem, 2, _BOUND_DIM, seed)
        dims.append(_BOUND_DIM)
    except (NotApplicable, UserInputError):
        pass
    norm_bound = float(declared.get("data_norm", math.inf))
    inf_bound = float(declared.get("data_norm_inf", math.inf))
    label_bound = declared.get("label_bound")
    for q in dict.fromkeys(dims):
        for size in dict.fromkeys((_BOUND_SIZES[0], n, _BOUND_SIZES[1])):
            for s in range(seed, seed + _BOUND_SEEDS):
                data = _data(problem, size, q, s)
                worst = float(np.linalg.norm(data.X, axis=1).max())
                assert worst <= norm_bound * (1 + 1e-9), (
                    f"{problem.name}: a generated feature vector has norm {worst:.10g} > "
                    f"data_norm = {norm_bound:.10g} (n={size}, p={q}, seed={s})")
                largest = float(np.abs(data.X).max())
                assert largest <= inf_bound * (1 + 1e-9), (
                    f"{problem.name}: a generated feature has |x_j| = {largest:.10g} > "
                    f"data_norm_inf = {inf_bound:.10g} (n={size}, p={q}, seed={s})")
                if label_bound is None:
                    continue
                assert data.y is not None, (
                    f"{problem.name}: declares label_bound but generated no labels "
                    f"(n={size}, p={q}, seed={s})")
                top = float(np.abs(data.y).max())
                assert top <= float(label_bound) * (1 + 1e-9), (
                    f"{problem.name}: a generated label has |y| = {top:.10g} > label_bound = "
                    f"{float(label_bound):.10g} (n={size}, p={q}, seed={s})")


def check_problem_lipschitz(problem: Problem, n: int = 40, p: int | None = None,
                            seed: int = 0) -> None:
    """Every example's gradient has norm ≤ L at data-independent points of C and at θ*."""
    p, data = _check_dimension(problem, n, p, seed)
    L = float(problem.lipschitz)
    thetas = [*_problem_points(problem, p, data, 16, "lipschitz"),
              np.asarray(problem.solve(data).theta, dtype=float)]
    for theta in thetas:
        norms = np.linalg.norm(np.atleast_2d(problem.grad(theta, data)), axis=1)
        worst = float(norms.max())
        assert worst <= L * (1 + 1e-9) + 1e-12, (
            f"{problem.name}: a per-example gradient has norm {worst:.6g} > L = {L:.6g} at "
            f"theta = {np.round(theta, 4).tolist()}")


def check_problem_convexity(problem: Problem, n: int = 40, p: int | None = None,
                            seed: int = 0) -> None:
    """ℓ(v) ≥ ℓ(u) + ⟨∇ℓ(u), v − u⟩ + (Δ/2)‖v − u‖² for every example and pairs of points of C,
    and, when β is finite, ‖∇ℓ(u) − ∇ℓ(v)‖ ≤ β‖u − v‖ (both to a relative 1e-8)."""
    p, data = _check_dimension(problem, n, p, seed)
    m, beta = float(problem.strong_convexity), float(problem.smoothness)
    pts = _problem_points(problem, p, data, 12, "convexity")
    for u, v in zip(pts[:-1], pts[1:]):
        lu, lv = np.asarray(problem.loss(u, data)), np.asarray(problem.loss(v, data))
        gu, gv = np.atleast_2d(problem.grad(u, data)), np.atleast_2d(problem.grad(v, data))
        d = v - u
        dist2 = float(d @ d)
        lower = lu + gu @ d + 0.5 * m * dist2
        tol = 1e-8 * (1 + np.abs(lv) + np.abs(lu))
        bad = np.flatnonzero(lv < lower - tol)
        assert bad.size == 0, (
            f"{problem.name}: example {int(bad[0])} violates the (strong) convexity inequality "
            f"with Δ = {m:g}: ℓ(v) = {lv[bad[0]]:.8g} < {lower[bad[0]]:.8g}")
        if math.isfinite(beta):
            jump = float(np.linalg.norm(gu - gv, axis=1).max())
            assert jump <= beta * math.sqrt(dist2) * (1 + 1e-8) + 1e-12, (
                f"{problem.name}: gradients move by {jump:.6g} over a distance "
                f"{math.sqrt(dist2):.6g}, more than the declared smoothness β = {beta:g} allows")


def check_problem_optimum(problem: Problem, n: int = 40, p: int | None = None,
                          seed: int = 0) -> None:
    """The certified optimum lies in C, its gap is ≥ 0, and no point of C beats it by more."""
    p, data = _check_dimension(problem, n, p, seed)
    opt = problem.solve(data)
    theta = np.asarray(opt.theta, dtype=float)
    assert theta.shape == (p,), f"{problem.name}: optimum has shape {theta.shape}, expected ({p},)"
    assert bool(problem.constraint.contains(theta, tol=1e-9)), (
        f"{problem.name}: the certified optimum lies outside C")
    assert opt.gap >= 0 and math.isfinite(opt.gap), f"{problem.name}: gap {opt.gap!r} must be >= 0"
    value = problem.risk(theta, data)
    assert abs(value - opt.value) <= 1e-9 * max(1.0, abs(value)), (
        f"{problem.name}: Optimum.value {opt.value!r} is not the risk of its theta ({value!r})")
    for u in _problem_points(problem, p, data, 32, "optimum"):
        r = problem.risk(u, data)
        assert r >= value - opt.gap - 1e-9 * max(1.0, abs(value)), (
            f"{problem.name}: a point of C has risk {r:.10g} below the certified optimum "
            f"{value:.10g} − gap {opt.gap:.3g}")


def check_problem_kernel(problem: Problem, n: int = 40, p: int | None = None,
                         seed: int = 0) -> None:
    """A problem with a compiled kernel reproduces its own loss and gradient with it."""
    from ..numerics.kernels import check_kernel, resolve_kernel

    if resolve_kernel(problem) is None:
        return
    p, data = _check_dimension(problem, n, p, seed)
    check_kernel(problem, data, _problem_points(problem, p, data, 4, "kernel"))


def check_problem_nonsmooth(problem: Problem, n: int = 40, p: int | None = None,
                            seed: int = 0) -> None:
    """:func:`check_nonsmooth_active` with n = 100 (a declared β = ∞ is active inside C)."""
    check_nonsmooth_active(problem, p=p, seed=seed)


PROBLEM_CHECKS: tuple[Callable[..., None], ...] = (
    check_problem_declarations, check_problem_data, check_problem_bounds, check_problem_lipschitz,
    check_problem_convexity, check_problem_optimum, check_problem_kernel,
    check_problem_nonsmooth,
)


def check_problem(problem: Problem | type[Problem], *, n: int = 40, p: int | None = None,
                  seed: int = 0, skip: Iterable[str] = ()) -> None:
    """Run every check of :data:`PROBLEM_CHECKS` (except those in ``skip``) on the problem, in
    dimension p (default: the problem's ``dimension`` when its data fix one, else 3, or 1 when
    its law refuses 3) on n rows of data seed ``seed``; raise
    the first ``AssertionError``, prefixed with the check's name."""
    problem = _as_problem(problem)
    skip = set(skip)
    unknown = skip - {c.__name__ for c in PROBLEM_CHECKS}
    if unknown:
        raise UserInputError(f"check_problem: unknown checks in skip: {sorted(unknown)}")
    for check in PROBLEM_CHECKS:
        if check.__name__ in skip:
            continue
        try:
            check(problem, n=n, p=p, seed=seed)
        except AssertionError as exc:
            raise AssertionError(f"{check.__name__} failed: {exc}") from exc
