"""What a run will cost before it starts (``dpbench plan``): cells, CPU time, memory, store size.

The work of a cell is the packer's estimate (:mod:`.plan`): ``Algorithm.cost(n, p)`` for the
mechanism plus a data term n·p + :data:`~.plan.CELL_OVERHEAD_COST` (dataset, certified optimum,
risk evaluation). Without calibration, units become seconds at
:data:`~.plan.UNITS_PER_SECOND`, the scale the packer starts from: right for mechanisms whose
``cost()`` counts compiled gradient steps, off by an order of magnitude either way for samplers
and solvers (measured: 3–37× on the committed suites).

Calibration replaces the scale with what earlier runs measured (:func:`calibration`): every
cell's ``wall_time_s`` (the mechanism's time) in the calibration stores, and the task seconds
each run records per mechanism × problem class in its run log (:meth:`.plan.Packer.timings`,
with each worker process's first task of a class apart). Four terms per class (:class:`Scale`):

* the mechanism's rate, from each chunk's *fastest* cell (the first cell of a configuration
  may pay a noise calibration or a compilation), as a ratio of sums over ``cost(n, p)``, per
  configuration (mechanism and problem with their parameters, :func:`config_key`) when the
  target has the same one, else per class;
* the mechanism's one-off seconds per chunk (what its cells took beyond their fastest);
* the data rate, per problem: the smallest warm rate among the problem's classes (one-off
  costs only ever add to a class's);
* what each worker process paid once beyond all that (imports, its first datasets).

The intended calibration is a pilot: the suite with ``seeds: 2`` (``benchmarks/bench_plan.py``
measures the estimate against the run on the committed suites; docs/architecture.md,
"Planning a run").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.suite import Suite
from ..core.schema import FLOAT_VARS
from .plan import (
    CELL_OVERHEAD_COST,
    PLAN_BYTES_PER_CHUNK,
    UNITS_PER_SECOND,
    ExperimentPlan,
    Plan,
)

if TYPE_CHECKING:
    from ..store.cube import Store

#: Datasets a worker keeps (:mod:`.cells`, ``_DATA_CACHE_SIZE``): the data term of its memory.
DATA_CACHE_DATASETS = 64
#: Resident memory of an idle dask worker with dpbench, numpy, scipy and numba imported (measured
#: on a LocalCluster worker of this project: 230–260 MB); the base of the per-worker estimate.
WORKER_BASE_BYTES = 260 * 2 ** 20


@dataclass
class ClassCost:
    """One mechanism × problem class of the plan."""

    algorithm: str
    problem: str
    cells: int
    units: float
    seconds: float
    #: The cost model measured in calibration stores (None: the default scale).
    measured: Scale | None = None


@dataclass
class RunEstimate:
    cells: int
    cpu_seconds: float
    classes: list[ClassCost]
    store_bytes: float
    largest_dataset_bytes: float
    largest_dataset: tuple[int, int]
    calibrated_from: list[str] = field(default_factory=list)
    #: Chunks (rows of seeds) the plan holds: the client's memory grows with them.
    chunks: int = 0

    @property
    def plan_bytes(self) -> float:
        """The client's memory for the plan at its peak (:data:`~.plan.PLAN_BYTES_PER_CHUNK`)."""
        return float(self.chunks * PLAN_BYTES_PER_CHUNK)

    @property
    def worker_bytes(self) -> float:
        """Peak resident memory of one worker: its base plus a full data cache of the largest
        datasets (a bound: the cache holds at most :data:`DATA_CACHE_DATASETS`)."""
        return WORKER_BASE_BYTES + DATA_CACHE_DATASETS * self.largest_dataset_bytes

    @property
    def calibrated_fraction(self) -> float:
        """Share of the estimated CPU time that comes from measured classes."""
        done = math.fsum(c.seconds for c in self.classes if c.measured is not None)
        return done / self.cpu_seconds if self.cpu_seconds > 0 else 1.0


