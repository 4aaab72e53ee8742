"""Public check harness for mechanism plugins (in the spirit of scikit-learn's ``check_estimator``).

Plugin authors run every check on their mechanism with one call::

    from dpbench.testing import check_algorithm
    check_algorithm(MyMechanism())

or, under pytest, one test per check::

    from dpbench.testing import parametrize_with_checks

    @parametrize_with_checks([MyMechanism(), MyMechanism(variant="fast")])
    def test_dpbench_compatible(algorithm, problem, check):
        check(algorithm, problem)

Every check has the signature ``check_xxx(algorithm, problem=None) -> None`` and raises
``AssertionError`` with a message saying what is wrong. ``problem=None`` means
:func:`default_problem`. The checks are cheap (small n and p) and test the *contract* —
declarations, parameter validation, privacy arguments, picklability, use of the injected
generator only, the ledger — plus three statistical checks: an empirical privacy audit
(:func:`check_empirical_privacy`), the ε → ∞ limit (:func:`check_epsilon_limit`) and a smoke test of
the rate card (:func:`check_rate_smoke`). Passing them is necessary, not sufficient: the audit
finds gross under-counting of ε (e.g. noise several times too small), not subtle errors.

Problem plugins have one check of their own, :func:`check_nonsmooth_active`: a problem that
declares β = ∞ must have kinks that an optimiser actually meets inside C for its data law (not only
on the boundary of C, where e.g. a hinge on a too-small ball is linear on the whole interior)::

    from dpbench.testing import check_nonsmooth_active
    check_nonsmooth_active(MyProblem())

An audit written by hand (a pair of datasets and a score of your own, as
``examples/dpbench-diffprivlib/scripts/jacobian_audit.py`` does) uses the audit's statistics:
:func:`epsilon_lower_bounds` (Clopper–Pearson lower bounds on ε from event counts) and
:func:`audit_bound` (events chosen on half the runs, confirmed on the other half). They load scipy,
so they are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .algorithm_checks import (
    ALGORITHM_CHECKS,
    CheckCase,
    audit_budget,
    audit_epsilon,
    privacy_audit,
    check_algorithm,
    check_case,
    check_declarations,
    check_dimension,
    check_empirical_privacy,
    check_epsilon_limit,
    check_no_global_rng,
    check_parameter_validation,
    check_picklable,
    check_privacy_arguments,
    check_rate_smoke,
    check_release_and_ledger,
    check_release_batch,
    check_release_many,
    default_problem,
    parametrize_with_checks,
    rate_fit,
)
from .problem_checks import (
    PROBLEM_CHECKS,
    KinkActivity,
    check_nonsmooth_active,
    check_problem,
    check_problem_bounds,
    check_problem_convexity,
    check_problem_data,
    check_problem_declarations,
    check_problem_kernel,
    check_problem_lipschitz,
    check_problem_nonsmooth,
    check_problem_optimum,
    kink_activity,
)

__all__ = [
    "ALGORITHM_CHECKS", "check_algorithm", "parametrize_with_checks", "default_problem",
    "check_declarations", "check_parameter_validation", "check_privacy_arguments",
    "check_picklable", "check_no_global_rng", "check_release_and_ledger", "check_release_many",
    "check_release_batch",
    "check_empirical_privacy", "check_epsilon_limit", "check_rate_smoke", "audit_budget",
    "audit_epsilon", "privacy_audit", "rate_fit",
    "KinkActivity", "kink_activity", "check_nonsmooth_active",
    "CheckCase", "check_case", "check_dimension",
    "PROBLEM_CHECKS", "check_problem", "check_problem_declarations", "check_problem_data",
    "check_problem_bounds",
    "check_problem_lipschitz", "check_problem_convexity", "check_problem_optimum",
    "check_problem_kernel", "check_problem_nonsmooth",
    "AuditBound", "audit_bound", "epsilon_lower_bounds",
]

if TYPE_CHECKING:
    from ..audit.stats import AuditBound, audit_bound, epsilon_lower_bounds

#: Public names imported on first use (PEP 562): the audit statistics import scipy.
_LAZY: dict[str, str] = {name: "dpbench.audit.stats"
                         for name in ("AuditBound", "audit_bound", "epsilon_lower_bounds")}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpbench.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
