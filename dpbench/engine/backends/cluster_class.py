"""The class a cluster profile names: the allow-list of cluster modules, importing the class, and
the profile checks that need it (docs/clusters.md; docs/reliability.md, 'Cluster profiles are
data, not code').

A profile may name a class only from :data:`CLUSTER_MODULES` (or their submodules), and the class
must be a dask cluster manager (a subclass of ``distributed.deploy.Cluster``): anything else is
refused before it is imported. :func:`load_profile` is the profile loader every caller uses: it
reads and validates a profile's structure with :func:`dpbench.config.cluster.read_profile` and
adds these checks at their place in its order; its keyword arguments are checked against the
class's signature (:func:`accepted_kwargs`) when the class can be imported.
:func:`cluster_class` imports the class a run starts.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...config.cluster import ClassChecks, Profile, read_profile
from ...config.validation import Errors
from ...core.errors import UserInputError

#: The modules (and their submodules) a profile may name; nothing else is ever imported.
CLUSTER_MODULES = ("dask.distributed", "distributed", "dask_jobqueue", "dask_kubernetes",
                   "dask_cloudprovider", "dask_gateway")
#: The pip extra that provides each optional cluster-manager package.
EXTRAS = {"dask_jobqueue": "slurm", "dask_kubernetes": "kubernetes"}
#: Constructor arguments that make no sense in a YAML file (not offered as allowed values).
_INTERNAL_KWARGS = frozenset({"loop", "asynchronous", "job_cls", "scheduler_cls", "worker_class"})


def allowed_module(module: str) -> bool:
    """Whether ``module`` is one of :data:`CLUSTER_MODULES` or a submodule of one."""
    return any(module == m or module.startswith(m + ".") for m in CLUSTER_MODULES)


def is_cluster_class(obj: Any) -> bool:
    """Whether ``obj`` is a dask cluster manager class (``distributed.deploy.Cluster``)."""
    from distributed.deploy.cluster import Cluster

    return inspect.isclass(obj) and issubclass(obj, Cluster)


def import_cluster_module(module: str) -> Any:
    """Import an allowed cluster module without letting it replace this process's signal
    handlers: dask-jobqueue's ``runner`` module, imported with the package, installs a SIGINT
    handler that calls ``sys.exit()``, which would turn Ctrl-C into exit code 0."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return importlib.import_module(module)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return importlib.import_module(module)
    finally:
        for sig, handler in saved.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)


def import_class(module: str, cls: str) -> type | None:
    """The class ``module.cls`` when the module is allowed and it imports; ``None`` otherwise
    (no error: :func:`cluster_class` reports why)."""
    if not allowed_module(module):
        return None
    try:
        obj = getattr(import_cluster_module(module), cls)
    except (ImportError, AttributeError):
        return None
    return obj if inspect.isclass(obj) else None


def _init_params(cls: type) -> tuple[set[str], bool]:
    """Named parameters of ``cls.__init__`` and whether it also takes ``**kwargs``."""
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return set(), True
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names - {"self"}, any(p.kind is p.VAR_KEYWORD for p in params)


def _mro_params(cls: type) -> set[str] | None:
    """Keyword arguments ``cls`` accepts, following ``**kwargs`` up its bases; None if open."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            return None
        if "__init__" not in vars(klass):
            continue
        own, open_ = _init_params(klass)
        names |= own
        if not open_:
            return names
    return None


def accepted_kwargs(cls: type) -> set[str] | None:
    """Keyword arguments a cluster-manager class accepts, or ``None`` when it cannot be known.

    dask-jobqueue clusters forward ``**job_kwargs`` to their ``job_cls``; LocalCluster forwards
    ``**worker_kwargs`` to its worker (``Nanny``/``Worker``); otherwise ``**kwargs`` go to the
    base classes.
    """
    own, open_ = _init_params(cls)
    if not open_:
        return own
    job_cls = getattr(cls, "job_cls", None)
    if inspect.isclass(job_cls):
        job = _mro_params(job_cls)
        return None if job is None else own | job - {"scheduler"}
    from distributed import LocalCluster, Nanny, Worker

    if issubclass(cls, LocalCluster):
        return own | _init_params(Nanny)[0] | _init_params(Worker)[0]
    return _mro_params(cls)


def _admit(errs: Errors, module: str, clsname: str) -> bool:
    """Whether a profile may name ``module.clsname``: an allowed module (checked before any
    import), and a dask cluster manager when the class can be imported."""
    if not allowed_module(module):
        errs.add("cluster.module", f"{module!r} is not a dask cluster module; allowed: "
                                   f"{', '.join(CLUSTER_MODULES)} (or their submodules)")
        return False
    cls = import_class(module, clsname)
    if cls is not None and not is_cluster_class(cls):
        errs.add("cluster.class", f"{module}.{clsname} is not a dask cluster manager "
                                  "(a subclass of distributed.deploy.Cluster)")
        return False
    return True


def _check_kwargs(errs: Errors, module: str, clsname: str, kwargs: Mapping[str, Any]) -> None:
    """Keyword arguments the class does not accept (when its signature tells)."""
    cls = import_class(module, clsname)
    allowed = accepted_kwargs(cls) if cls is not None else None
    if allowed is not None:
        errs.unknown_keys("cluster.kwargs", kwargs, tuple(sorted(allowed - _INTERNAL_KWARGS)),
                          f"unknown keyword argument of {clsname}")


#: The checks :func:`load_profile` adds to the structural validation of a profile.
_CLASS_CHECKS = ClassChecks(admit=_admit, check_kwargs=_check_kwargs)


def load_profile(path: str | Path) -> Profile:
    """Read and validate a cluster profile.

    Raises :class:`~dpbench.config.cluster.ProfileError` listing every problem (``file:
    field.path: message; allowed: ...``). Keyword arguments are checked against the class's
    signature when it can be imported; a class that cannot be imported is reported by
    :func:`cluster_class`, not here.
    """
    return read_profile(path, _CLASS_CHECKS)


def cluster_class(prof: Profile, source: str | Path) -> type:
    """The cluster-manager class a profile names (a clear error if it cannot be imported, or is
    not an allowed dask cluster manager)."""
    if not allowed_module(prof.module):
        raise UserInputError(f"{source}: cluster.module: {prof.module!r} is not a dask cluster "
                             f"module; allowed: {', '.join(CLUSTER_MODULES)}")
    try:
        cls = getattr(import_cluster_module(prof.module), prof.cls)
        if not is_cluster_class(cls):
            raise UserInputError(f"{source}: cluster.class: {prof.module}.{prof.cls} is not a "
                                 "dask cluster manager (a subclass of distributed.deploy.Cluster)")
        return cls
    except (ImportError, AttributeError) as exc:
        extra = EXTRAS.get(prof.module.split(".")[0])
        hint = (f"install it with pip install 'dp-ratebench[{extra}]'" if extra
                else "is the optional extra installed?")
        raise UserInputError(f"{source}: cluster: cannot load {prof.module}.{prof.cls}: {exc} "
                             f"({hint})") from None
