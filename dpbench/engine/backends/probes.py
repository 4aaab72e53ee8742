"""Scheduler sources other than a profile, checked before anything is written: a running
scheduler's address (a TCP connection and a dask comm handshake) and a scheduler file
(docs/clusters.md).

Precedence of where a dask run computes (first match wins; ``docs/clusters.md``; the dask
backend, :mod:`dpbench.engine.backends.dask`, opens the connection):

1. ``--scheduler ADDRESS`` -> ``Client(address)``;
2. ``--scheduler-file FILE`` -> ``Client(scheduler_file=FILE)`` (the JSON a ``dask scheduler
   --scheduler-file`` writes; needs a file system shared with the scheduler);
3. ``DASK_SCHEDULER_ADDRESS`` in the environment;
4. ``--cluster PROFILE.yaml`` -> a cluster manager built from the profile
   (:mod:`dpbench.config.cluster`, :mod:`dpbench.engine.backends.cluster_class`);
5. a LocalCluster with one single-threaded worker process per core (or ``--workers N``).

``--workers 0`` (without 1-4) runs inline, without dask (for debugging); ``--backend
processes`` uses a pool of local processes instead of dask.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from ...core.errors import UserInputError


def check_scheduler_file(path: str | Path) -> str:
    """The scheduler address in a dask scheduler file (JSON with ``address``); a clear
    :class:`UserInputError` when the file is missing or malformed."""
    path = Path(path)
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserInputError(f"--scheduler-file {path}: no such file (start the scheduler with "
                             "dask scheduler --scheduler-file FILE on a shared file system)") \
            from None
    except OSError as exc:
        raise UserInputError(f"--scheduler-file {path}: cannot read: {exc.strerror or exc}") \
            from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserInputError(f"--scheduler-file {path}: not a dask scheduler file "
                             f"(malformed JSON: {exc})") from None
    if not isinstance(info, dict) or not isinstance(info.get("address"), str):
        raise UserInputError(f"--scheduler-file {path}: not a dask scheduler file "
                             "(a JSON object with an 'address' field)")
    return info["address"]


#: Seconds a scheduler address is given to accept a TCP connection before the run is refused.
SCHEDULER_PROBE_S = 10.0


def check_scheduler_address(address: str, source: str,
                            timeout: float = SCHEDULER_PROBE_S) -> str:
    """``address`` if it is a dask scheduler address that accepts a connection within
    ``timeout`` seconds (tcp/tls; other schemes are only parsed); a clear
    :class:`UserInputError` naming ``source`` otherwise — before anything is written."""
    from distributed.comm.addressing import parse_address, parse_host_port

    example = "e.g. tcp://HOST:8786"
    try:
        scheme, loc = parse_address(address)
        host, port = parse_host_port(loc) if scheme in ("tcp", "tls") else (loc, None)
    except (ValueError, TypeError) as exc:
        raise UserInputError(f"{source} {address!r:.200}: not a dask scheduler address ({exc}); "
                             f"{example}") from None
    _check_scheme(address, source, scheme)
    if scheme in ("tcp", "tls"):
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except (OSError, ValueError, OverflowError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise UserInputError(f"{source} {address!r:.200}: cannot reach the scheduler "
                                 f"({reason}; waited at most {timeout:g} s); is it running and "
                                 f"is the address right?{loopback_hint(address)}") from None
        _handshake(address, source, timeout)
    return address


#: Address schemes that cannot name a scheduler in another process: ``inproc://`` is dask's
#: in-process transport.
_IN_PROCESS_SCHEMES = frozenset({"inproc"})


def _check_scheme(address: str, source: str, scheme: str) -> None:
    """``scheme`` is one of the comm backends this dask knows (``tcp``, ``tls``, ...); anything
    else would fail inside ``Client`` with a traceback after the store is created."""
    import distributed.comm  # noqa: F401  (registers the built-in backends)
    from distributed.comm.registry import backends

    allowed = sorted(set(backends) - _IN_PROCESS_SCHEMES)
    if scheme not in allowed:
        what = ("names a scheduler inside one process only" if scheme in _IN_PROCESS_SCHEMES
                else f"unknown address scheme {scheme!r}")
        raise UserInputError(f"{source} {address!r:.200}: {what}; allowed schemes: "
                             f"{', '.join(f'{s}://' for s in allowed)} (e.g. tcp://HOST:8786)")


def loopback_hint(address: str) -> str:
    """A sentence for an address that is a loopback one (``tcp://127.0.0.1:8786``): it names
    a scheduler on the host that uses it, so a scheduler on another host that advertises it
    (started with ``--host 127.0.0.1``, or on a host whose hostname resolves to 127.0.0.1) is
    out of reach there, and so are its workers; '' otherwise."""
    from distributed.comm.addressing import get_address_host

    from .network import is_loopback

    try:
        host = get_address_host(address)
    except (ValueError, TypeError):
        return ""
    if not is_loopback(host):
        return ""
    return (f" ({host} is a loopback address: only processes on the scheduler's own host "
            "can connect to it; start the scheduler with --interface or --host naming the "
            "network the client and workers share)")


def _handshake(address: str, source: str, timeout: float) -> None:
    """A dask comm handshake with ``address`` (something that accepts TCP connections but does
    not speak dask's protocol is refused here, not after the store is created)."""
    import asyncio

    from distributed.comm import connect

    async def probe() -> None:
        comm = await connect(address, timeout=timeout)
        await comm.close()

    try:
        asyncio.get_running_loop()
        return  # called from inside an event loop: the TCP check above has to do
    except RuntimeError:
        pass
    try:
        asyncio.run(asyncio.wait_for(probe(), timeout))
    except Exception as exc:  # noqa: BLE001 (any failure means: not a usable scheduler)
        raise UserInputError(f"{source} {address!r:.200}: does not answer as a dask scheduler "
                             f"({type(exc).__name__}: {str(exc)[:200]}; waited at most "
                             f"{timeout:g} s)") from None


def check_cluster_source(scheduler: str | None, scheduler_file: str | Path | None) -> None:
    """Reject contradictory options, unusable scheduler files and malformed or unreachable
    scheduler addresses (``--scheduler``, the file's, ``DASK_SCHEDULER_ADDRESS``) before anything
    is written."""
    if scheduler is not None and scheduler_file is not None:
        raise UserInputError("give --scheduler ADDRESS or --scheduler-file FILE, not both")
    if scheduler is not None:
        check_scheduler_address(scheduler, "--scheduler")
    elif scheduler_file is not None:
        check_scheduler_address(check_scheduler_file(scheduler_file),
                                f"--scheduler-file {scheduler_file}: address")
    elif os.environ.get("DASK_SCHEDULER_ADDRESS"):
        check_scheduler_address(os.environ["DASK_SCHEDULER_ADDRESS"], "DASK_SCHEDULER_ADDRESS")


def _scheduler_address(scheduler: str | None, scheduler_file: str | Path | None) -> str | None:
    """The address a run connects to (``--scheduler``, the scheduler file's, or
    ``DASK_SCHEDULER_ADDRESS``); None when it starts its own cluster."""
    if scheduler is not None:
        return scheduler
    if scheduler_file is not None:
        return check_scheduler_file(scheduler_file)
    return os.environ.get("DASK_SCHEDULER_ADDRESS") or None


def _unreadable(paths: list[str]) -> tuple[str, list[str]]:
    """On a worker: its hostname and the ``paths`` it cannot read as regular files."""
    return socket.gethostname(), [p for p in paths
                                  if not (os.path.isfile(p) and os.access(p, os.R_OK))]


#: Seconds given to connect to a running scheduler and ask its workers about the data files.
DATA_PROBE_TIMEOUT_S = 30.0


def check_data_on_workers(scheduler: str | None, scheduler_file: str | Path | None,
                          paths: list[str]) -> None:
    """With a running scheduler (``--scheduler``, ``--scheduler-file``): every worker connected
    now can read every data file the suite names, else a :class:`UserInputError` naming the
    worker's host and the files, before the store is touched (a file on the client's own disk
    would otherwise fail every cell on the workers; docs/clusters.md, 'Multi-node'). Workers
    that join later, and the worker jobs a profile starts, are not asked: their cells fail with
    the reason if the file is missing there."""
    address = _scheduler_address(scheduler, scheduler_file)
    if address is None or not paths:
        return
    from distributed import Client

    with Client(address, timeout=DATA_PROBE_TIMEOUT_S, set_as_default=False) as client:
        answers = client.run(_unreadable, list(paths))
    missing: dict[str, set[str]] = {}
    for host, unread in answers.values():
        for path in unread:
            missing.setdefault(path, set()).add(host)
    if missing:
        here = socket.gethostname()
        lines = "; ".join(f"{path} on {', '.join(sorted(hosts))}"
                          for path, hosts in sorted(missing.items()))
        raise UserInputError(f"data files the suite names cannot be read by the workers of "
                             f"{address}: {lines} (the client, on {here}, reads them): put them "
                             "on a file system every node shares, at the same path")
