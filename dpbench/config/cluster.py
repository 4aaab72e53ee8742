"""The cluster-profile schema: what a profile file (``--cluster``, ``dpbench profile``) may say,
checked structurally (docs/clusters.md).

A profile names a cluster-manager class the dask-ctl way, from an allow-list of modules
(:data:`dpbench.engine.backends.cluster_class.CLUSTER_MODULES`: distributed, dask-jobqueue,
dask-kubernetes, dask-cloudprovider, dask-gateway), and the class must be a dask cluster manager
(a subclass of ``distributed.deploy.Cluster``). Nothing else a profile names is imported or
called, so a profile cannot run arbitrary code (``module: subprocess, class: Popen`` is refused
before any import). Placeholders left in a shipped template (``CHANGE-ME``) are errors::

    version: 1                      # optional
    description: ...                # optional, free text
    cluster:
      module: dask.distributed      # any importable module
      class: LocalCluster
      kwargs: {n_workers: 2, threads_per_worker: 1}
    scale: {jobs: 4}                # optional: cluster.scale(**scale)
    adapt: {minimum_jobs: 0, maximum_jobs: 20}   # optional: cluster.adapt(**adapt)
    dask_config: {distributed.scheduler.allowed-failures: 5}   # optional dask.config.set
    worker_timeout_s: 1800          # optional: give up (exit 2) after this long with no worker

:func:`read_profile` validates a profile like a suite: every error is collected and reported
together as ``file: field.path: message; allowed: ...``. For dask-jobqueue classes it also checks
that the worker ``--lifetime`` (plus ``--lifetime-stagger``) is set and shorter than the job's
``walltime``, so workers retire gracefully instead of being killed mid-task. The checks that need
the class itself (the allow-list, the class is a cluster manager, keyword arguments against its
signature) are given to it as :class:`ClassChecks` by the dask backend's
:func:`dpbench.engine.backends.cluster_class.load_profile`, the loader every caller uses: this
layer imports no cluster module.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.errors import UserInputError, did_you_mean
from .validation import Errors, is_int
from .yaml_io import ConfigKind, ConfigTextError, load_yaml, read_config

_PROFILE_KEYS = ("version", "description", "cluster", "scale", "adapt", "dask_config",
                 "worker_timeout_s")
#: How long a run waits with no worker connected before it gives up (exit 2, cells kept), unless
#: the profile sets ``worker_timeout_s``: long enough for a busy queue, short enough that a job
#: the batch system will never start does not hang a sweep overnight (docs/clusters.md).
DEFAULT_WORKER_TIMEOUT_S = 1800.0
MAX_WORKER_TIMEOUT_S = 7 * 86400.0
#: Marks a value of a shipped template that the user must replace.
PLACEHOLDER = "CHANGE-ME"
_CLUSTER_KEYS = ("module", "class", "kwargs")

#: Families of cluster managers: which ``scale``/``adapt`` keys each accepts.
_SCALE_KEYS = {
    "jobqueue": ("jobs", "n", "memory", "cores"),
    "kubernetes": ("n", "worker_group"),
    "generic": ("n", "memory", "cores"),
}
_ADAPTIVE_KEYS = ("interval", "wait_count", "target_duration")
_ADAPT_KEYS = {
    "jobqueue": ("minimum_jobs", "maximum_jobs", "minimum", "maximum", "minimum_cores",
                 "maximum_cores", "minimum_memory", "maximum_memory", *_ADAPTIVE_KEYS),
    "kubernetes": ("minimum", "maximum"),
    "generic": ("minimum", "maximum", "minimum_cores", "maximum_cores", "minimum_memory",
                "maximum_memory", *_ADAPTIVE_KEYS),
}
_K8S_RESOURCE_KEYS = ("requests", "limits")


class ProfileError(UserInputError):
    """A cluster profile failed validation; ``problems`` lists every error found."""

    def __init__(self, source: str | Path, problems: list[str]) -> None:
        self.source = str(source)
        self.problems = list(problems)
        lines = "\n".join(f"{self.source}: {p}" for p in self.problems)
        head = f"{len(self.problems)} errors in the cluster profile:\n" if len(problems) > 1 else ""
        super().__init__(head + lines)


@dataclass(frozen=True)
class Profile:
    """A validated cluster profile (see the module docstring for the file format)."""

    module: str
    cls: str
    kwargs: dict[str, Any]
    scale: dict[str, Any] | None
    adapt: dict[str, Any] | None
    dask_config: dict[str, Any]
    description: str = ""
    worker_timeout_s: float = DEFAULT_WORKER_TIMEOUT_S

    @property
    def family(self) -> str:
        """``jobqueue``, ``kubernetes`` or ``generic`` (decides the valid scale/adapt keys)."""
        return _family(self.module)


def _family(module: str) -> str:
    root = module.split(".")[0]
    return {"dask_jobqueue": "jobqueue", "dask_kubernetes": "kubernetes"}.get(root, "generic")


# --- durations ---------------------------------------------------------------------------------

def parse_walltime(value: Any, family_unit: str = "minutes") -> float:
    """Seconds in a batch walltime: ``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS``, or a bare number
    (SLURM reads minutes, PBS seconds: ``family_unit``). Raises ``ValueError`` when malformed."""
    text = str(value).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+(?::\d+){0,2})", text)
    if not m:
        raise ValueError(f"{value!r} is not a walltime; allowed: HH:MM:SS, D-HH:MM:SS, MM:SS")
    days = int(m.group(1) or 0)
    parts = [int(p) for p in m.group(2).split(":")]
    if len(parts) == 1 and not m.group(1):
        return parts[0] * (60.0 if family_unit == "minutes" else 1.0)
    while len(parts) < 3:  # SLURM: D-HH, D-HH:MM; MM:SS otherwise
        parts = parts + [0] if m.group(1) else [0, *parts]
    h, mi, s = parts
    return float(days * 86400 + h * 3600 + mi * 60 + s)


def _option_value(args: list[Any], flag: str) -> str | None:
    """The value of ``flag`` in a worker argument list (``[flag, v]`` or ``[f"{flag}=v"]``)."""
    for i, a in enumerate(args):
        a = str(a)
        if a == flag and i + 1 < len(args):
            return str(args[i + 1])
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def worker_lifetime(kwargs: Mapping[str, Any]) -> tuple[float | None, float]:
    """``(lifetime, stagger)`` in seconds from a jobqueue profile's ``worker_extra_args``."""
    from dask.utils import parse_timedelta

    args = list(kwargs.get("worker_extra_args") or [])
    life, stagger = _option_value(args, "--lifetime"), _option_value(args, "--lifetime-stagger")
    return (None if life is None else parse_timedelta(life, default="s"),
            0.0 if stagger is None else parse_timedelta(stagger, default="s"))


