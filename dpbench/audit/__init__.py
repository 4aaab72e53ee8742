"""Empirical privacy auditing: every mechanism's privacy claim tested at scale.

``dpbench audit SUITE.yaml --store PATH`` audits each point (audit, algorithm, problem, grid
point, canary) within a time budget: a search over canaries and open public parameters on pilot
runs, events chosen on the pilots' releases from several scores (projection, the canary's loss
difference, a declared density ratio, fitted distinguishers), then fresh confirmation runs counted
in those events, as ordinary dask cells; the counts give empirical lower bounds on ε
(Clopper–Pearson) and μ (GDP; Nasr et al. 2023), Bonferroni-corrected over the events and the
points of the run, and each point states its resolution. See ``docs/audit.md``.

Modules: :mod:`~dpbench.config.audit` (suite format), :mod:`~dpbench.core.neighbours` (canaries),
:mod:`~dpbench.audit.points` (points and configurations), :mod:`~dpbench.audit.scores` and
:mod:`~dpbench.audit.events` (what is tested), :mod:`~dpbench.audit.procedure` (the decisions of
a point), :mod:`~dpbench.audit.runs` (running a batch), :mod:`~dpbench.audit.stats` (the bounds),
:mod:`~dpbench.audit.engine` (rounds on a backend, and in-process), :mod:`~dpbench.audit.store`
(the audit groups of the zarr store), :mod:`~dpbench.audit.zoo` / :mod:`~dpbench.audit.power` (the
broken zoo and the auditor's power).

Names are re-exported lazily, so that ``import dpbench.config.suite`` (which validates ``audits:``)
does not import the engine.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CANARIES": "neighbours", "CanarySpec": "neighbours", "NeighbourPair": "neighbours",
    "neighbouring_pair": "neighbours",
    "per_audit_alpha": "stats", "resolution": "stats",
    "AuditSettings": "spec", "AuditSpec": "spec",
    "AuditPoint": "points", "Config": "points",
    "AuditSummary": "engine", "audit_in_process": "engine", "plan_audits": "engine",
    "run_audits": "engine",
    "open_audit": "store", "audit_names": "store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dpbench.audit' has no attribute {name!r}")
    package = {"neighbours": "dpbench.core.neighbours", "spec": "dpbench.config.audit"}
    return getattr(importlib.import_module(package.get(module, f"{__name__}.{module}")), name)


def __dir__() -> list[str]:
    return __all__
