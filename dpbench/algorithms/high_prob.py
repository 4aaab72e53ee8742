"""BST14 Appendix D (W1): the high-probability wrapper: k private runs, then a private selection.

Bassily, Smith and Thakurta, "Private Empirical Risk Minimization: Efficient Algorithms and Tight
Error Bounds" (FOCS 2014; arXiv:1405.7085), Appendix D. Erratum (docs/bst14.md Errata 10): the
paper does not charge the selection step; we do.
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.registry import get_algorithm
from ..core.seeding import stable_hash
from ..numerics.jit import inlinable, specialise
from ..numerics.kernels import kernel_arrays, resolve_kernel
from ..numerics.line_law import LineLaw, cached, line_epsilon, line_log_ratio, release_key
from ..privacy.ledger import Charge, PrivacyLedger
from ..privacy.selection_law import BestOfK, RatioTable, best_of_k_epsilon

#: Built-in bases of each privacy kind (see the design note in :class:`HighProb`).
PURE_BASES: tuple[str, ...] = ("output_perturbation", "exp_mech", "localize",
                                "regularized_output_perturbation", "objective_perturbation")
APPROX_BASES: tuple[str, ...] = ("noisy_sgd", "localize_gaussian")


def selection_probabilities(sum_losses: np.ndarray, epsilon_sel: float, L: float,
                            diameter: float) -> np.ndarray:
    """Exponential-mechanism weights Pr[i] ∝ exp(−ε_sel·𝓛(θᵢ; D)/(2L‖C‖)) (BST14 Appendix D).

    ``sum_losses`` are the **sum-scale** losses 𝓛(θᵢ; D) = Σⱼ ℓ(θᵢ; dⱼ) of candidates θᵢ ∈ C,
    along the last axis (a (m, k) array holds m independent selections among k candidates).
    Computed stably (shifted by the minimum before exponentiating).
    """
    losses = np.asarray(sum_losses, dtype=float)
    c = epsilon_sel / (2.0 * L * diameter)
    logits = -c * (losses - losses.min(axis=-1, keepdims=True))
    w = np.exp(logits)
    return w / w.sum(axis=-1, keepdims=True)


def select_candidates(sum_losses: np.ndarray, epsilon_sel: float, L: float, diameter: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Row r of ``sum_losses`` (m, k): draw one index with :func:`selection_probabilities`, by
    inverting the CDF at one uniform of ``rng`` per row (``rng.random(m)``).

    Returns ``(indices (m,), probabilities (m, k))``.
    """
    probs = selection_probabilities(sum_losses, epsilon_sel, L, diameter)
    u = rng.random(probs.shape[0])
    # searchsorted(cdf, v, side="right") on each row: the number of CDF values ≤ v
    idx = np.sum(np.cumsum(probs, axis=-1) <= (u * probs.sum(axis=-1))[:, None], axis=-1)
    return np.minimum(idx, probs.shape[-1] - 1), probs


def select_candidate(sum_losses: np.ndarray, epsilon_sel: float, L: float, diameter: float,
                     rng: np.random.Generator) -> tuple[int, np.ndarray]:
    """Draw one index with :func:`selection_probabilities`; one uniform draw from ``rng``
    (:func:`select_candidates` on one row).

    Returns ``(index, probabilities)``.
    """
    idx, probs = select_candidates(np.asarray(sum_losses, dtype=float)[None, :], epsilon_sel, L,
                                   diameter, rng)
    return int(idx[0]), probs[0]


_kernel_loss: Any = None  # bound per kernel by _sum_losses_loop


def _sum_losses_rows(X, y, prm, thetas, out):  # type: ignore[no-untyped-def]
    """out[r] = Σᵢ ℓ(thetas[r]; dᵢ) by the kernel's loss (compiled per kernel)."""
    for r in range(thetas.shape[0]):
        total = 0.0
        for i in range(X.shape[0]):
            total += _kernel_loss(thetas[r], X, y, prm, i)
        out[r] = total


_SUM_LOSSES: dict[Any, Any] = {}