@dataclass(frozen=True)
class ClassChecks:
    """The checks of a profile that need its class imported, supplied by the layer that may
    import it (:func:`dpbench.engine.backends.cluster_class.load_profile`)."""

    #: ``admit(errs, module, class)``: whether the profile may name this class; when not, the
    #: reason is added to ``errs`` and validation stops there.
    admit: Callable[[Errors, str, str], bool]
    #: ``check_kwargs(errs, module, class, kwargs)``: the keyword arguments the class does not
    #: accept, added to ``errs``.
    check_kwargs: Callable[[Errors, str, str, Mapping[str, Any]], None]


# --- validation --------------------------------------------------------------------------------

def _placeholders(errs: Errors, path: str, value: Any) -> None:
    """Every string of ``value`` (nested) that still holds :data:`PLACEHOLDER`."""
    if isinstance(value, str):
        if PLACEHOLDER.lower() in value.lower():
            errs.add(path, f"placeholder {value!r} left in the profile: replace it with your "
                           "site's value (docs/clusters.md)")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _placeholders(errs, f"{path}.{k}", v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _placeholders(errs, f"{path}[{i}]", v)


def _check_family(errs: Errors, module: str, clsname: str, kwargs: Mapping[str, Any]) -> None:
    """The keyword arguments a family of cluster managers requires, and their types."""
    family = _family(module)
    if family == "jobqueue":
        _check_jobqueue(errs, module, clsname, kwargs)
    elif family == "kubernetes":
        _check_kubernetes(errs, kwargs)


#: The smallest per-job memory of a dask-jobqueue profile (below 1 KiB dask-jobqueue's SLURM job
#: script cannot even be written; a worker needs far more anyway).
MIN_JOB_MEMORY = 2**20


def _check_jobqueue(errs: Errors, module: str, clsname: str, kw: Mapping[str, Any]) -> None:
    """Per-job sizing (one thread per worker) and a worker lifetime shorter than the walltime."""
    from dask.utils import parse_bytes

    for k in ("cores", "processes"):
        if k not in kw:
            errs.add(f"cluster.kwargs.{k}", "required for a dask-jobqueue profile (per job)")
        elif not is_int(kw[k]) or kw[k] < 1:
            errs.add(f"cluster.kwargs.{k}", f"must be an integer >= 1, got {kw[k]!r}")
    cores, procs = kw.get("cores"), kw.get("processes")
    if is_int(cores) and is_int(procs) and cores >= 1 and procs >= 1 and cores != procs:
        errs.add("cluster.kwargs.processes", f"cores={cores}, processes={procs} gives "
                 f"{cores // procs} thread(s) per worker; dpbench cells are single-threaded "
                 f"(BLAS pinned): set processes equal to cores; allowed: processes: {cores}")
    if "memory" not in kw:
        errs.add("cluster.kwargs.memory", "required for a dask-jobqueue profile (per job), "
                 "e.g. '16GB'")
    else:
        try:
            ok = parse_bytes(str(kw["memory"])) >= MIN_JOB_MEMORY
        except (ValueError, TypeError, OverflowError):
            ok = False
        if not ok:
            errs.add("cluster.kwargs.memory", f"{kw['memory']!r} is not a memory size of at least "
                     "1 MiB (a bare number is bytes); allowed: e.g. '16GB', '120GiB'")
    for k in ("worker_extra_args", "job_extra_directives", "job_script_prologue",
              "job_directives_skip", *_JOBQUEUE_LISTS):
        if k in kw and not (isinstance(kw[k], list) and all(isinstance(a, str) for a in kw[k])):
            errs.add(f"cluster.kwargs.{k}", "must be a list of strings")
    _check_jobqueue_types(errs, kw)
    _check_lifetime(errs, clsname, kw)


#: The types of dask-jobqueue's other keyword arguments (its jobqueue.yaml): a value of another
#: type is otherwise found only when the cluster object is built, after the store exists.
_JOBQUEUE_STRINGS = ("name", "python", "interface", "local_directory", "shared_temp_directory",
                     "worker_command", "shebang", "queue", "project", "account", "resource_spec",
                     "log_directory", "job_name", "job_mem", "mem", "disk", "lsf_units",
                     "memory_per_core_property_name", "protocol", "config_name")
_JOBQUEUE_LISTS = ("extra", "env_extra", "job_extra", "submit_command_extra",
                   "cancel_command_extra")


def _check_jobqueue_types(errs: Errors, kw: Mapping[str, Any]) -> None:
    from dask.utils import parse_timedelta

    for k in _JOBQUEUE_STRINGS:
        if kw.get(k) is not None and not isinstance(kw[k], str):
            errs.add(f"cluster.kwargs.{k}", f"must be a string (or null), got {kw[k]!r}")
    for k in ("job_cpu", "ncpus"):
        if kw.get(k) is not None and not (is_int(kw[k]) and kw[k] >= 1):
            errs.add(f"cluster.kwargs.{k}", f"must be an integer >= 1 (or null), got {kw[k]!r}")
    for k in ("nanny", "use_stdin"):
        if k in kw and not isinstance(kw[k], bool):
            errs.add(f"cluster.kwargs.{k}", f"must be true or false, got {kw[k]!r}")
    if kw.get("scheduler_options") is not None and not isinstance(kw["scheduler_options"], dict):
        errs.add("cluster.kwargs.scheduler_options", "must be a mapping of dask Scheduler "
                 f"arguments (or null), got {kw['scheduler_options']!r}")
    if kw.get("death_timeout") is not None:
        try:
            ok = not isinstance(kw["death_timeout"], bool) \
                and 0 <= parse_timedelta(kw["death_timeout"]) < math.inf
        except (ValueError, TypeError, KeyError, IndexError, OverflowError):
            ok = False
        if not ok:
            errs.add("cluster.kwargs.death_timeout", "must be a number of seconds >= 0 or a "
                     f"duration such as '60s' (or null), got {kw['death_timeout']!r}")


def _check_lifetime(errs: Errors, clsname: str, kw: Mapping[str, Any]) -> None:
    hint = 'e.g. worker_extra_args: ["--lifetime", "55m", "--lifetime-stagger", "4m"]'
    if "walltime" not in kw:
        errs.add("cluster.kwargs.walltime", "required for a dask-jobqueue profile (the worker "
                 "lifetime is checked against it), e.g. '01:00:00'")
        wall = None
    else:
        try:
            wall = parse_walltime(kw["walltime"], "minutes" if "SLURM" in clsname else "seconds")
        except ValueError as exc:
            errs.add("cluster.kwargs.walltime", str(exc))
            wall = None
    if not isinstance(kw.get("worker_extra_args", []), list):
        return
    try:
        life, stagger = worker_lifetime(kw)
        ok = (life is None or 0 < life < math.inf) and 0 <= stagger < math.inf
    except (ValueError, TypeError, KeyError, IndexError, OverflowError):
        ok = False
    if not ok:
        errs.add("cluster.kwargs.worker_extra_args", "--lifetime/--lifetime-stagger value is not "
                 "a duration (--lifetime > 0, --lifetime-stagger >= 0); allowed: durations such "
                 "as 50m, 3000s, 1h")
        return
    if life is None:
        errs.add("cluster.kwargs.worker_extra_args", "no worker --lifetime: the batch system "
                 "would kill workers at the walltime mid-task; set a lifetime shorter than "
                 f"walltime, {hint}")
    elif wall is not None and life + stagger >= wall:
        errs.add("cluster.kwargs.worker_extra_args", f"worker --lifetime {life:g} s "
                 f"+ --lifetime-stagger {stagger:g} s must be shorter than walltime "
                 f"{kw['walltime']} ({wall:g} s), so workers retire before the job is killed; "
                 f"{hint}")


def _check_kubernetes(errs: Errors, kw: Mapping[str, Any]) -> None:
    if "custom_cluster_spec" in kw:
        return
    for k in ("name", "image"):
        if not isinstance(kw.get(k), str) or not kw[k]:
            errs.add(f"cluster.kwargs.{k}", "required string for a Kubernetes profile")
    if "n_workers" in kw and not (is_int(kw["n_workers"]) and kw["n_workers"] >= 0):
        errs.add("cluster.kwargs.n_workers", f"must be an integer >= 0, got {kw['n_workers']!r}")
    res = kw.get("resources")
    if res is not None:
        if not isinstance(res, dict):
            errs.add("cluster.kwargs.resources", "must be a mapping with requests and/or limits")
        else:
            errs.unknown_keys("cluster.kwargs.resources", res, _K8S_RESOURCE_KEYS)


def _check_scaling(errs: Errors, family: str, scale: Any, adapt: Any) -> None:
    if scale is not None and adapt is not None:
        errs.add("scale", "give scale (a fixed size) or adapt (adaptive), not both")
    for key, allowed in (("scale", _SCALE_KEYS[family]), ("adapt", _ADAPT_KEYS[family])):
        block = scale if key == "scale" else adapt
        if not isinstance(block, dict):
            continue
        errs.unknown_keys(key, block, allowed)
        for k, v in block.items():
            if k in ("jobs", "n", "minimum_jobs", "maximum_jobs", "minimum", "maximum") \
                    and not (is_int(v) and v >= 0):
                errs.add(f"{key}.{k}", f"must be an integer >= 0, got {v!r}")
        for lo, hi in (("minimum_jobs", "maximum_jobs"), ("minimum", "maximum")):
            a, b = block.get(lo), block.get(hi)
            if is_int(a) and is_int(b) and a > b:
                errs.add(f"{key}.{lo}", f"{a} is larger than {key}.{hi} = {b}")


def _dask_config_keys() -> set[str]:
    import dask
    import distributed  # noqa: F401  (registers the distributed.* defaults)

    out: set[str] = set()

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out.add(prefix)
    walk("distributed", dask.config.config.get("distributed", {}))
    return out


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),), "array": (list,), "object": (dict,)}


