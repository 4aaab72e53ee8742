"""Empirical privacy auditing: every mechanism's privacy claim tested at scale.

``dpbench audit SUITE.yaml --store PATH`` runs each audit point (audit, algorithm, problem, grid
point, canary) many times on a pair of replace-one neighbouring datasets, as ordinary dask cells
(batches of runs), and turns the stored scores into an empirical lower bound on ε (Clopper–Pearson
on a confirmation half, threshold chosen on a selection half; a GDP bound after Nasr et al. 2023),
Bonferroni-corrected over all points of the run. See ``docs/audit.md``.

Modules: :mod:`~dpbench.config.audit` (suite format), :mod:`~dpbench.core.neighbours` (neighbouring
pairs), :mod:`~dpbench.audit.runs` (running a batch), :mod:`~dpbench.audit.stats` (the bounds),
:mod:`~dpbench.audit.engine` (planning and execution on dask), :mod:`~dpbench.audit.store` (the
audit groups of the zarr store), :mod:`~dpbench.audit.zoo` / :mod:`~dpbench.audit.power` (the
broken zoo and the auditor's power).

Names are re-exported lazily, so that ``import dpbench.config.suite`` (which validates ``audits:``)
does not import the engine.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CANARIES": "canaries", "NeighbourPair": "canaries", "neighbouring_pair": "canaries",
    "AuditBatch": "runs", "run_audit_batch": "runs",
    "AuditBound": "stats", "audit_bound": "stats", "per_audit_alpha": "stats",
    "AuditSettings": "spec", "AuditSpec": "spec",
    "AuditPoint": "engine", "AuditSummary": "engine", "plan_audits": "engine",
    "run_audits": "engine",
    "open_audit": "store", "audit_names": "store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dpbench.audit' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return __all__
