"""Whether the worker jobs of a batch-system profile can reach the scheduler the client starts,
checked before the store exists (docs/clusters.md, 'Multi-node').

A dask-jobqueue cluster runs its scheduler in the client and its workers in batch jobs on other
nodes, which connect to the address the scheduler advertises: the address of the profile's
``interface`` (or ``scheduler_options.host``), else distributed's guess for this machine. An
interface this machine does not have fails inside dask with a traceback; a loopback address
(``interface: lo``, ``host: 127.0.0.1``, or the guess on a machine without a route outside whose
hostname resolves to 127.0.0.1) lets the run start and wait for workers that can never connect.
Both are refused here, naming the interfaces this machine has. A loopback address is accepted
where every node of the SLURM partition is this host (the single-node cluster of
``scripts/slurm-local.sh``).
"""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...config.cluster import Profile
from ...core.errors import UserInputError

#: Seconds ``sinfo`` is given to name a partition's nodes.
SINFO_TIMEOUT_S = 10.0


def interfaces() -> dict[str, list[str]]:
    """This machine's network interfaces and their IPv4 addresses (psutil, which distributed
    uses to resolve ``interface``)."""
    import psutil

    return {name: [a.address for a in addrs if a.family == socket.AF_INET]
            for name, addrs in psutil.net_if_addrs().items()}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is, or resolves to, a loopback address."""
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def _listing(ifaces: Mapping[str, list[str]]) -> str:
    return ", ".join(f"{name} ({', '.join(addrs) or 'no IPv4 address'})"
                     for name, addrs in sorted(ifaces.items()))


def advertised_address() -> str:
    """The address a scheduler started without ``interface`` or ``host`` advertises
    (distributed's guess: the source address of a route outside, else the hostname's)."""
    from distributed.utils import get_ip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return get_ip()
        except OSError:
            return "127.0.0.1"


def _only_this_host(prof: Profile) -> bool:
    """Whether every node of the profile's SLURM partition is this host (so a loopback scheduler
    is reachable by its workers); False when SLURM does not say."""
    if prof.cls != "SLURMCluster":
        return False
    queue = prof.kwargs.get("queue")
    cmd = ["sinfo", "-h", "-N", "-o", "%N", *(["-p", str(queue)] if queue else [])]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=SINFO_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    names = set(out.stdout.split())
    here = {socket.gethostname(), socket.gethostname().split(".")[0]}
    return out.returncode == 0 and bool(names) and names <= here


def check_profile_network(prof: Profile, source: str | Path) -> None:
    """A clear :class:`UserInputError` when the worker jobs of a dask-jobqueue profile could not
    reach its scheduler (see the module docstring); nothing for other profiles."""
    if prof.family != "jobqueue":
        return
    kw = prof.kwargs
    opts: dict[str, Any] = kw.get("scheduler_options") or {}
    field, iface = (("scheduler_options.interface", opts["interface"]) if opts.get("interface")
                    else ("interface", kw.get("interface")))
    ifaces = interfaces()
    outside = {n: a for n, a in ifaces.items() if a and not all(map(is_loopback, a))}
    hint = (f"set cluster.kwargs.interface to the network the nodes share; allowed (this "
            f"machine's interfaces with an address other nodes can reach): "
            f"{_listing(outside) or 'none'}")
    if iface:
        if iface not in ifaces:
            raise UserInputError(f"{source}: cluster.kwargs.{field}: {iface!r} is not a network "
                                 f"interface of this machine (the client, where the scheduler "
                                 f"listens); allowed: {_listing(ifaces)}")
        if not ifaces[iface]:
            raise UserInputError(f"{source}: cluster.kwargs.{field}: {iface!r} has no IPv4 "
                                 f"address; {hint}")
        if iface in outside:
            return
        where, address = f"cluster.kwargs.{field}: {iface!r}", ifaces[iface][0]
    elif opts.get("host"):
        if not is_loopback(str(opts["host"])):
            return
        where, address = "cluster.kwargs.scheduler_options.host", str(opts["host"])
    else:
        address = advertised_address()
        if not is_loopback(address):
            return
        where = (f"cluster.kwargs.interface: not set, and the address the scheduler would "
                 f"advertise (this machine has no route outside; its hostname "
                 f"{socket.gethostname()!r} resolves to it)")
    if _only_this_host(prof):
        return
    raise UserInputError(f"{source}: {where} is the loopback address {address}, which worker "
                         f"jobs on other nodes cannot connect to (the run would wait for "
                         f"workers that never come); {hint}")