@functools.cache
def _dask_config_types() -> dict[str, tuple[str, ...]]:
    """The JSON-schema types distributed declares for its config keys (``distributed-schema.yaml``:
    ``distributed.scheduler.worker-ttl`` -> ``("string", "null")``); {} if it is not shipped."""
    import distributed

    path = Path(distributed.__file__).with_name("distributed-schema.yaml")
    try:
        schema = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    out: dict[str, tuple[str, ...]] = {}

    def walk(prefix: str, node: Any) -> None:
        if not isinstance(node, dict):
            return
        if isinstance(node.get("properties"), dict):
            for k, v in node["properties"].items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif node.get("type") is not None:
            t = node["type"]
            out[prefix] = tuple(t) if isinstance(t, list) else (t,)
    walk("", schema)
    return out


def _is_duration(value: Any) -> bool:
    from dask.utils import parse_timedelta

    try:
        return isinstance(value, str) and any(c.isalpha() for c in value) \
            and parse_timedelta(value) is not None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError):
        return False


def _dask_config_value(key: str, value: Any, types: tuple[str, ...] | None,
                       default: Any) -> str | None:
    """Why ``value`` cannot be the value of distributed config ``key`` (None if it can): the
    type distributed's schema declares, and a duration (``'10 minutes'``, or seconds) where the
    default is one; a wrong type is otherwise found only when the scheduler starts."""
    from dask.utils import parse_timedelta

    nullable = types is not None and "null" in types
    if _is_duration(default) and not (value is None and nullable):
        try:
            ok = not isinstance(value, bool) and isinstance(value, (str, int, float)) \
                and 0 <= parse_timedelta(value) < math.inf
        except (ValueError, TypeError, KeyError, OverflowError):
            ok = False
        return None if ok else (f"must be a duration such as '10 minutes' or a number of seconds "
                                f">= 0{' (or null)' if nullable else ''}, got {value!r}")
    if types is None or not all(t in _JSON_TYPES for t in types):
        return None
    allowed = tuple(c for t in types for c in _JSON_TYPES[t])
    if isinstance(value, bool) and "boolean" not in types or not isinstance(value, allowed):
        return f"must be of type {' or '.join(types)} (distributed's schema), got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    return None


