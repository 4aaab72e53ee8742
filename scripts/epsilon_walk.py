"""Count the hops of ε from a suite's YAML to the stored ledger and the report (docs/architecture.md,
"The walk of ε").

A marker budget (ε = 0.7109375, exact in binary) is run through a one-cell suite in this process
(``--workers 0``) and the report is built, under a profiler that records every dpbench function
called with the marker among its arguments: as a number, inside a mapping or sequence, or as
an attribute of an object (a grid point, a chunk, an experiment), or as the ε coordinate of a
cube, up to three levels deep. The mechanism (output perturbation, pure ε-DP) spends exactly ε,
so the stored ledger holds the marker too.

Counted, outside the mechanism's own implementation (``algorithms/``, ``numerics/``,
``privacy/``: the mechanism is one stop of the walk, however it computes):

* **functions**: distinct functions that receive ε;
* **files**: distinct modules among them;
* **hops**: entries into a module along the walk, in call order (consecutive calls within one
  module are one entry), the mechanism counted once per entry.

Run it on two checkouts to compare (``PYTHONPATH=<checkout> python scripts/epsilon_walk.py``).
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from types import FrameType
from typing import Any

MARKER = 0.7109375
MECHANISM = ("algorithms", "numerics", "privacy", "theory")

SUITE = textwrap.dedent(f"""\
    name: walk
    root_seed: 1
    seeds: 1
    experiments:
      - name: walk
        problems:
          - problem: lb_quad
        algorithms:
          - algorithm: output_perturbation
        grid: {{n: [40], p: [2], epsilon: [{MARKER}], delta: [1.0e-5]}}
    """)


DEPTH = 1
CUBES = True


def _holds(value: Any, depth: int = 0) -> bool:
    import numpy as np

    if isinstance(value, (float, np.floating)):
        return bool(value == MARKER)
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "f" and value.size <= 4096 and bool(np.any(value == MARKER))
    if depth >= DEPTH or isinstance(value, (str, bytes, int, type)) or value is None:
        return False
    coords = getattr(value, "coords", None)  # an xarray cube or array: its ε coordinate
    if CUBES and coords is not None and not isinstance(value, type):
        try:
            return "epsilon" in coords and _holds(np.asarray(coords["epsilon"].values), depth)
        except Exception:  # noqa: BLE001 - not an xarray object after all
            return False
    if isinstance(value, dict):
        return any(_holds(v, depth + 1) for v in list(value.values())[:64])
    if isinstance(value, (list, tuple)):
        return any(_holds(v, depth + 1) for v in value[:64])
    if dataclasses.is_dataclass(value):
        return any(_holds(getattr(value, f.name, None), depth + 1)
                   for f in dataclasses.fields(value))
    return False


def walk() -> list[tuple[str, str]]:
    """The (module, function) of every dpbench call that received ε, in call order."""
    import dpbench

    root = str(Path(dpbench.__file__).resolve().parent)
    # appended to a file: cells run in forked children, which inherit the profiler
    log = Path(tempfile.mkdtemp()) / "calls.txt"

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        file = frame.f_code.co_filename
        if not file.startswith(root):
            return
        code = frame.f_code
        args = [frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount
                                                                + code.co_kwonlyargcount]]
        if any(_holds(a) for a in args):
            module = str(Path(file).resolve().relative_to(root).with_suffix(""))
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(f"{module}\t{code.co_qualname}\n")

    from dpbench.config.suite import load_suite
    from dpbench.engine.runner import run_suite
    from dpbench.report import build_report

    with tempfile.TemporaryDirectory() as tmp:
        suite_path = Path(tmp, "walk.yaml")
        suite_path.write_text(SUITE)
        sys.setprofile(profile)
        threading.setprofile(profile)  # the store is created in a thread
        try:
            suite = load_suite(suite_path)
            run_suite(suite, Path(tmp, "walk.zarr"), workers=0, progress=False)
            build_report(Path(tmp, "walk.zarr"), Path(tmp, "walk.html"), n_resamples=10,
                         allow_incomplete=True)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [(m, f) for m, f in (line.split("\t") for line in lines)]


def main() -> None:
    global DEPTH, CUBES
    if len(sys.argv) > 1:
        DEPTH = int(sys.argv[1])
    if len(sys.argv) > 2:
        CUBES = sys.argv[2] == "cubes"
    calls = walk()
    glue = [(m, f) for m, f in calls if m.split("/")[0] not in MECHANISM]
    functions = sorted(set(glue))
    stops = [("mechanism" if m.split("/")[0] in MECHANISM else m) for m, _ in calls]
    entries = [s for i, s in enumerate(stops) if i == 0 or stops[i - 1] != s]
    print(f"functions receiving ε (outside the mechanism): {len(functions)}")
    print(f"modules among them: {len({m for m, _ in functions})}")
    print(f"hops (module entries in call order, the mechanism one stop): {len(entries)}")
    layers = [e.split("/")[0] for e in entries]
    layer_entries = [x for i, x in enumerate(layers) if i == 0 or layers[i - 1] != x]
    print(f"layer hops (entries into a top-level folder): {len(layer_entries)}: "
          + " → ".join(layer_entries))
    for module, name in functions:
        print(f"  {module}: {name}")
    print("walk: " + " → ".join(entries))


if __name__ == "__main__":
    main()