@dataclass(frozen=True)
class Scale:
    """A class's measured cost model (:func:`calibration`).

    ``rate``: mechanism seconds per unit of ``Algorithm.cost(n, p)`` once warm; ``per_chunk``:
    the mechanism's one-off seconds per chunk (a configuration's first cell: a noise
    calibration, a compilation); ``data``: seconds per unit of the data term n·p +
    :data:`~.plan.CELL_OVERHEAD_COST` (dataset, certified optimum, risk evaluation: a property
    of the problem and the machine); ``per_worker``: the remaining one-off seconds of each
    worker process that runs the class (imports, its first datasets)."""

    rate: float
    per_chunk: float = 0.0
    data: float = 1.0 / UNITS_PER_SECOND
    per_worker: float = 0.0


@dataclass
class _Measured:
    warm: float = 0.0          # Σ over chunks of (done cells × the chunk's fastest cell)
    mech: float = 0.0          # Σ wall_time_s of done cells
    mech_units: float = 0.0    # Σ Algorithm.cost(n, p) of done cells
    data_units: float = 0.0    # Σ (n·p + CELL_OVERHEAD_COST) of done cells
    chunks: int = 0            # chunks with a done cell
    seconds: float = 0.0       # Σ task seconds of the class in the run logs
    units: float = 0.0         # Σ the work units of those tasks (mechanism and data terms)
    first_seconds: float = 0.0  # the same for each worker process's first task of the class
    first_units: float = 0.0
    workers: int = 0           # worker processes that ran it (first tasks in the run logs)

    def warm_data_rate(self) -> float | None:
        """Seconds per data unit in the tasks that were no worker's first of the class (their
        mechanism time taken pro rata), or None without such tasks or timings."""
        warm_units = self.units - self.first_units
        if self.seconds <= 0 or warm_units <= 0 or self.data_units <= 0 or self.units <= 0:
            return None
        share = self.data_units / (self.data_units + self.mech_units)
        rest = (self.seconds - self.first_seconds) - self.mech * warm_units / self.units
        return rest / (warm_units * share) if rest > 0 else None


def config_key(exp: Any, ai: int, pi: int) -> str:
    """``"algorithm|problem|<hash>"``: a mechanism × problem class with its parameters and
    versions (what makes ``cost()``'s errors the same from one grid point to another)."""
    from ..core.params import identity_params
    from ..core.seeding import stable_hash

    a, p = exp.algorithms[ai], exp.problems[pi]
    ident = [a.name, a.cls.version, identity_params(a.cls.params, a.params),
             p.name, p.cls.version, identity_params(p.cls.params, p.params)]
    return f"{a.name}|{p.name}|{stable_hash(ident)[:16]}"


def _cells_of(store: Any, suite: Suite, acc: dict[str, _Measured]) -> None:
    """Add the done cells of ``store`` (planned with its own suite) to ``acc``."""
    from ..core.schema import DONE

    for exp in suite.experiments:
        if not store.holds(exp.name, exp.fingerprint(suite.root_seed)):
            continue
        ep = ExperimentPlan(suite, exp)
        if not len(ep):
            continue
        seeds = exp.seeds
        data = ep.chunk_np() + CELL_OVERHEAD_COST
        mech = np.maximum(ep.cost / seeds - data, 1.0)          # Algorithm.cost(n, p) per cell
        wall = store.values(exp.name, "wall_time_s").reshape(-1, seeds)[ep.flat]
        done = store.status(exp.name).reshape(-1, seeds)[ep.flat] == DONE
        cls = ep.flat // math.prod(ep.shape[2:])
        n_prob = ep.shape[1]
        for c in np.unique(cls):
            rows = cls == c
            ok = done[rows]
            if not ok.any():
                continue
            ai, pi = int(c) // n_prob, int(c) % n_prob
            w = np.where(ok, wall[rows], np.nan)
            fastest = np.nanmin(np.where(ok.any(axis=1, keepdims=True), w, 0.0), axis=1)
            fine = config_key(exp, ai, pi)
            for key in (fine.rsplit("|", 1)[0], fine):  # the class, and its configuration
                m = acc.setdefault(key, _Measured())
                m.warm += float((fastest * ok.sum(axis=1)).sum())
                m.mech += float(np.nansum(w))
                m.mech_units += float((mech[rows, None] * ok).sum())
                m.data_units += float((data[rows, None] * ok).sum())
                m.chunks += int(ok.any(axis=1).sum())


