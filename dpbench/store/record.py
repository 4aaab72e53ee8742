"""The records a store is prepared from: plain data about a suite and its experiments.

The store imports no plugin and calls none (docs/architecture.md, "Layers"): everything it
writes about a suite — identities, layout, attributes, the theory the analysis compares with —
arrives in these records, built once at plan time by :func:`dpbench.config.records.suite_record`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ExperimentRecord", "SuiteRecord"]


@dataclass(frozen=True)
class ExperimentRecord:
    """One experiment as the store writes it (see the module docstring)."""

    name: str
    fingerprint: str
    definition: dict[str, Any]
    dims: tuple[str, ...]
    coords: dict[str, list[Any]]
    shape: tuple[int, ...]
    #: The experiment group's attributes when it is created (the store adds the machine and
    #: package versions).
    attrs: dict[str, Any]
    #: Per mechanism label, its ``rate_card`` and ``oracle_kinds`` (refreshed on every run).
    theory: dict[str, dict[str, Any]]
    #: The expected rates, with their derived exponents (refreshed on every run).
    expectations: list[dict[str, Any]]

    def refreshed_algorithms(self, stored: Mapping[str, Any]) -> dict[str, Any]:
        """A store's ``algorithms`` attributes with this record's theory brought up to date
        (labels the store does not hold are left to the layout that adds them)."""
        return {label: ({**info, **self.theory[label]} if label in self.theory else info)
                for label, info in stored.items()}


@dataclass(frozen=True)
class SuiteRecord:
    """A suite as the store writes it: its root entries and its experiments."""

    meta: dict[str, Any]
    experiments: tuple[ExperimentRecord, ...]

    @property
    def root_seed(self) -> int:
        return int(self.meta["root_seed"])

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.experiments]

    def experiment(self, name: str) -> ExperimentRecord:
        return next(e for e in self.experiments if e.name == name)