def _check_dask_config(errs: Errors, cfg: Mapping[str, Any]) -> None:
    """Keys are dotted strings that dask can set (tried on a scratch copy of dask's config);
    keys under ``distributed.`` must exist in distributed's defaults (typos are silent)."""
    import copy

    import dask

    known = _dask_config_keys()
    types = _dask_config_types()
    for key in cfg:
        if not isinstance(key, str) or not all(key.split(".")):
            errs.add(f"dask_config.{key}", "must be a dotted dask config key (a string such as "
                     f"distributed.scheduler.allowed-failures), got {key!r}")
            continue
        try:
            dask.config.set({key: cfg[key]}, config=copy.deepcopy(dask.config.config))
        except Exception as exc:  # noqa: BLE001 (e.g. a key below a value that is no mapping)
            errs.add(f"dask_config.{key}", f"dask cannot set this key ({type(exc).__name__}: "
                     f"{str(exc)[:200]}); a key names a path of mappings in dask's config")
            continue
        canon = key.replace("_", "-")
        if canon.startswith("distributed."):
            _check_distributed_key(errs, f"dask_config.{key}", canon, cfg[key], known, types)


def _check_distributed_key(errs: Errors, path: str, canon: str, value: Any, known: set[str],
                           types: Mapping[str, tuple[str, ...]]) -> None:
    """A ``distributed.*`` key exists; a section (``distributed.scheduler``) is given a mapping
    whose keys are checked in turn; a key's value has the type distributed reads."""
    import dask

    if canon in known:
        problem = _dask_config_value(canon, value, types.get(canon),
                                     dask.config.get(canon, default=None))
        if problem:
            errs.add(path, problem)
    elif any(k.startswith(canon + ".") for k in known):
        if not isinstance(value, dict):
            errs.add(path, f"is a section of distributed's config: give a mapping, or name a key "
                           f"below it (e.g. {min(k for k in known if k.startswith(canon + '.'))})"
                           f", got {value!r}")
            return
        for k, v in value.items():
            sub = f"{canon}.{str(k).replace('_', '-')}"
            _check_distributed_key(errs, f"{path}.{k}", sub, v, known, types)
    else:
        near = [k for k in known if k.rsplit(".", 1)[0] == canon.rsplit(".", 1)[0]]
        errs.add(path, f"not a distributed config key{did_you_mean(canon, known)}"
                 + (f"; allowed: {', '.join(sorted(near))}" if near else ""))


