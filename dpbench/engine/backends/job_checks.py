"""Checks that a batch system would run a profile's worker jobs, made before the store exists:
the submission command is on this machine's PATH, and (SLURM) ``sbatch --test-only`` accepts the
job script the cluster would submit (docs/reliability.md, 'Clusters that give no worker').
"""

from __future__ import annotations

from pathlib import Path

from ...config.cluster import Profile
from ...core.errors import UserInputError
from .cluster_class import cluster_class
from .render import job_script

#: The submission command each dask-jobqueue class needs on the client's PATH.
SUBMIT_COMMANDS = {"SLURMCluster": "sbatch", "PBSCluster": "qsub", "SGECluster": "qsub",
                   "LSFCluster": "bsub", "OARCluster": "oarsub", "HTCondorCluster": "condor_submit"}


def check_submit_command(prof: Profile, source: str | Path) -> None:
    """A batch-system profile needs its submission command here (the client submits the jobs):
    without it dask-jobqueue retries the submission forever, so it is refused up front."""
    import shutil

    command = SUBMIT_COMMANDS.get(prof.cls) if prof.family == "jobqueue" else None
    if command is not None and shutil.which(command) is None:
        raise UserInputError(f"{source}: cluster.class {prof.cls} submits jobs with {command!r}, "
                             f"which is not on this machine's PATH; run the client on a node of "
                             "the cluster (a login node), or use another profile")


#: Batch systems whose submission command can validate a job without queueing it.
DRY_RUN_COMMANDS = {"SLURMCluster": ("sbatch", "--test-only")}
DRY_RUN_TIMEOUT_S = 30.0


def check_job_accepted(prof: Profile, source: str | Path) -> None:
    """Ask the batch system whether it would accept the profile's worker job, without queueing
    it (SLURM: ``sbatch --test-only`` on the job script the cluster would submit). A wrong
    partition or account, or a job larger than any node, is then refused before the store exists
    (exit 2) instead of leaving the run waiting for workers that never come."""
    import dataclasses
    import shutil
    import subprocess
    import tempfile
    import warnings

    command = DRY_RUN_COMMANDS.get(prof.cls) if prof.family == "jobqueue" else None
    if command is None or shutil.which(command[0]) is None:
        return
    cls = cluster_class(prof, source)
    probe = dataclasses.replace(prof, kwargs={**prof.kwargs, "log_directory": None})
    script = job_script(probe, cls)
    with tempfile.NamedTemporaryFile("w", prefix="dpbench-job-", suffix=".sh") as f:
        f.write(script)
        f.flush()
        try:
            r = subprocess.run([*command, f.name], capture_output=True, text=True,
                               timeout=DRY_RUN_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            warnings.warn(f"{source}: could not check the worker job with "
                          f"{' '.join(command)}: {exc}", stacklevel=2)
            return
    if r.returncode != 0:
        said = "; ".join(line.strip() for line in (r.stderr or r.stdout).splitlines()
                         if line.strip())
        raise UserInputError(f"{source}: cluster.kwargs: the batch system refuses the worker job "
                             f"({' '.join(command)}): {said[-600:]}; check queue (partition), "
                             "account, cores, memory and walltime against what the site offers")
