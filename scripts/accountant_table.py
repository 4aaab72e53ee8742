"""The NoisySGD accountant table of docs/bst14.md, computed by the code the ledger uses.

``python scripts/accountant_table.py`` prints the table; ``--write`` puts it into docs/bst14.md
between the markers ``<!-- accountant-table:begin -->`` and ``<!-- accountant-table:end -->``;
``--check`` exits 1 when the docs differ from what the code computes now (the test
``tests/unit/test_accountant_table.py`` does the same). About a minute on one core (the
n = 10⁴ rows compose T = 10⁸ steps).

Columns, for T = n² − 1 steps of BST14 Algorithm 1 at sampling rate 1/n, replace-one
(docs/bst14.md, "NoisySGD's noise, the accountant and NoisySGD-T"): the paper's noise multiplier
z = √(8 log(n/δ) log(1/δ))/ε; the ε the RDP accountant and the PLD of the dominating pair give that
z; the smallest z each certifies for the target ε (the PLD one is what ``sigma_mode: accountant``
runs with: ``calibrate_noisy_sgd_certified``); the PLD's ε at the RDP's z.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BEGIN, END = "<!-- accountant-table:begin -->", "<!-- accountant-table:end -->"
DOC = Path(__file__).resolve().parent.parent / "docs" / "bst14.md"

#: (n, target ε, δ) of the table's rows.
CASES = ((100, 1.0, 1e-4), (100, 1.0, 1e-6), (1000, 1.0, 1e-6), (10_000, 1.0, 1e-6),
         (10_000, 1.0, 1e-8), (1000, 0.1, 1e-6), (1000, 0.5, 1e-6), (1000, 2.0, 1e-6),
         (1000, 4.0, 1e-6))
HEADER = ("| n | target ε | δ | z of the paper | ε RDP at it | ε PLD at it | z needed, RDP "
          "| z needed, PLD (the ledger's) | ε PLD at RDP's z |")


def _n(n: int) -> str:
    return "10⁴" if n == 10_000 else str(n)


def row(n: int, target: float, delta: float) -> str:
    """One row of the table (module docstring)."""
    from dpbench.algorithms.noisy_sgd import paper_noise_multiplier
    from dpbench.privacy.accountant import (
        calibrate_noisy_sgd,
        calibrate_noisy_sgd_certified,
        noisy_sgd_epsilon,
        noisy_sgd_epsilon_pld,
    )

    steps = n * n - 1
    zp = paper_noise_multiplier(n, target, delta)
    z_rdp = calibrate_noisy_sgd(target, delta, n, steps)
    z_pld = calibrate_noisy_sgd_certified(target, delta, n, steps)
    return (f"| {_n(n)} | {target:g} | {delta:g} | {zp:.1f} "
            f"| {noisy_sgd_epsilon(zp, n, steps, delta):.4f} "
            f"| {noisy_sgd_epsilon_pld(zp, n, steps, delta):.4f} | {z_rdp:.3f} | {z_pld:.4f} "
            f"| {noisy_sgd_epsilon_pld(z_rdp, n, steps, delta):.4f} |")


def table(cases=CASES, progress: bool = False) -> list[str]:
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for case in cases:
        t0 = time.perf_counter()
        lines.append(row(*case))
        if progress:
            print(f"  {case} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return lines


def documented(text: str) -> list[str]:
    """The table as docs/bst14.md holds it (the lines between the markers)."""
    start, stop = text.index(BEGIN), text.index(END)
    return [line for line in text[start + len(BEGIN):stop].strip().splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="write the table into docs/bst14.md")
    what.add_argument("--check", action="store_true",
                      help="exit 1 when docs/bst14.md differs from what the code computes")
    args = parser.parse_args()
    lines = table(progress=True)
    text = DOC.read_text(encoding="utf-8")
    if args.write:
        start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
        DOC.write_text(text[:start] + "\n" + "\n".join(lines) + "\n" + text[stop:],
                       encoding="utf-8")
    elif args.check:
        if documented(text) != lines:
            print("docs/bst14.md's accountant table differs from the code's; run "
                  "python scripts/accountant_table.py --write", file=sys.stderr)
            return 1
    else:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