def _sum_losses_loop(loss: Any) -> Any:
    """:func:`_sum_losses_rows` compiled for the kernel loss ``loss`` (once per process, cached
    on disk: :func:`dpbench.numerics.jit.specialise`)."""
    loop = _SUM_LOSSES.get(loss)
    if loop is None:
        loop = _SUM_LOSSES[loss] = specialise(_sum_losses_rows, {"_kernel_loss": inlinable(loss)})
    return loop


def sum_losses(thetas: np.ndarray, data: Dataset, problem: Problem) -> np.ndarray:
    """The sum-scale losses 𝓛(θ; D) = n·L̄(θ) of the rows of ``thetas`` (m, p): by the problem's
    compiled kernel when it has one (equal to ``n * problem.risk`` up to the rounding of the
    summation order), else ``n * problem.risk`` row by row."""
    thetas = np.ascontiguousarray(thetas, dtype=float)
    kernel = resolve_kernel(problem)
    if kernel is None:
        return np.array([data.n * problem.risk(theta, data) for theta in thetas])
    X, y = kernel_arrays(data)
    out = np.empty(thetas.shape[0])
    _sum_losses_loop(kernel.loss)(X, y, np.ascontiguousarray(kernel.prm, dtype=np.float64),
                                  thetas, out)
    return out


#: Log-ratio tables of :meth:`HighProb.log_density_ratio`, most recent last.
_TABLES: OrderedDict[str, RatioTable] = OrderedDict()
_TABLE_CACHE_SIZE = 16


def _table_key(alg: Algorithm, d0: Dataset, d1: Dataset, problem: Problem, epsilon: float,
               delta: float) -> str:
    """Everything a :class:`~dpbench.privacy.selection_law.RatioTable` depends on, hashed."""
    arrays = [np.ascontiguousarray(a, dtype=float).tobytes().hex()
              for d in (d0, d1) for a in (d.X, d.y) if a is not None]
    return stable_hash([alg.name, alg.get_params(), problem.name, problem.get_params(),
                        [d0.X.shape, d1.X.shape, d0.y is None, d1.y is None], arrays,
                        float(epsilon), float(delta)])


def selected_line_law(base: LineLaw, data: Dataset, problem: Problem, k: int, epsilon_sel: float,
                      L: float, diameter: float) -> LineLaw:
    """The law of the candidate that :func:`select_candidates` picks among ``k`` i.i.d.
    candidates of law ``base`` (p = 1, [derived]).

    With w(θ) = exp(−ε_sel·𝓛(θ; D)/(2L‖C‖)) (the selection weights of
    :func:`selection_probabilities`), P[output ∈ dy] = Σᵢ P[θᵢ ∈ dy, i selected]
    = k·P_base(dy)·h(y), h(y) = E[w(y)/(w(y) + S)], S the sum of the other k − 1 weights.
    Since 1/a = ∫₀^∞ e^{−ta} dt, h(y) = ∫₀^∞ e^{−u}·M(u/w(y))^{k−1} du with M(t) = E e^{−t·w(θ)}
    the Laplace transform of one weight (u = t·w(y)); M is a Clenshaw–Curtis sum over the base
    law's points and atoms, and the integral over u is adaptive (``scipy.integrate.quad_vec``).
    Ties do not matter: equal candidates give the same output. Density values and atom masses
    are multiplied by k·h at their points, so the output law lives on the base law's points.
    """
    from scipy.integrate import quad_vec

    points = np.concatenate([base.nodes, base.atoms])
    probs = np.concatenate([base.quadrature * base.values, base.masses])
    losses = sum_losses(points[:, None], data, problem)
    c = epsilon_sel / (2.0 * L * diameter)
    w = np.exp(-c * (losses - losses.min()))  # ∈ (0, 1]; h is invariant to a common scale
    if k == 1:
        h = np.ones(points.size)
    else:
        def integrand(u: float) -> np.ndarray:
            laplace = np.exp(-np.outer(u / w, w)) @ probs
            return np.exp(-u) * laplace ** (k - 1)

        h = quad_vec(integrand, 0.0, np.inf, epsabs=1e-15, epsrel=1e-12)[0]
    scale = k * h
    return LineLaw(base.lo, base.hi, base.values * scale[:base.size], base.atoms.copy(),
                   base.masses * scale[base.size:])


