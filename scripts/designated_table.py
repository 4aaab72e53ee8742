#!/usr/bin/env python
"""The designated instances of an audit store as a Markdown table:
``python scripts/designated_table.py results/audit.zarr``.

One row per mechanism label of every audit named ``designated_…`` or ``nominal_…`` (docs/audit.md,
'Designated instances'): the instance (problem, configuration the audit confirmed), the claim, the
instance's true ε (``Algorithm.exact_epsilon`` on the audited pair; "—" where not computable), the
audit's assumption-free ε_lb, the reach ε_lb / true ε, the claim's slack true ε / claimed ε, the
confirmation runs per side, the seconds the point took and the verdict. Read-only: it computes
nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from dpbench.audit.report import DESIGNATED_PREFIX, audit_section
from dpbench.audit.store import audit_names
from dpbench.store.cube import Store

#: Audits of claims that are nominal (the ledger marks them not certified) and refuted.
NOMINAL_PREFIX = "nominal_"


def _f(x: float, digits: int = 3) -> str:
    if not math.isfinite(x):
        return "∞" if x == math.inf else "—"
    return f"{x:.{digits}g}"


def table(store: Store) -> str:
    cols = ("mechanism", "instance", "claimed ε", "true ε", "ε_lb", "reach ε_lb/true",
            "slack true/claimed", "runs/side", "seconds", "verdict")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name in audit_names(store):
        if not name.startswith((DESIGNATED_PREFIX, NOMINAL_PREFIX)):
            continue
        sec = audit_section(store, name)
        for r in sec.rows:
            if r.configurations == 0:
                continue
            lines.append("| " + " | ".join([
                f"`{r.algorithm}`", f"{r.problem}, {r.config or r.canary}",
                _f(r.epsilon_claimed), _f(r.true_epsilon), _f(r.epsilon_lb), _f(r.reach, 2),
                _f(r.slack, 2), str(r.runs_completed), f"{r.seconds:.0f}",
                ("**violation** (expected)" if sec.expect == "violation" and r.violation else
                 "**VIOLATION**" if r.violation else
                 "missed" if sec.expect == "violation" else "no violation")]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="an audit store written by dpbench audit")
    args = ap.parse_args(argv)
    print(table(Store.open(args.store)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
