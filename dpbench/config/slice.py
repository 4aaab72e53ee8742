"""Slices: one part of a suite or a store (``--only experiment=…``, ``algorithm=…``,
``problem=…``), for ``run``, ``plan``, ``status``, ``report``, ``check``, ``diff`` and ``export``.

(Not to be confused with private selection, :mod:`dpbench.privacy.selection`.) A slice is a
conjunction over keys and a union within a key: ``--only
experiment=exp_mech,gibbs --only algorithm=noisy_sgd`` is every cell of those two experiments
whose algorithm is ``noisy_sgd``. An algorithm or problem value matches a label (the cube's
coordinate) or the registered name behind labels (so ``algorithm=noisy_sgd`` selects every
variant of it). Every value must match something in what it selects from: a typo is an error
naming ``--only`` and the values there are, never an empty run that looks like success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import UserInputError

KEYS = ("experiment", "algorithm", "problem")
OPTION = "--only"


class SliceError(UserInputError):
    """A malformed ``--only`` or one that matches nothing (exit 2)."""


@dataclass(frozen=True)
class Slice:
    """Selected values per key (``None``: the key does not restrict)."""

    experiment: frozenset[str] | None = None
    algorithm: frozenset[str] | None = None
    problem: frozenset[str] | None = None

    @classmethod
    def parse(cls, items: Sequence[str] | None) -> Slice:
        """From ``--only KEY=VALUE[,VALUE…]`` options (repeatable; a repeated key adds values)."""
        chosen: dict[str, set[str]] = {}
        for item in items or ():
            key, sep, values = item.partition("=")
            key = key.strip()
            if not sep or key not in KEYS:
                raise SliceError(f"{OPTION} {item!r}: expected KEY=VALUE[,VALUE...] with KEY "
                                     f"one of {', '.join(KEYS)}")
            names = [v.strip() for v in values.split(",")]
            if not all(names):
                raise SliceError(f"{OPTION} {item!r}: an empty value")
            chosen.setdefault(key, set()).update(names)
        return cls(**{k: frozenset(v) for k, v in chosen.items()})

    def __bool__(self) -> bool:
        return any(getattr(self, k) is not None for k in KEYS)

    def describe(self) -> str:
        return "; ".join(f"{k}={','.join(sorted(v))}" for k in KEYS
                         if (v := getattr(self, k)) is not None) or "everything"

    def experiments(self, names: Iterable[str]) -> list[str]:
        """The selected names among ``names`` (in their order)."""
        names = list(names)
        if self.experiment is None:
            return names
        _require(self.experiment, set(names), "experiment")
        return [n for n in names if n in self.experiment]

    @staticmethod
    def _picks(chosen: frozenset[str] | None, labels: Sequence[str],
               names: Sequence[str]) -> list[bool]:
        if chosen is None:
            return [True] * len(labels)
        return [label in chosen or name in chosen for label, name in zip(labels, names)]

    def picks(self, kind: str, labels: Sequence[str], names: Sequence[str]) -> list[bool]:
        """Which of an experiment's algorithm (or problem) ``labels`` — registered as
        ``names`` — are selected."""
        return self._picks(getattr(self, kind), labels, names)

    def check(self, experiments: Mapping[str, Mapping[str, tuple[Sequence[str], Sequence[str]]]],
              ) -> None:
        """Refuse values that match nothing. ``experiments`` maps each experiment name to
        ``{"algorithm": (labels, names), "problem": (labels, names)}``."""
        kept = self.experiments(experiments)
        for kind in ("algorithm", "problem"):
            chosen = getattr(self, kind)
            if chosen is None:
                continue
            there: set[str] = set()
            for name in kept:
                labels, names = experiments[name][kind]
                there.update(labels)
                there.update(names)
            _require(chosen, there, kind)

    def positions(self, index: Mapping[str, tuple[Sequence[str], Sequence[str]]],
                  ) -> dict[str, list[int]]:
        """The selected positions along the ``algorithm`` and ``problem`` axes of an experiment
        whose (labels, names) are ``index`` (``ds.isel(**positions)`` is the slice)."""
        return {kind: [i for i, keep in enumerate(self.picks(kind, *index[kind])) if keep]
                for kind in ("algorithm", "problem")}

    def mask(self, shape: Sequence[int],
             index: Mapping[str, tuple[Sequence[str], Sequence[str]]]) -> np.ndarray:
        """The boolean mask of selected cells of an experiment's cube of ``shape`` (algorithm,
        problem, …), whose algorithm and problem (labels, names) are ``index``."""
        a = np.asarray(self.picks("algorithm", *index["algorithm"]), dtype=bool)
        p = np.asarray(self.picks("problem", *index["problem"]), dtype=bool)
        both = a.reshape((-1,) + (1,) * (len(shape) - 1)) & p.reshape(
            (1, -1) + (1,) * (len(shape) - 2))
        return np.broadcast_to(both, tuple(shape))


def _require(chosen: frozenset[str], there: set[str], kind: str) -> None:
    unknown = sorted(chosen - there)
    if unknown:
        raise SliceError(f"{OPTION} {kind}={','.join(unknown)}: no such {kind} here; "
                             f"the {kind}s are {', '.join(sorted(there)) or '(none)'}")


def suite_index(suite: Any) -> dict[str, dict[str, tuple[list[str], list[str]]]]:
    """What :meth:`Slice.check` needs, from a suite."""
    return {e.name: {"algorithm": ([a.label for a in e.algorithms], [a.name for a in e.algorithms]),
                     "problem": ([p.label for p in e.problems], [p.name for p in e.problems])}
            for e in suite.experiments}


def suite_masks(only: Slice, suite: Any) -> dict[str, np.ndarray]:
    """Per experiment of ``suite``, the mask of selected cells (unselected experiments: all
    False). Checks the slice first."""
    indexes = suite_index(suite)
    only.check(indexes)
    kept = set(only.experiments(indexes))
    out = {}
    for e in suite.experiments:
        if e.name not in kept:
            out[e.name] = np.zeros(e.shape, dtype=bool)
            continue
        out[e.name] = only.mask(e.shape, indexes[e.name])
    return out
