"""Behaviour-preservation check for refactors: every committed suite, trimmed, run twice.

``trim`` writes a small copy of each suite in ``suites/`` (2 seeds, the first two values of each
grid axis, no expected rates; audits pinned to 200 runs per side so the store is deterministic),
``run`` runs them all into one directory, and ``compare`` checks that two such directories hold
bit-identical cubes (wall times and hosts excepted, tests/support/cubes.py) and audits::

    python scripts/trimmed_suites.py run /tmp/before      # on the old commit
    python scripts/trimmed_suites.py run /tmp/after       # on the new one
    python scripts/trimmed_suites.py compare /tmp/before /tmp/after

A resume check (``resume DIR``) re-runs every trimmed suite on its finished store and fails when
any cell is computed again.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "suites"
TRIM_SEEDS = 2
TRIM_AXIS = 2
AUDIT_RUNS = 200


def _trim_grid(grid: dict[str, Any]) -> dict[str, Any]:
    return {k: (v[:TRIM_AXIS] if isinstance(v, list) else v) for k, v in grid.items()}


def trim(raw: dict[str, Any]) -> dict[str, Any]:
    """A small copy of one suite's mapping (see the module docstring)."""
    out = dict(raw)
    if "experiments" in out:
        out["seeds"] = TRIM_SEEDS
        exps = []
        for exp in raw["experiments"]:
            e = {k: v for k, v in exp.items() if k not in ("expect", "exclude")}
            if "seeds" in e:
                e["seeds"] = TRIM_SEEDS
            e["grid"] = _trim_grid(exp["grid"])
            exps.append(e)
        out["experiments"] = exps
    if "audits" in out:
        out["audit"] = {**raw.get("audit", {}), "runs": AUDIT_RUNS, "selection_runs": AUDIT_RUNS}
        out["audit"].pop("budget_s", None)
        audits = []
        for a in raw["audits"]:
            a = {k: v for k, v in a.items() if k not in ("budget_s", "runs", "selection_runs")}
            a["grid"] = _trim_grid(a["grid"])
            audits.append(a)
        out["audits"] = audits
    return out


def write_trimmed(dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for src in sorted(SUITES.glob("*.yaml")):
        raw = yaml.safe_load(src.read_text())
        path = dest / src.name
        path.write_text(yaml.safe_dump(trim(raw), sort_keys=False, allow_unicode=True))
        paths.append(path)
    return paths


def _command(suite: Path) -> str:
    return "audit" if "audits" in yaml.safe_load(suite.read_text()) else "run"


def run(dest: Path, workers: int) -> None:
    for suite in write_trimmed(dest / "suites"):
        store = dest / f"{suite.stem}.zarr"
        cmd = [sys.executable, "-m", "dpbench", _command(suite), str(suite), "--store", str(store),
               "--workers", str(workers), "--quiet"]
        print(" ".join(cmd), flush=True)
        # exit 1 is a verdict (an audit of trimmed points detects less), not an error
        if subprocess.run(cmd).returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed")


def compare(a: Path, b: Path) -> None:
    sys.path.insert(0, str(ROOT))
    import zarr

    from tests.support.cubes import assert_audits_identical, assert_cubes_identical

    for store in sorted(a.glob("*.zarr")):
        other = b / store.name
        root = zarr.open_group(str(store), mode="r")
        groups = sorted(k for k, _ in root.groups() if k != "audit")
        assert sorted(k for k, _ in zarr.open_group(str(other), mode="r").groups()
                      if k != "audit") == groups, f"{store.name}: other experiments"
        assert_cubes_identical(store, other, groups)
        audits = sorted(k for k, _ in root["audit"].groups()) if "audit" in root else []
        if audits:
            assert_audits_identical(store, other, audits)
        print(f"{store.name}: {len(groups)} experiments, {len(audits)} audits identical")


def resume(dest: Path, workers: int) -> None:
    for suite in sorted((dest / "suites").glob("*.yaml")):
        store = dest / f"{suite.stem}.zarr"
        out = subprocess.run([sys.executable, "-m", "dpbench", _command(suite), str(suite),
                              "--store", str(store), "--workers", str(workers), "--quiet"],
                             capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise SystemExit(f"{suite.stem}: exit {out.returncode}: {out.stderr}")
        computed = [line for line in out.stdout.splitlines() if "computed" in line]
        print(f"{suite.stem}: {computed[0] if computed else out.stdout.strip()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("run", "resume"):
        p = sub.add_parser(name)
        p.add_argument("dest", type=Path)
        p.add_argument("--workers", type=int, default=2)
    p = sub.add_parser("compare")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p = sub.add_parser("trim")
    p.add_argument("dest", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.dest, args.workers)
    elif args.cmd == "resume":
        resume(args.dest, args.workers)
    elif args.cmd == "trim":
        for p in write_trimmed(args.dest):
            print(p)
    else:
        compare(args.a, args.b)


if __name__ == "__main__":
    main()
