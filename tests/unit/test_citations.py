"""Comments and docstrings cite papers and docs/ pages, never documents outside the repository.

The distilled specs the project was started from are not part of the repository; what the code
relies on from them is written in docs/ (docs/architecture.md). A maintainer must be able to follow
every citation, so a reference to those documents is an error wherever it appears.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("dpbench", "benchmarks", "docs", "suites", "examples", "tests", "scripts")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".j2", ".toml"}
#: "spec §2.1", "engineering §5", "shared/spec/…", "../shared/…": the out-of-repository documents.
OUTSIDE = re.compile(r"\bspec\s*§|\bengineering\s*§|shared/(spec|seeds)\b")


def test_no_citation_of_documents_outside_the_repository() -> None:
    offenders = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in SUFFIXES or path == Path(__file__).resolve():
                continue
            if any(part.startswith(".") or part in ("build", "__pycache__")
                   for part in path.relative_to(ROOT).parts):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if OUTSIDE.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    for name in ("README.md",):
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert not offenders, "cite a paper or a docs/ page instead:\n" + "\n".join(offenders)
