"""Exception types: one hierarchy, rooted at :class:`DpbenchError`.

- :class:`UserInputError` (also a ``ValueError``): what a user wrote is wrong (a suite, a
  parameter, a store path, a cluster profile); the message names the field and the allowed
  values, and the CLI turns it into exit code 2 before anything is created.
  Subclasses: :class:`SuiteError`, :class:`StoreError`, ``dpbench.config.cluster.ProfileError``.
- :class:`PluginError` (also a ``TypeError``): a plugin breaks its contract (wrong base class,
  invalid declaration).
- :class:`SchedulerLost` (also a ``RuntimeError``): the dask scheduler went away mid-run.
- :class:`NoWorkers` (a :class:`UserInputError`): a cluster never gave the run a worker (a job
  the batch system will not start, a submission that fails); exit 2, cells so far kept.
- Cell outcomes, raised inside a cell and recorded in the cube rather than propagated:
  :class:`NotApplicable` (status "not applicable") and :class:`CellTimeout` (status "failed").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class DpbenchError(Exception):
    """Root of every error dpbench raises on purpose."""


class UserInputError(DpbenchError, ValueError):
    """Bad input from the user: the message names the field and the allowed values."""


class SuiteError(UserInputError):
    """A suite file failed validation; ``problems`` lists every error found, not just the first."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} error(s)\n{lines}")


class StoreError(UserInputError):
    """The store path holds something else, or a store that does not match the suite."""


class PluginError(DpbenchError, TypeError):
    """A plugin class breaks the plugin contract (e.g. is not a subclass of the right base)."""


class SchedulerLost(DpbenchError, RuntimeError):
    """The connection to the dask scheduler was lost mid-run; every written cell is kept."""


class NoWorkers(UserInputError):
    """No worker joined the run within the profile's ``worker_timeout_s``, or the batch system
    says its worker jobs can never start; the message gives the jobs' states and reasons."""


class NotApplicable(DpbenchError):
    """Raised when an algorithm cannot run on a problem (recorded as status 3, not as a failure)."""


class CellTimeout(DpbenchError):
    """A cell exceeded its per-cell time limit (recorded as a failure)."""


def did_you_mean(name: str, allowed: Iterable[str]) -> str:
    """A suffix suggesting the closest allowed name, or '' when nothing is close."""
    close = difflib.get_close_matches(str(name), list(allowed), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
