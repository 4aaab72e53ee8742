"""Where tasks run: in-process, a LocalCluster (the embedded default), an existing scheduler, or a
cluster built from a profile file.

Precedence: ``--scheduler ADDRESS`` (or ``DASK_SCHEDULER_ADDRESS``), then ``--cluster
PROFILE.yaml``, then a LocalCluster with one single-threaded worker process per core (or
``--workers N``). ``--workers 0`` runs inline, without dask (for debugging).

A profile names a cluster-manager class the dask-ctl way::

    cluster:
      module: dask.distributed      # any importable module
      class: LocalCluster
      kwargs: {n_workers: 2, threads_per_worker: 1}
    scale: {jobs: 4}                # optional: cluster.scale(**scale)
    adapt: {minimum_jobs: 0, maximum_jobs: 20}   # optional: cluster.adapt(**adapt)
    dask_config: {distributed.scheduler.allowed-failures: 5}   # optional dask.config.set
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import UserInputError, did_you_mean

_PROFILE_KEYS = ("cluster", "scale", "adapt", "dask_config", "description")
_CLUSTER_KEYS = ("module", "class", "kwargs")


@dataclass(frozen=True)
class Profile:
    module: str
    cls: str
    kwargs: dict[str, Any]
    scale: dict[str, Any] | None
    adapt: dict[str, Any] | None
    dask_config: dict[str, Any]


def load_profile(path: str | Path) -> Profile:
    """Read and validate a cluster profile; errors name the field and the allowed values."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserInputError(f"{path}: cannot read the cluster profile: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"{path}: malformed YAML: {exc}") from None
    if not isinstance(raw, dict) or "cluster" not in raw:
        raise UserInputError(f"{path}: a profile is a mapping with a 'cluster' field "
                             "(module, class, kwargs)")
    for k in raw:
        if k not in _PROFILE_KEYS:
            raise UserInputError(f"{path}: {k}: unknown field{did_you_mean(k, _PROFILE_KEYS)}; "
                                 f"allowed: {', '.join(_PROFILE_KEYS)}")
    c = raw["cluster"]
    if not isinstance(c, dict):
        raise UserInputError(f"{path}: cluster: must be a mapping with module, class, kwargs")
    for k in c:
        if k not in _CLUSTER_KEYS:
            raise UserInputError(f"{path}: cluster.{k}: unknown field{did_you_mean(k, _CLUSTER_KEYS)}; "
                                 f"allowed: {', '.join(_CLUSTER_KEYS)}")
    for k in ("module", "class"):
        if not isinstance(c.get(k), str):
            raise UserInputError(f"{path}: cluster.{k}: required string")
    kwargs = c.get("kwargs", {}) or {}
    if not isinstance(kwargs, dict):
        raise UserInputError(f"{path}: cluster.kwargs: must be a mapping")
    for k in ("scale", "adapt", "dask_config"):
        if raw.get(k) is not None and not isinstance(raw[k], dict):
            raise UserInputError(f"{path}: {k}: must be a mapping")
    return Profile(c["module"], c["class"], kwargs, raw.get("scale"), raw.get("adapt"),
                   raw.get("dask_config") or {})


def cluster_class(prof: Profile, source: str | Path) -> type:
    """The cluster-manager class a profile names (a clear error if it cannot be imported)."""
    try:
        return getattr(importlib.import_module(prof.module), prof.cls)
    except (ImportError, AttributeError) as exc:
        raise UserInputError(f"{source}: cluster: cannot load {prof.module}.{prof.cls}: {exc} "
                             "(is the optional extra installed?)") from None


def _local_cluster(workers: int | None) -> Any:
    from distributed import LocalCluster

    n = workers if workers is not None else (os.cpu_count() or 1)
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                        dashboard_address=None, silence_logs=40)


@contextlib.contextmanager
def connect(scheduler: str | None = None, profile: str | Path | None = None,
            workers: int | None = None) -> Iterator[tuple[Any, str]]:
    """Yield ``(client, description)``; ``client`` is ``None`` for inline execution."""
    if workers is not None and workers < 0:
        raise UserInputError(f"--workers must be >= 0, got {workers}")
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if scheduler is None and profile is None and workers == 0:
        yield None, "inline (no dask)"
        return
    import dask
    from distributed import Client

    if scheduler is not None:
        with Client(scheduler, timeout="30s") as client:
            yield client, f"scheduler {scheduler}"
        return
    if profile is not None:
        prof = load_profile(profile)
        with dask.config.set(prof.dask_config):
            cls = cluster_class(prof, profile)
            with cls(**prof.kwargs) as cluster:
                if prof.scale:
                    cluster.scale(**prof.scale)
                if prof.adapt:
                    cluster.adapt(**prof.adapt)
                with Client(cluster) as client:
                    yield client, f"{prof.module}.{prof.cls} from {profile}"
        return
    with _local_cluster(workers) as cluster, Client(cluster) as client:
        n = len(cluster.workers)
        yield client, f"LocalCluster ({n} worker process{'es' if n != 1 else ''} x 1 thread)"