def calibration(stores: Iterable[Store]) -> tuple[dict[str, Scale], list[str]]:
    """The measured cost model per ``"algorithm|problem"`` class from the done cells of
    the open ``stores`` and the timings of their recorded runs, and the paths of the stores that
    contributed.

    Each store is planned with the suite it records (parsed and validated like any suite; a
    store whose suite cannot be planned here, e.g. for a missing plugin, is skipped with a
    warning). Per class: each chunk's cells are taken at the time of its fastest cell (the
    others may include compilation and first-call costs), and the mechanism rate is their sum
    over the sum of ``cost(n, p)`` (a ratio of sums: the large cells that dominate a run weigh
    most, whatever the shape of ``cost()``); what the cells took beyond their fastest is one-off
    cost, shared by the worker processes that ran the class; the run logs' task seconds beyond the mechanism's give
    the data rate (runs recorded before run logs kept timings leave the default data rate)."""
    import warnings

    from ..config.suite import parse_suite
    from ..core.errors import UserInputError
    from ..datasets.source import files_refused
    from ..store.cube import ROOT_KEY

    acc: dict[str, _Measured] = {}
    used = []
    for store in stores:
        path = str(store.path)
        meta = dict(store.root.attrs.get(ROOT_KEY, {}))
        try:
            # A stored suite's data-file paths are data from the store: never followed.
            with files_refused("it is named by a suite read back from a store"):
                suite = parse_suite(str(meta.get("suite_yaml", "")), f"{path} (its suite)")
        except UserInputError as exc:
            warnings.warn(f"--calibrate {path}: its suite cannot be planned here, not used: "
                          f"{'; '.join(line.strip() for line in str(exc).splitlines()[:2])}", stacklevel=2)
            continue
        before = {k: m.mech_units for k, m in acc.items()}
        _cells_of(store, suite, acc)
        for run in meta.get("runs", []):
            for key, row in dict(run.get("timings", {})).items():
                if key in acc:
                    m = acc[key]
                    m.seconds += float(row.get("seconds", 0.0))
                    m.units += float(row.get("units", 0.0))
                    m.first_seconds += float(row.get("first_seconds", 0.0))
                    m.first_units += float(row.get("first_units", 0.0))
                    m.workers += int(row.get("first_tasks", 0))
        if any(m.mech_units != before.get(k) for k, m in acc.items()):
            used.append(path)
    # The data term is the problem's: each problem's rate is the smallest of its classes' warm
    # rates (one-off costs only ever add to a class's), else of their plain ratios.
    by_problem: dict[str, list[float]] = {}
    for key, m in acc.items():
        if key.count("|") != 1:
            continue  # a configuration: run logs time classes only
        warm = m.warm_data_rate()
        plain = (m.seconds - m.mech) / m.data_units if m.seconds > m.mech else None
        if warm is not None or plain is not None:
            by_problem.setdefault(key.split("|")[1], []).append(
                warm if warm is not None else float(plain))  # type: ignore[arg-type]
    data = {prob: min(rates) for prob, rates in by_problem.items()}
    out = {key: _scale(m, data.get(key.split("|")[1])) for key, m in acc.items()
           if key.count("|") == 1}
    for key, m in acc.items():  # a configuration: its own rates, its class's other terms
        if key.count("|") == 2:
            cls = out[key.rsplit("|", 1)[0]]
            own = _scale(m, cls.data)
            out[key] = Scale(own.rate, own.per_chunk, cls.data, cls.per_worker)
    return out, used


