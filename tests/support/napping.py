"""A test mechanism whose cells take a set wall time, for runs that must last long enough to be
disturbed (tests/integration/test_multinode_faults.py: network faults while a run is in flight).

:class:`NapERM` (``nap_erm``) is the non-private reference that first sleeps
``$DPBENCH_NAP_S`` seconds (default 0) per cell. The sleep comes from the environment of the
process that computes the cell, not from the suite, so the very same suite runs in a fraction of
a second inline (the reference cube) and for tens of seconds on workers started with the
variable set; its results never depend on it. Sleeping rather than computing leaves the
machine's two cores to the client and the scheduler, as the scale-out benchmark's cells do
(benchmarks/_sleep_plugin.py). One chunk per task (a large declared cost), so a run has as many
tasks as cells and a fault always catches tasks in flight.

Worker processes import this module when they unpickle the mechanism (the repository root must
be on their ``PYTHONPATH``); clients run ``python -m tests.support.napping run ...``, which
registers it and runs the ``dpbench`` command line.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, ClassVar

from dpbench.algorithms.nonprivate import NonPrivateERM
from dpbench.core import registry
from dpbench.core.algorithm import Release

NAP_ENV = "DPBENCH_NAP_S"


class NapERM(NonPrivateERM):
    """The non-private reference, ``$DPBENCH_NAP_S`` seconds slower per cell."""

    name: ClassVar[str] = "nap_erm"
    summary: ClassVar[str] = "Test mechanism: the non-private reference after a set sleep"
    citation: ClassVar[str] = "dpbench multi-node fault tests (tests only)"

    def cost(self, n: int, p: int) -> float:
        return 1e7  # one chunk per task

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: Any) -> Release:
        time.sleep(float(os.environ.get(NAP_ENV, "0") or 0))
        return super().run(data, problem, epsilon=epsilon, delta=delta, rng=rng)


def register() -> None:
    """Register :class:`NapERM` in this process (suite parsing needs it)."""
    registry.register("algorithms", NapERM)


def suite_text(points: int, seeds: int = 1, name: str = "naps") -> str:
    """``points × seeds`` cells of ``nap_erm`` on LB-Quad (n = 10, p = 2), one grid point per ε."""
    eps = ", ".join(str(round(1.0 + 0.001 * i, 3)) for i in range(points))
    return f"""
name: {name}
root_seed: 5
seeds: {seeds}
experiments:
  - name: e
    problems: [{{problem: lb_quad}}]
    algorithms: [{{label: nap, algorithm: nap_erm}}]
    grid: {{n: [10], p: [2], epsilon: [{eps}]}}
"""


if __name__ == "__main__":  # `dpbench` command line with the mechanism registered
    # Register the class of the importable module, not of __main__: workers unpickle it by name.
    from dpbench.cli.main import main
    from tests.support import napping

    napping.register()
    sys.exit(main(sys.argv[1:]))
