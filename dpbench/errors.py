"""Exception types.

Every error caused by what a user wrote (a suite, a parameter, a store path) derives from
:class:`UserInputError`; the CLI turns those into a clear message and exit code 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserInputError(ValueError):
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


class NotApplicable(Exception):
    """Raised when an algorithm cannot run on a problem (recorded as status 3, not as a failure)."""


class CellTimeout(Exception):
    """A cell exceeded its per-cell time limit (recorded as a failure)."""


def did_you_mean(name: str, allowed: Iterable[str]) -> str:
    """A suffix suggesting the closest allowed name, or '' when nothing is close."""
    close = difflib.get_close_matches(str(name), list(allowed), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
