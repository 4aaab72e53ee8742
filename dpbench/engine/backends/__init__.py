"""Execution backends: where the tasks of a run are computed (docs/architecture.md, "Backends").

A backend is one module implementing :class:`~dpbench.engine.backends.base.Backend`:

* :mod:`.inline` — in this process, in plan order (``--workers 0``);
* :mod:`.processes` — a pool of local worker processes, no dask (``--backend processes``);
* :mod:`.dask` — a dask cluster: a ``LocalCluster`` (the default), a cluster profile, a running
  scheduler or a scheduler file.

The dask backend's cluster support, checked before anything runs: :mod:`.cluster_class` (the
class a profile names: allow-list, import, the profile checks that need it, ``load_profile``),
:mod:`.probes` (scheduler addresses and files), :mod:`.job_checks` (the batch system would run the
worker jobs) and :mod:`.render` (``dpbench profile``: what a profile would start).

:func:`open_backend` picks one from the run's :class:`~dpbench.engine.backends.base.Connection`.
Every backend computes the same tasks with the same task function, so the cube does not depend
on the backend or on the number of workers (tests/integration/test_engine.py checks it bit for bit).
"""

from __future__ import annotations

import contextlib
import importlib
import os

from .base import BACKEND_MODULES, BACKENDS, Backend, Connection

__all__ = ["BACKENDS", "Backend", "Connection", "open_backend"]


def open_backend(conn: Connection) -> contextlib.AbstractContextManager[Backend]:
    """The backend ``conn`` names, to open with ``with`` (checked first: bad options raise
    :class:`~dpbench.core.errors.UserInputError` before anything runs)."""
    conn.check()
    name = conn.backend
    if name == "dask" and conn.workers == 0 and conn.scheduler is None \
            and conn.scheduler_file is None and conn.profile is None \
            and not os.environ.get("DASK_SCHEDULER_ADDRESS"):
        name = "inline"  # --workers 0: no dask
    module = importlib.import_module(f"{__name__}.{BACKEND_MODULES[name]}")
    return module.open_backend(conn)
