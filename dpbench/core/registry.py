"""Plugin registry: in-tree plugins plus the entry-point groups ``dpbench.algorithms`` and
``dpbench.problems``.

A third group, ``dpbench.broken_algorithms``, holds mechanisms that are wrong on purpose (the
audit's broken zoo, declared in dpbench's own ``pyproject.toml``; docs/audit.md). They resolve by
name like any algorithm, so an audit suite can name them, but :func:`available` and
``dpbench list`` leave them out unless asked (``include_broken=True``, ``dpbench list --broken``).

A third-party plugin registers a class under one of the groups in its ``pyproject.toml``::

    [project.entry-points."dpbench.algorithms"]
    my_mechanism = "my_package.module:MyMechanism"

A plugin that fails to import, or is not a subclass of the right base, produces a
:class:`PluginWarning` and is skipped; it never crashes dpbench (xarray's backend discovery works the
same way). In-tree names win over entry points of the same name (with a warning).
"""

from __future__ import annotations

import importlib
import warnings
from importlib.metadata import entry_points
from typing import Any

from .algorithm import Algorithm
from .errors import PluginError, UserInputError, did_you_mean
from .problem import Problem

GROUPS = {"algorithms": "dpbench.algorithms", "problems": "dpbench.problems",
          "broken": "dpbench.broken_algorithms"}

_BUILTIN: dict[str, dict[str, str]] = {
    "algorithms": {
        "nonprivate_erm": "dpbench.algorithms.nonprivate:NonPrivateERM",
        "noisy_sgd": "dpbench.algorithms.noisy_sgd:NoisySGD",
        "output_perturbation": "dpbench.algorithms.output_perturbation:OutputPerturbation",
        "exp_mech": "dpbench.algorithms.exp_mech:ExpMech",
        "exp_mech_net": "dpbench.algorithms.exp_mech_net:ExpMechNet",
        "exp_mech_grid_walk": "dpbench.algorithms.grid_walk:ExpMechGridWalk",
        "objective_perturbation": "dpbench.algorithms.objective_perturbation:ObjectivePerturbation",
        "huber_objective_perturbation": "dpbench.algorithms.huber_objective_perturbation:HuberObjectivePerturbation",
        "regularized_output_perturbation": "dpbench.algorithms.regularized_output_perturbation:RegularizedOutputPerturbation",
        "high_prob": "dpbench.algorithms.high_prob:HighProb",
        "high_prob_approx": "dpbench.algorithms.high_prob:HighProbApprox",
        "localize": "dpbench.algorithms.localize:Localize",
        "localize_gaussian": "dpbench.algorithms.localize:LocalizeGaussian",
        "rem": "dpbench.algorithms.rem:REM",
        "gibbs": "dpbench.algorithms.gibbs:Gibbs",
        "rashomon": "dpbench.algorithms.rashomon:Rashomon",
        "iterated_exp_mech": "dpbench.algorithms.iterated_exp_mech:IteratedExpMech",
        "noisy_mirror_descent": "dpbench.algorithms.noisy_mirror_descent:NoisyMirrorDescent",
        "langevin": "dpbench.algorithms.langevin:Langevin",
    },
    "problems": {
        "lb_lin": "dpbench.problems.lb_lin:LBLin",
        "lb_quad": "dpbench.problems.lb_quad:LBQuad",
        "hinge_svm": "dpbench.problems.hinge_svm:HingeSVM",
        "logistic": "dpbench.problems.logistic:Logistic",
        "kink_sc": "dpbench.problems.kink_sc:KinkSC",
        "hub_1d": "dpbench.problems.hub_1d:Hub1D",
        "median": "dpbench.problems.median:EuclideanMedian",
        "linear_ridge": "dpbench.problems.linear_ridge:LinearRidge",
        "mean_est": "dpbench.problems.mean_est:MeanEst",
        "sep_abs": "dpbench.problems.sep_abs:SepAbs",
        "lin_ball": "dpbench.problems.lin_ball:LinBall",
        "lin_cube": "dpbench.problems.lin_cube:LinCube",
        "flat_1d": "dpbench.problems.flat_1d:Flat1D",
    },
}

_BUILTIN["broken"] = {}  # dpbench's own broken mechanisms come in through the entry-point group
_BASES: dict[str, type] = {"algorithms": Algorithm, "problems": Problem, "broken": Algorithm}
_cache: dict[str, dict[str, type]] = {}


class PluginWarning(UserWarning):
    """A plugin could not be loaded; it is skipped."""


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _discover(kind: str) -> dict[str, type]:
    base = _BASES[kind]
    found: dict[str, type] = {}
    for name, target in _BUILTIN[kind].items():
        found[name] = _load(target)
    for ep in entry_points(group=GROUPS[kind]):
        if ep.name in found:
            warnings.warn(
                f"{GROUPS[kind]} entry point {ep.name!r} ({ep.value}) shadows a built-in plugin "
                "and is ignored", PluginWarning, stacklevel=3)
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party plugin must never crash dpbench
            warnings.warn(
                f"could not load {GROUPS[kind]} plugin {ep.name!r} from {ep.value}: "
                f"{type(exc).__name__}: {exc}", PluginWarning, stacklevel=3)
            continue
        if not (isinstance(obj, type) and issubclass(obj, base)):
            warnings.warn(
                f"{GROUPS[kind]} plugin {ep.name!r} ({ep.value}) is not a subclass of "
                f"dpbench.{base.__name__}; skipped", PluginWarning, stacklevel=3)
            continue
        if obj.name != ep.name:
            warnings.warn(
                f"{GROUPS[kind]} plugin {ep.name!r} declares name {obj.name!r}; the entry-point "
                "name is used", PluginWarning, stacklevel=3)
        found[ep.name] = obj
    return found


def available(kind: str, refresh: bool = False, include_broken: bool = False
              ) -> dict[str, type]:
    """All registered plugins of ``kind`` ("algorithms" or "problems"), by name; the deliberately
    broken mechanisms only with ``include_broken`` (they are never shadowed by, nor shadow, a
    regular algorithm of the same name: regular plugins win)."""
    if kind not in ("algorithms", "problems"):
        raise ValueError(f"kind must be 'algorithms' or 'problems', got {kind!r}")
    if refresh or kind not in _cache:
        _cache[kind] = _discover(kind)
    if not (include_broken and kind == "algorithms"):
        return _cache[kind]
    if refresh or "broken" not in _cache:
        _cache["broken"] = _discover("broken")
    return {**_cache["broken"], **_cache[kind]}


def register(kind: str, cls: type, name: str | None = None) -> type:
    """Register a plugin class at run time (tests, notebooks). Returns the class."""
    base = _BASES[kind]
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise PluginError(f"{cls!r} is not a subclass of dpbench.{base.__name__}")
    available(kind)[name or cls.name] = cls
    return cls


def get(kind: str, name: str) -> type:
    """The plugin class called ``name``; a clear error suggesting the closest name otherwise."""
    plugins = available(kind)
    if name in plugins:
        return plugins[name]
    if kind == "algorithms":
        broken = available(kind, include_broken=True)
        if name in broken:
            return broken[name]
    singular = kind[:-1]
    raise UserInputError(
        f"unknown {singular} {name!r}{did_you_mean(name, plugins)}; "
        f"registered: {', '.join(sorted(plugins))}")


def get_algorithm(name: str) -> type[Algorithm]:
    return get("algorithms", name)


def get_problem(name: str) -> type[Problem]:
    return get("problems", name)
