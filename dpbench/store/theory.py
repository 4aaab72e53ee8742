"""What a store records of the suite and its theory, computed without opening the store (no
zarr): :meth:`Store.prepare <.cube.Store.prepare>` writes it, and the check that a finished
store needs no run (:mod:`.summary`) compares it with what is written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.seeding import stable_hash

if TYPE_CHECKING:
    from ..config.suite import Experiment, Suite


def suite_record(suite: Suite) -> dict[str, Any]:
    """The suite's entries in the store's root metadata."""
    return {"suite_name": suite.name, "suite_source": suite.source, "suite_yaml": suite.text,
            "suite_hash": stable_hash(suite.text), "root_seed": suite.root_seed}


def rate_cards(exp: Experiment) -> dict[str, dict[str, Any] | None]:
    """Per algorithm label, its rate card (as stored) at the experiment's first grid point."""
    first = {a: v[0] for a, v in exp.grid.items()}
    out: dict[str, dict[str, Any] | None] = {}
    for spec in exp.algorithms:
        card = spec.build(exp.algorithm_axes(first)).rate_card()
        out[spec.label] = card.to_dict() if card else None
    return out


def oracle_kinds(exp: Experiment) -> dict[str, dict[str, str]]:
    """Per algorithm label, the kind of its closed-form oracle on each problem label
    (:meth:`dpbench.core.algorithm.Algorithm.oracle_kind`)."""
    first = {a: v[0] for a, v in exp.grid.items()}
    built = {spec.label: spec.build(exp.problem_axes(first)) for spec in exp.problems}
    out = {}
    for spec in exp.algorithms:
        algo = spec.build(exp.algorithm_axes(first))
        out[spec.label] = {label: algo.oracle_kind(prob) for label, prob in built.items()}
    return out


def refreshed_theory(exp: Experiment, algorithms: dict[str, Any],
                     expectations: list[dict[str, Any]] | None = None,
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """An experiment's expected rates (with the records of their derived exponents,
    :mod:`dpbench.config.theory`; those unchanged in the stored ``expectations`` are reused), and
    its stored ``algorithms`` attributes with their rate cards and oracle kinds brought up to
    date. These never change results (they are the theory the analysis compares with), so every
    prepare refreshes them."""
    from ..config.theory import derivations

    algos = dict(algorithms)
    cards = rate_cards(exp)
    for label, kinds in oracle_kinds(exp).items():
        if label in algos:
            algos[label] = {**algos[label], "oracle_kinds": kinds, "rate_card": cards[label]}
    derived = derivations(exp, expectations)
    out = []
    for e in exp.expectations:
        d = e.to_dict()
        if e.id in derived:
            d["derivation"] = derived[e.id]
        out.append(d)
    return out, algos
