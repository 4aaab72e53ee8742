"""What a cluster profile would start, shown without starting it (``dpbench profile``): a summary
of the validated profile, then the batch job script (dask-jobqueue), the Kubernetes
``DaskCluster`` manifest (dask-kubernetes), or a LocalCluster summary (docs/clusters.md).
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import yaml

from ...config.cluster import Profile, worker_lifetime
from .cluster_class import EXTRAS, cluster_class, import_class, load_profile


def job_script(prof: Profile, cls: type) -> str:
    """The batch job script, from a cluster object bound to this machine (no job is submitted:
    jobs are only submitted by scale/adapt, which are never called here)."""
    import dask

    kwargs = dict(prof.kwargs)
    opts = {k: v for k, v in (kwargs.pop("scheduler_options", None) or {}).items()
            if k not in ("interface", "host", "dashboard_address")}
    kwargs["scheduler_options"] = {**opts, "host": "127.0.0.1", "dashboard_address": ":0"}
    with dask.config.set(prof.dask_config), cls(**kwargs) as cluster:
        return cluster.job_script()


def _render_kubernetes(prof: Profile) -> str:
    """The ``DaskCluster`` manifest the dask-kubernetes operator would be given."""
    from dask_kubernetes.operator import make_cluster_spec

    spec = prof.kwargs.get("custom_cluster_spec")
    if isinstance(spec, str):
        spec = yaml.safe_load(Path(spec).read_text(encoding="utf-8"))
    if spec is None:
        params = inspect.signature(make_cluster_spec).parameters
        spec = make_cluster_spec(**{k: v for k, v in prof.kwargs.items() if k in params})
    return yaml.safe_dump(spec, sort_keys=False)


def _scaling_text(prof: Profile) -> str:
    """How the profile sizes the cluster: its ``adapt`` or ``scale`` call, if any."""
    if prof.adapt:
        return f"adapt({', '.join(f'{k}={v!r}' for k, v in prof.adapt.items())})"
    if prof.scale:
        return f"scale({', '.join(f'{k}={v!r}' for k, v in prof.scale.items())})"
    return "no scale/adapt: the class's own kwargs decide the size"


def render_profile(path: str | Path) -> str:
    """What a profile would start, without starting it: a summary followed by the dask-jobqueue
    job script or the Kubernetes manifest. When the optional package for a known family is not
    installed the summary says so (the profile was still validated structurally)."""
    prof = load_profile(path)
    lines = [f"{path}: OK — {prof.module}.{prof.cls}"]
    if prof.description:
        lines.append(f"  description: {prof.description}")
    lines += [f"  kwargs: {json.dumps(prof.kwargs, default=str)}",
              f"  scaling: {_scaling_text(prof)}",
              f"  dask_config: {json.dumps(prof.dask_config, default=str)}"]
    if prof.family == "jobqueue":
        life, stagger = worker_lifetime(prof.kwargs)
        lines.append(f"  worker lifetime: {life:g} s ± {stagger:g} s, walltime "
                     f"{prof.kwargs['walltime']}")
    root = prof.module.split(".")[0]
    if prof.family != "generic" and import_class(prof.module, prof.cls) is None:
        lines.append(f"  (not rendered: {prof.module}.{prof.cls} cannot be imported; install "
                     f"pip install 'dp-ratebench[{EXTRAS[root]}]' to see the "
                     f"{'job script' if prof.family == 'jobqueue' else 'DaskCluster manifest'})")
        return "\n".join(lines)
    cls = cluster_class(prof, path)
    if prof.family == "jobqueue":
        lines += ["", "# job script (scheduler address is a placeholder on this machine;"
                  " nothing was submitted):", job_script(prof, cls)]
    elif prof.family == "kubernetes":
        lines += ["", "# DaskCluster manifest (nothing was created):", _render_kubernetes(prof)]
    else:
        n = prof.kwargs.get("n_workers", os.cpu_count() or 1)
        lines.append(f"  would start {prof.cls} with {n} worker(s) x "
                     f"{prof.kwargs.get('threads_per_worker', 'default')} thread(s) on this "
                     "machine")
    return "\n".join(lines)
