"""What a store records of a suite, computed once at plan time and handed to the store as
plain data (:mod:`dpbench.store.record`).

The store (:mod:`dpbench.store.cube`) knows no plugin: it writes and compares what this module
hands it. :func:`suite_record` builds, per experiment, its identity (fingerprint and
definition), its layout (dimensions, coordinates, shape), its attributes (mechanisms with their
privacy kind and requirements, problems with their constants) and its *theory*: each
mechanism's rate card and oracle kinds, and the expected rates with their derived exponents
(:mod:`.theory`). Each plugin is built once per experiment, at the grid's first point.

The theory never changes results (it is what the analysis compares with), so every run
refreshes it in the store; derived exponents unchanged since the store's last run are reused
from it (``previous``) rather than recalibrated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.schema import NONDETERMINISTIC_VARS, STATUS_NAMES
from ..core.seeding import stable_hash
from ..store.record import ExperimentRecord, SuiteRecord
from .suite import Experiment, Suite
from .theory import derivations

__all__ = ["experiment_record", "suite_record"]

#: How the cube's excess risks are normalised (stored with every experiment).
NORMALISATION = ("average (excess of the mean loss, (1/n)·Σℓ); BST14 sum-scale rates divide "
                 "by n")


def suite_record(suite: Suite, previous: Mapping[str, Any] | None = None,
                 experiments: bool = True) -> SuiteRecord:
    """The record of ``suite``; ``previous``: per experiment name, the expectations a store
    holds (their derived exponents are reused when unchanged); ``experiments=False``: the root
    entries only (``dpbench audit`` prepares its store without the experiments)."""
    meta = {"suite_name": suite.name, "suite_source": suite.source, "suite_yaml": suite.text,
            "suite_hash": stable_hash(suite.text), "root_seed": suite.root_seed}
    exps = tuple(experiment_record(suite, e, (previous or {}).get(e.name))
                 for e in suite.experiments) if experiments else ()
    return SuiteRecord(meta, exps)


def experiment_record(suite: Suite, exp: Experiment,
                      previous: list[Mapping[str, Any]] | None = None) -> ExperimentRecord:
    """The record of one experiment (see the module docstring)."""
    first = exp.first_point
    problems = {spec.label: spec.build(dict(first.problem_axes)) for spec in exp.problems}
    algos: dict[str, Any] = {}
    theory: dict[str, dict[str, Any]] = {}
    for spec in exp.algorithms:
        algo = spec.build(dict(first.algorithm_axes))
        card = algo.rate_card()
        theory[spec.label] = {
            "rate_card": card.to_dict() if card else None,
            "oracle_kinds": {label: algo.oracle_kind(prob) for label, prob in problems.items()}}
        algos[spec.label] = {"algorithm": spec.name, "params": spec.params,
                             "version": spec.cls.version, "privacy": algo.privacy,
                             "citation": spec.cls.citation,
                             "requires": list(algo.requirements()), **theory[spec.label]}
    probs = {spec.label: {"problem": spec.name, "params": spec.params,
                          "version": spec.cls.version, "citation": spec.cls.citation,
                          "constants": problems[spec.label].constants(),
                          "has_population": spec.cls.has_population}
             for spec in exp.problems}
    attrs = {
        "experiment": exp.name, "description": exp.description, "suite": suite.name,
        "root_seed": suite.root_seed, "seeds": exp.seeds, "normalisation": NORMALISATION,
        "status_codes": {str(k): v for k, v in STATUS_NAMES.items()},
        "nondeterministic_variables": list(NONDETERMINISTIC_VARS),
        "algorithms": algos, "problems": probs, "extra_axes": dict(exp.extra_routing),
    }
    derived = derivations(exp, previous)
    expectations = []
    for e in exp.expectations:
        d = e.to_dict()
        if e.id in derived:
            d["derivation"] = derived[e.id]
        expectations.append(d)
    coords: dict[str, list[Any]] = {
        "algorithm": [a.label for a in exp.algorithms],
        "problem": [p.label for p in exp.problems],
        **exp.grid, "seed": list(range(exp.seeds))}
    return ExperimentRecord(exp.name, exp.fingerprint(suite.root_seed),
                            exp.definition(suite.root_seed), exp.dims, coords, exp.shape, attrs,
                            theory, expectations)