def _scale(m: _Measured, data: float | None) -> Scale:
    """A class's cost model from its measurements and its problem's data rate."""
    rate = m.warm / m.mech_units
    per_chunk = max(m.mech - m.warm, 0.0) / max(m.chunks, 1)
    data = 1.0 / UNITS_PER_SECOND if data is None else data
    rest = max(m.seconds - m.mech - data * m.data_units, 0.0) if m.seconds > 0 else 0.0
    return Scale(rate, per_chunk, data, rest / max(m.workers, 1))


#: Chunks summed at a time (the temporaries of a block, not of the whole plan).
_BLOCK = 2 ** 20


def _class_sums(ep: ExperimentPlan) -> np.ndarray:
    """Per (algorithm, problem) position of ``ep``: its chunks' mechanism units, data units and
    count, summed a block of chunks at a time."""
    n_classes = ep.shape[0] * ep.shape[1]
    n_grid = math.prod(ep.shape[2:])
    sums = np.zeros((3, n_classes))
    for i in range(0, len(ep), _BLOCK):
        part = slice(i, i + _BLOCK)
        data = ep.chunk_cells(part) * (ep.chunk_np(part) + CELL_OVERHEAD_COST)
        cls = ep.flat[part] // n_grid
        sums[0] += np.bincount(cls, weights=ep.cost[part] - data, minlength=n_classes)
        sums[1] += np.bincount(cls, weights=data, minlength=n_classes)
        sums[2] += np.bincount(cls, minlength=n_classes)
    return sums


def estimate(suite: Suite, plan: Plan, scales: Mapping[str, Scale] | None = None,
             calibrated_from: Iterable[str] = (), workers: int = 1) -> RunEstimate:
    """The cost of computing ``plan`` (a plan of ``suite``, e.g. its pending cells) on
    ``workers`` worker processes. A configuration measured before (:func:`config_key`) uses its
    own rates, another of a measured class the class's, anything else the default scale."""
    scales = dict(scales or {})
    classes: dict[tuple[str, str], ClassCost] = {}
    chunks: dict[tuple[str, str], int] = {}
    largest, where = 0.0, (0, 0)
    for ep in plan.experiments:
        if not len(ep):
            continue
        n_alg, n_prob = ep.shape[:2]
        sums = _class_sums(ep)
        for c in np.flatnonzero(sums[2]):
            ai, pi = int(c) // n_prob, int(c) % n_prob
            fine = config_key(ep.exp, ai, pi)
            coarse = fine.rsplit("|", 1)[0]
            alg, prob = coarse.split("|")
            scale = scales.get(fine, scales.get(coarse))
            entry = classes.setdefault((alg, prob), ClassCost(alg, prob, 0, 0.0, 0.0))
            entry.cells += int(ep.class_cells[ai, pi])
            entry.units += float(sums[0][c] + sums[1][c])
            mech, dat, n_chunks = (float(x[c]) for x in sums)
            chunks[(alg, prob)] = chunks.get((alg, prob), 0) + int(n_chunks)
            if scale is None:
                entry.seconds += (mech + dat) / UNITS_PER_SECOND
            else:
                entry.measured = scales.get(coarse, scale)
                entry.seconds += mech * scale.rate + n_chunks * scale.per_chunk + dat * scale.data
        for n in ep.exp.grid["n"]:
            for p in ep.exp.grid["p"]:
                size = 8.0 * int(n) * (int(p) + 1)   # features and labels, float64
                if size > largest:
                    largest, where = size, (int(n), int(p))
    for key, c in classes.items():  # one-off costs of each worker process that runs the class
        if c.measured is not None:
            c.seconds += c.measured.per_worker * min(workers, chunks[key])
    rows = sorted(classes.values(), key=lambda c: -c.seconds)
    return RunEstimate(cells=plan.n_cells, cpu_seconds=math.fsum(c.seconds for c in rows),
                       classes=rows, store_bytes=float(suite.n_cells) * (8 * len(FLOAT_VARS) + 1),
                       largest_dataset_bytes=largest, largest_dataset=where,
                       calibrated_from=list(calibrated_from), chunks=plan.n_chunks)


