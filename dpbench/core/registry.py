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

Plugins are imported lazily: the names come from the entry-point metadata, and a command imports
only the modules of the plugins it names (:func:`get`); :func:`available` imports them all (for
``dpbench list`` and the plugin harness).
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass, field
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
        "private_frank_wolfe": "dpbench.algorithms.private_frank_wolfe:PrivateFrankWolfe",
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
        "real_logistic": "dpbench.problems.real_data:RealLogistic",
        "real_hinge": "dpbench.problems.real_data:RealHinge",
        "real_least_squares": "dpbench.problems.real_data:RealLeastSquares",
        "lasso": "dpbench.problems.lasso:Lasso",
        "lasso_linf": "dpbench.problems.lasso_linf:LassoLinf",
    },
}

_BUILTIN["broken"] = {}  # dpbench's own broken mechanisms come in through the entry-point group
_BASES: dict[str, type] = {"algorithms": Algorithm, "problems": Problem, "broken": Algorithm}


class PluginWarning(UserWarning):
    """A plugin could not be loaded; it is skipped."""


@dataclass
class _Plugins:
    """The plugins of one kind: where each name is defined (read from the entry-point metadata
    without importing anything), and the classes imported so far (plus run-time registrations).
    A command imports only the plugins it names: the 38 built-in modules cost about a second."""

    targets: dict[str, Any]  # name -> "module:attr" (built-in) or an EntryPoint
    loaded: dict[str, type] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)


_cache: dict[str, _Plugins] = {}


def _plugins(kind: str) -> _Plugins:
    if kind not in _cache:
        targets: dict[str, Any] = dict(_BUILTIN[kind])
        for ep in entry_points(group=GROUPS[kind]):
            if ep.name in targets:
                warnings.warn(
                    f"{GROUPS[kind]} entry point {ep.name!r} ({ep.value}) shadows a built-in "
                    "plugin and is ignored", PluginWarning, stacklevel=4)
                continue
            targets[ep.name] = ep
        _cache[kind] = _Plugins(targets)
    return _cache[kind]


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _load_entry_point(kind: str, ep: Any) -> tuple[type | None, str]:
    """The class an entry point names, or ``None`` and why not (a broken third-party plugin
    must never crash dpbench)."""
    base = _BASES[kind]
    try:
        obj = ep.load()
    except Exception as exc:
        return None, (f"could not load {GROUPS[kind]} plugin {ep.name!r} from {ep.value}: "
                      f"{type(exc).__name__}: {exc}")
    if not (isinstance(obj, type) and issubclass(obj, base)):
        return None, (f"{GROUPS[kind]} plugin {ep.name!r} ({ep.value}) is not a subclass of "
                      f"dpbench.{base.__name__}; skipped")
    if obj.name != ep.name:
        warnings.warn(
            f"{GROUPS[kind]} plugin {ep.name!r} declares name {obj.name!r}; the entry-point "
            "name is used", PluginWarning, stacklevel=4)
    return obj, ""


def _resolve(kind: str, name: str) -> tuple[type | None, str]:
    """Import the plugin ``name`` of ``kind`` if it is not yet: its class, or ``None`` and why
    not (``""``: no such name). Each failure is warned about once."""
    plugins = _plugins(kind)
    if name in plugins.loaded:
        return plugins.loaded[name], ""
    target = plugins.targets.get(name)
    if target is None:
        return None, ""
    if isinstance(target, str):  # built-in: a failure here is a bug, not a plugin to skip
        obj, why = _load(target), ""
    else:
        obj, why = _load_entry_point(kind, target)
    if obj is None:
        if name not in plugins.failed:
            plugins.failed.add(name)
            warnings.warn(why, PluginWarning, stacklevel=4)
        return None, why
    plugins.loaded[name] = obj
    return obj, ""


def _kinds(kind: str, include_broken: bool) -> list[str]:
    """The groups to look in for ``kind``: the broken zoo is an algorithm group of its own."""
    return [kind] + (["broken"] if include_broken and kind == "algorithms" else [])


def available(kind: str, refresh: bool = False, include_broken: bool = False
              ) -> dict[str, type]:
    """All registered plugins of ``kind`` ("algorithms" or "problems"), by name, imported; the
    deliberately broken mechanisms only with ``include_broken`` (they are never shadowed by, nor
    shadow, a regular algorithm of the same name: regular plugins win). Commands that name their
    plugins use :func:`get`, which imports only those."""
    if kind not in ("algorithms", "problems"):
        raise ValueError(f"kind must be 'algorithms' or 'problems', got {kind!r}")
    kinds = _kinds(kind, include_broken)
    for k in kinds:
        if refresh:
            _cache.pop(k, None)
        for name in list(_plugins(k).targets):
            _resolve(k, name)
    if len(kinds) == 1:
        return _plugins(kind).loaded
    return {**_plugins("broken").loaded, **_plugins(kind).loaded}


def names(kind: str, include_broken: bool = False) -> list[str]:
    """Every registered name of ``kind``, sorted, without importing any plugin."""
    return sorted({n for k in _kinds(kind, include_broken)
                   for n in (*_plugins(k).targets, *_plugins(k).loaded)})


def register(kind: str, cls: type, name: str | None = None) -> type:
    """Register a plugin class at run time (tests, notebooks). Returns the class."""
    base = _BASES[kind]
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise PluginError(f"{cls!r} is not a subclass of dpbench.{base.__name__}")
    _plugins(kind).loaded[name or cls.name] = cls
    return cls


def get(kind: str, name: str) -> type:
    """The plugin class called ``name`` (importing only its module); a clear error suggesting the
    closest name otherwise."""
    for k in _kinds(kind, include_broken=True):
        cls, why = _resolve(k, name)
        if cls is not None:
            return cls
        if why:
            raise UserInputError(f"{kind[:-1]} {name!r} is registered but cannot be used: {why}")
    regular = names(kind)
    raise UserInputError(
        f"unknown {kind[:-1]} {name!r}{did_you_mean(name, regular)}; "
        f"registered: {', '.join(regular)}")


def get_algorithm(name: str) -> type[Algorithm]:
    return get("algorithms", name)


def get_problem(name: str) -> type[Problem]:
    return get("problems", name)