def _validate(raw: Any, errs: Errors, classes: ClassChecks) -> Profile | None:
    if not isinstance(raw, dict) or "cluster" not in raw:
        errs.add("", "a profile is a mapping with a 'cluster' field (module, class, kwargs)")
        return None
    errs.unknown_keys("", raw, _PROFILE_KEYS)
    if "version" in raw and raw["version"] != 1:
        errs.add("version", f"unsupported version {raw['version']!r}; allowed: 1")
    for k in ("scale", "adapt", "dask_config"):
        if raw.get(k) is not None and not isinstance(raw[k], dict):
            errs.add(k, "must be a mapping")
    c = raw["cluster"]
    if not isinstance(c, dict):
        errs.add("cluster", "must be a mapping with module, class, kwargs")
        return None
    errs.unknown_keys("cluster", c, _CLUSTER_KEYS)
    for k in ("module", "class"):
        if not isinstance(c.get(k), str):
            errs.add(f"cluster.{k}", "required string")
    kwargs = c.get("kwargs", {}) or {}
    if not isinstance(kwargs, dict):
        errs.add("cluster.kwargs", "must be a mapping")
        kwargs = {}
    for k in [k for k in kwargs if not isinstance(k, str)]:
        errs.add(f"cluster.kwargs.{k}", f"keyword names must be strings, got {k!r}")
        kwargs = {k: v for k, v in kwargs.items() if isinstance(k, str)}
    if errs.items and not all(isinstance(c.get(k), str) for k in ("module", "class")):
        return None
    if not classes.admit(errs, c["module"], c["class"]):
        return None
    _placeholders(errs, "cluster.kwargs", kwargs)
    classes.check_kwargs(errs, c["module"], c["class"], kwargs)
    _check_family(errs, c["module"], c["class"], kwargs)
    _check_scaling(errs, _family(c["module"]), raw.get("scale"), raw.get("adapt"))
    if isinstance(raw.get("dask_config"), dict):
        _check_dask_config(errs, raw["dask_config"])
    timeout = raw.get("worker_timeout_s", DEFAULT_WORKER_TIMEOUT_S)
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
            or not 0 < timeout <= MAX_WORKER_TIMEOUT_S):
        errs.add("worker_timeout_s", f"must be a number of seconds in (0, "
                                     f"{MAX_WORKER_TIMEOUT_S:.0f}], got {timeout!r}")
        timeout = DEFAULT_WORKER_TIMEOUT_S
    return Profile(c["module"], c["class"], kwargs, raw.get("scale"), raw.get("adapt"),
                   raw.get("dask_config") or {}, str(raw.get("description") or ""),
                   float(timeout))


#: How profile files are read (their bounds: :mod:`dpbench.config.yaml_io`).
PROFILE_FILE = ConfigKind(
    title="cluster profile", noun="profile",
    expansion_hint="(nested YAML aliases *name, or an alias inside the node it names); write it "
                   "out")


def read_profile(path: str | Path, classes: ClassChecks) -> Profile:
    """Read and validate a cluster profile, its class with ``classes``.

    Raises :class:`ProfileError` listing every problem (``file: field.path: message; allowed:
    ...``). Callers use :func:`dpbench.engine.backends.cluster_class.load_profile`, which gives
    the class checks.
    """
    path = Path(path)
    try:
        raw = load_yaml(read_config(path, PROFILE_FILE), PROFILE_FILE)
    except ConfigTextError as exc:
        raise ProfileError(path, [str(exc)]) from None
    errs = Errors()
    prof = _validate(raw, errs, classes)
    if errs.items or prof is None:
        raise ProfileError(path, errs.items)
    return prof