def profile_lines(est: RunEstimate, profile: Any) -> list[str]:
    """How a cluster profile would run the estimate: its jobs, their size and walltime."""
    from ..config.cluster import parse_walltime

    kw = dict(profile.kwargs)
    per_job = int(kw.get("processes", 1) or 1)
    sizing = dict(profile.adapt or profile.scale or {})
    jobs = int(sizing.get("maximum_jobs") or sizing.get("jobs") or 0)
    if not jobs and (sizing.get("maximum") or sizing.get("n")):
        jobs = math.ceil(int(sizing.get("maximum") or sizing.get("n")) / per_job)
    lines = [f"cluster {profile.module}.{profile.cls}: {per_job} worker(s) per job"
             + (f", up to {jobs} job(s) at once" if jobs else "")]
    if "walltime" not in kw:
        return lines
    wall = parse_walltime(kw["walltime"], "minutes" if "SLURM" in profile.cls else "seconds")
    job_hours = est.cpu_seconds / per_job / 3600
    lines.append(f"  job walltime {kw['walltime']} ({wall / 3600:.3g} h): the work fills "
                 f"{est.cpu_seconds / (per_job * wall):.3g} job walltime(s) of {per_job} "
                 f"worker(s) ({job_hours:.3g} job-hours)")
    if jobs:
        elapsed = est.cpu_seconds / (jobs * per_job)
        lines.append(f"  with {jobs} job(s) running: about {_duration(elapsed)} once they "
                     "start (queue time not included)")
    return lines


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def summary_lines(est: RunEstimate, workers: int) -> list[str]:
    """The estimate as the terminal shows it."""
    cpu = est.cpu_seconds
    lines = [
        f"cells to compute: {est.cells:,}",
        f"CPU time: about {_duration(cpu)} ({cpu / 3600:.3g} CPU-hours); "
        + (f"{est.calibrated_fraction:.0%} of it calibrated from "
           f"{', '.join(est.calibrated_from)}" if est.calibrated_from and any(
               c.measured is not None for c in est.classes)
           else "uncalibrated (Algorithm.cost at the packer's default scale; run a pilot and "
                "pass it with --calibrate)"),
        f"on {workers} worker(s): about {_duration(cpu / max(workers, 1))}",
        f"memory per worker: up to {est.worker_bytes / 2 ** 20:,.0f} MiB (a base of "
        f"{WORKER_BASE_BYTES / 2 ** 20:.0f} MiB and {DATA_CACHE_DATASETS} cached datasets of at "
        f"most {est.largest_dataset_bytes / 2 ** 20:.3g} MiB, n={est.largest_dataset[0]}, "
        f"p={est.largest_dataset[1]})",
        f"client memory for the plan: about {est.plan_bytes / 2 ** 20:,.0f} MiB at its peak "
        f"({est.chunks:,} chunks of {PLAN_BYTES_PER_CHUNK} bytes) beside the interpreter's own",
        f"store: about {est.store_bytes / 2 ** 20:.3g} MiB of values (uncompressed)",
    ]
    lines.append("by mechanism x problem (largest first):")
    for c in est.classes[:12]:
        how = "measured" if c.measured is not None else "default scale"
        lines.append(f"  {c.algorithm} on {c.problem}: {c.cells:,} cells, "
                     f"{_duration(c.seconds)} ({how})")
    if len(est.classes) > 12:
        lines.append(f"  … and {len(est.classes) - 12} more")
    return lines