class _Rescale(ast.NodeTransformer):
    """Replace ``epsilon`` by ``(epsilon*factor)`` and ``delta`` by ``(delta/runs)``."""

    def __init__(self, eps_factor: float, runs: int) -> None:
        self.eps_node = ast.parse(f"(epsilon*{eps_factor!r})", mode="eval").body
        self.delta_node = ast.parse(f"(delta/{runs})", mode="eval").body

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id == "epsilon":
            return self.eps_node
        if node.id == "delta":
            return self.delta_node
        return node


def rescaled_expression(expression: str, eps_factor: float, runs: int) -> str:
    """``expression`` evaluated at ε·eps_factor and δ/runs (the per-run budget of the wrapper)."""
    tree = _Rescale(eps_factor, runs).visit(ast.parse(expression, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree))


class HighProb(Algorithm):
    """The high-probability wrapper (BST14 Appendix D), around a pure ε-DP base.

    1. Run the base mechanism (default parameters, resolved by name through
       :func:`dpbench.core.registry.get_algorithm`) k = ``runs`` times at ((1 − f)·ε/k, δ/k) each, with
       independent generators ``rng.spawn(k)``, giving candidates θ₁, …, θ_k ∈ C.
    2. Select one with the exponential mechanism over the k candidates:
       Pr[i] ∝ exp(−ε_sel·𝓛(θᵢ; D)/(2L‖C‖)), ε_sel = f·ε, f = ``selection_fraction``; the draw
       uses the parent ``rng``.

    Privacy (basic composition, adaptive): Σ runs (1 − f)ε + ε_sel = ε, and δ/k·k = δ.
    **Erratum** (docs/bst14.md Errata 10): the paper does not charge the selection, but it reads D
    again; we charge ε_sel. Why the selection is ε_sel-DP (oscillation argument, as for Algorithm 2;
    docs/bst14.md Errata 1): for fixed candidates and neighbours D, D′ differing in d ↔ d′, write
    𝓛(θ; D) = 𝓛(θ; D′) + g(θ) with g = ℓ(·; d) − ℓ(·; d′). g is 2L-Lipschitz and every candidate
    lies in C, so max_i g(θᵢ) − min_i g(θᵢ) ≤ 2L‖C‖. With c = ε_sel/(2L‖C‖),
    Pr_D[i]/Pr_D′[i] = e^{−c·g(θᵢ)}·Z′/Z and Z ≥ Z′·e^{−c·max g}, so the ratio is at most
    e^{c(max g − g(θᵢ))} ≤ e^{ε_sel}. (The candidates are themselves private releases, so
    adaptive composition applies.) The ledger lists one charge per run (that run's ledger totals)
    plus the selection; it is certified only if every run is.

    Utility. Appendix D: the best of k runs has excess ≤ 2F(ε/k, δ/k) with probability
    ≥ 1 − 2^{−k}, and the selection loses O((L‖C‖/ε_sel)·log(k/ρ)) with probability 1 − ρ.
    In **expectation** the selection loses nothing [derived]: the weights are decreasing in the
    loss, so by Chebyshev's sum inequality Σᵢ Pr[i]·𝓛(θᵢ) ≤ (1/k)·Σᵢ 𝓛(θᵢ); hence E[excess] ≤ the
    base's expected excess at ((1 − f)ε/k, δ/k). That is the rate card (same exponents as the base).

    Design note (privacy kind). ``privacy`` is a class attribute that the suite and the registry
    read from the class, so one class cannot follow its base. The simplest correct design is two
    registered classes sharing this implementation: ``high_prob`` (pure; bases
    ``output_perturbation``, ``exp_mech``, ``localize``, ``regularized_output_perturbation``,
    ``objective_perturbation`` with its default Gamma noise) and ``high_prob_approx``
    (:class:`HighProbApprox`; bases ``noisy_sgd``, ``localize_gaussian``). The base's problem
    requirements are forwarded by :meth:`requirements`.

    Audit path (``run_batch``): ``run``'s k candidates are k independent base releases (its child
    generators ``rng.spawn(k)`` are independent streams) and its selection draws one uniform of
    the parent generator, independent of them. So ``size`` releases are the base's
    ``release_batch`` of k·size rows (or, without one, ``release_many`` fed the one generator for
    every run, i.e. its runs drawn one after another from it), taken k per row, then one
    vectorised selection per row (:func:`select_candidates`, one uniform per row, on the
    candidates' sum-scale losses from :func:`sum_losses`: the problem's compiled kernel when it
    has one, so the weights equal ``run``'s up to the rounding of the loss sums). The ledger is
    ``run``'s (one charge per run from the base's ledger, which depends on public quantities only,
    plus the selection).
    """

    name: ClassVar[str] = "high_prob"
    summary: ClassVar[str] = ("k runs of a pure ε-DP base plus an exponential-mechanism selection "
                              "(BST14 App. D, selection charged)")
    citation: ClassVar[str] = "Bassily, Smith, Thakurta (FOCS 2014), Appendix D"
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    params: ClassVar[dict[str, Param]] = {
        "base": Param("output_perturbation", kind="str", choices=PURE_BASES,
                      doc="registered pure ε-DP mechanism run k times with its default parameters"),
        "runs": Param(3, kind="int", low=1, doc="number k of independent base runs"),
        "selection_fraction": Param(
            0.5, low=0.0, high=1.0, low_open=True, high_open=True,
            doc="fraction f of ε spent on the selection; the runs get (1 − f)ε/k each"),
    }

    base: str
    runs: int
    selection_fraction: float

    # --- declarations -------------------------------------------------------------------------
    def base_algorithm(self) -> Algorithm:
        """A fresh instance of the base mechanism with its default parameters."""
        return get_algorithm(self.base)()

    def requirements(self) -> tuple[str, ...]:
        return tuple(self.base_algorithm().requirements())

    def cost(self, n: int, p: int) -> float:
        return self.runs * self.base_algorithm().cost(n, p) + self.runs * float(n * p)

    def run_budget(self, epsilon: float, delta: float) -> tuple[float, float, float]:
        """(ε per run, δ per run, ε_sel) for the total budget (ε, δ)."""
        f = self.selection_fraction
        return (1.0 - f) * epsilon / self.runs, delta / self.runs, f * epsilon

    def rate_card(self) -> RateCard | None:
        """The base's card at ((1 − f)ε/k, δ/k): same exponents (see the class docstring)."""
        card = self.base_algorithm().rate_card()
        if card is None:
            return None
        factor = (1.0 - self.selection_fraction) / self.runs
        return RateCard(
            expression=rescaled_expression(card.expression, factor, self.runs),
            exponents=dict(card.exponents),
            citation=(f"BST14 Appendix D around {self.base} ({card.citation}); expectation bound "
                      "by Chebyshev's sum inequality [derived]"),
            regime=card.regime,
            cap=card.cap,
            notes=(f"Base card at ε·{factor:.4g} and δ/{self.runs}. In expectation the selection "
                   "costs nothing beyond splitting ε; its high-probability loss is "
                   "2L‖C‖(log k + t)/(n·f·ε) on the average scale with probability ≥ 1 − e^{−t}."),
        )

    # --- running ------------------------------------------------------------------------------
    def _checked_base(self) -> Algorithm:
        """The base mechanism; ``NotApplicable`` when its privacy kind is not the wrapper's."""
        base = self.base_algorithm()
        if base.privacy != self.privacy:
            raise NotApplicable(f"{self.name}: base {self.base!r} is {base.privacy!r}, the wrapper "
                                f"is {self.privacy!r}")
        return base

    def _ledger(self, ledgers: Sequence[PrivacyLedger], eps_sel: float) -> PrivacyLedger:
        """Basic composition: one charge per run (that run's ledger totals) plus the selection."""
        charges = [Charge(f"{self.name} run {i + 1}/{self.runs}: {self.base} "
                          f"({led.accounting})", led.epsilon, led.delta,
                          "; ".join(c.theorem for c in led.charges), led.certified)
                   for i, led in enumerate(ledgers)]
        charges.append(Charge(
            f"{self.name}: exponential-mechanism selection among {self.runs} candidates",
            eps_sel, 0.0,
            "BST14 Appendix D (charged: docs/bst14.md Errata 10); oscillation ≤ 2L‖C‖"))
        return PrivacyLedger.from_charges(*charges)

    # --- the output law (the audit's true ε) --------------------------------------------------
    def _line_laws(self, d0: Dataset, d1: Dataset, problem: Problem, epsilon: float,
                   delta: float) -> tuple[LineLaw, LineLaw] | None:
        """The exact laws of the release on D and D′ at p = 1, from the base's exact laws at the
        per-run budget (its ``_line_laws``, e.g. :class:`~dpbench.algorithms.noisy_sgd.NoisySGD`)
        and the selection (:func:`selected_line_law`, each side with its own losses); ``None``
        when the base computes none."""
        base = self._checked_base()
        base_laws = getattr(base, "_line_laws", None)
        if base_laws is None or not type(self)._defined_at_or_below_run("_line_laws"):
            return None
        eps_run, delta_run, eps_sel = self.run_budget(epsilon, delta)

        def build() -> tuple[LineLaw, LineLaw] | None:
            laws = base_laws(d0, d1, problem, eps_run, delta_run)
            if laws is None:
                return None
            L, diameter = float(problem.lipschitz), float(problem.constraint.diameter)
            return tuple(selected_line_law(law, d, problem, self.runs, eps_sel, L,  # type: ignore[return-value]
                                           diameter) for law, d in zip(laws, (d0, d1)))

        return cached(release_key(self, problem, d0, d1, epsilon, delta), build)  # type: ignore[return-value]


    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        base = self._checked_base()
        eps_run, delta_run, eps_sel = self.run_budget(epsilon, delta)
        streams = rng.spawn(self.runs)
        releases = [base.release(data, problem, epsilon=eps_run, delta=delta_run, rng=s)
                    for s in streams]
        sum_losses = np.array([data.n * problem.risk(r.theta, data) for r in releases])
        L = float(problem.lipschitz)
        diameter = float(problem.constraint.diameter)
        idx, probs = select_candidate(sum_losses, eps_sel, L, diameter, rng)
        ledger = self._ledger([r.ledger for r in releases], eps_sel)
        chosen = releases[idx]
        info: dict[str, Any] = {
            "base": self.base, "runs": self.runs, "selected": idx,
            "selection_probabilities": probs.tolist(), "epsilon_per_run": eps_run,
            "delta_per_run": delta_run, "epsilon_selection": eps_sel,
            "candidate_sum_losses": sum_losses.tolist(), "base_info": chosen.info,
        }
        return Release(
            theta=np.array(chosen.theta, dtype=float), ledger=ledger,
            grad_queries=sum(r.grad_queries for r in releases),
            func_queries=sum(r.func_queries for r in releases) + self.runs * data.n,
            iterations=sum(r.iterations for r in releases), info=info)

    # --- the output law (privacy audit) ------------------------------------------------------
    def selection_laws(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                       delta: float) -> tuple[BestOfK, BestOfK] | None:
        """The released laws on D = ``d0`` and D′ = ``d1``
        (:class:`~dpbench.privacy.selection_law.BestOfK`: k i.i.d. base candidates, then the
        exponential-mechanism selection with weights exp(−ε_sel·𝓛(θ; D)/(2L‖C‖))), or ``None``
        unless p = 1 and the base declares its own law (``output_law``: output perturbation,
        its regularised form, closed-form objective perturbation)."""
        base = self._checked_base()
        output_law = getattr(base, "output_law", None)
        if d0.p != 1 or output_law is None:
            return None
        run_delta = 0.0 if self.privacy == "pure" else delta
        eps_run, delta_run, eps_sel = self.run_budget(epsilon, run_delta)
        c = eps_sel / (2.0 * float(problem.lipschitz) * float(problem.constraint.diameter))
        laws = []
        for data in (d0, d1):
            law = output_law(data, problem, epsilon=eps_run, delta=delta_run)
            if law is None:
                return None

            def log_weight(theta: np.ndarray, data: Dataset = data) -> np.ndarray:
                return -c * sum_losses(np.asarray(theta, dtype=float).reshape(-1, 1), data,
                                       problem)

            laws.append(BestOfK(law, self.runs, log_weight))
        return laws[0], laws[1]

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The ε(δ) of the released law on the pair, computed numerically for p = 1
        (:meth:`selection_laws`, :func:`dpbench.privacy.selection_law.best_of_k_epsilon`:
        quadrature of the selection's normaliser, relative error ≲ 1e-10 on smooth losses); for a
        noisy SGD base (last iterate on an interval C) from its exact laws (:meth:`_line_laws`,
        :func:`~dpbench.numerics.line_law.line_epsilon`); ``None`` otherwise. It is far below the ledger's ε: composition charges all k runs and
        the selection, while the release is one candidate, tilted by the selection."""
        laws = self.selection_laws(d0, d1, problem, epsilon=epsilon, delta=delta)
        if laws is not None:
            return best_of_k_epsilon(laws[0], laws[1], delta)
        line = self._line_laws(d0, d1, problem, epsilon, delta)   # a noisy SGD base
        return None if line is None else line_epsilon(line[0], line[1], delta)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) of the released law for p = 1 (:meth:`selection_laws`,
        tabulated: :class:`~dpbench.privacy.selection_law.RatioTable`), ``None`` otherwise. The
        table is cached per (configuration, pair, problem, ε, δ): the audit scores many batches
        of the same pair."""
        key = _table_key(self, d0, d1, problem, epsilon, delta)
        table = _TABLES.get(key)
        if table is None:
            laws = self.selection_laws(d0, d1, problem, epsilon=epsilon, delta=delta)
            if laws is None:
                line = self._line_laws(d0, d1, problem, epsilon, delta)   # a noisy SGD base
                if line is None:
                    return None
                return line_log_ratio(line[0], line[1], np.asarray(thetas, dtype=float)[:, 0])
            table = _TABLES[key] = laws[0].ratio_table(laws[1])
            if len(_TABLES) > _TABLE_CACHE_SIZE:
                _TABLES.popitem(last=False)
        else:
            _TABLES.move_to_end(key)
        return table.log_ratio(np.asarray(thetas, dtype=float)[:, 0])

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease:
        """``size`` independent releases of :meth:`run` (class docstring, 'Audit path'): k·size
        base releases, k per row, then one selection per row."""
        base = self._checked_base()
        eps_run, delta_run, eps_sel = self.run_budget(epsilon, delta)
        k, p = self.runs, data.p
        batch = base.release_batch(data, problem, epsilon=eps_run, delta=delta_run, rng=rng,
                                   size=k * size)
        if batch is not None:
            candidates, ledgers = batch.thetas, [batch.ledger] * k
        else:
            releases = base.release_many(data, problem, epsilon=eps_run, delta=delta_run,
                                         rngs=[rng] * (k * size))
            candidates = np.stack([r.theta for r in releases])
            ledgers = [r.ledger for r in releases[:k]]
        candidates = candidates.reshape(size, k, p)
        losses = sum_losses(candidates.reshape(size * k, p), data, problem).reshape(size, k)
        idx, _ = select_candidates(losses, eps_sel, float(problem.lipschitz),
                                   float(problem.constraint.diameter), rng)
        return BatchRelease(candidates[np.arange(size), idx], self._ledger(ledgers, eps_sel))


class HighProbApprox(HighProb):
    """:class:`HighProb` around an (ε, δ)-DP base (``noisy_sgd``, ``localize_gaussian``).

    Identical algorithm and proof; each run gets ((1 − f)ε/k, δ/k), the selection ε_sel = f·ε and
    no δ, so the ledger totals at most (ε, δ). A separate registered class because ``privacy`` is
    a class attribute (see :class:`HighProb`).
    """

    name: ClassVar[str] = "high_prob_approx"
    summary: ClassVar[str] = ("k runs of an (ε,δ)-DP base plus an exponential-mechanism selection "
                              "(BST14 App. D, selection charged)")
    privacy: ClassVar[str] = "approx"
    version: ClassVar[str] = "2"  # 2: its noisy_sgd base's version 4 (ledger ε on the converged grid)
    params: ClassVar[dict[str, Param]] = {
        **HighProb.params,
        "base": Param("noisy_sgd", kind="str", choices=APPROX_BASES,
                      doc="registered (ε, δ)-DP mechanism run k times with its default parameters"),
    }


__all__ = ["HighProb", "HighProbApprox", "select_candidate", "select_candidates",
           "selection_probabilities", "rescaled_expression", "sum_losses"]
