"""Installing out-of-tree plugin packages (examples/) into the test environment, and the CLI.

Packages are pip-installed without build isolation and without dependencies (no network needed),
and uninstalled afterwards; :func:`installed` also removes the ``build/`` and ``*.egg-info``
directories an in-tree build leaves next to the sources, when it created them.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def needs_build_backend() -> None:
    """setuptools < 70.1 needs the ``wheel`` package to build without isolation; the project's
    ``test`` extra installs both, so a missing one is a broken test environment, not a skip."""
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) < (70, 1) and importlib.util.find_spec("wheel") is None:
        pytest.fail(f"setuptools {setuptools.__version__} without 'wheel' cannot build offline; "
                    "install the test extra: pip install '.[test]'")


def pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          timeout=120)


def pip_install_into(path: Path, target: Path) -> dict[str, str]:
    """Install the package at ``path`` into the directory ``target`` only (``pip --target``),
    not into the shared environment; return the environment under which a subprocess sees it.

    Other pytest-xdist workers never see such a package, so a test that asserts "no plugin
    warning" cannot catch it half installed or half uninstalled.
    """
    import os

    r = pip("install", "--no-deps", "--no-build-isolation", "-q", "--target", str(target),
            str(path))
    assert r.returncode == 0, r.stderr
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), env.get("PYTHONPATH")]))
    return env


def dpbench(*args: str, cwd: Path | None = None, timeout: float = 120,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m dpbench ARGS`` in a subprocess (a fresh plugin registry)."""
    return subprocess.run([sys.executable, "-m", "dpbench", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


@contextmanager
def _holding(lock: Path) -> Iterator[None]:
    import fcntl

    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def installed(path: Path, distribution: str, modules: Sequence[str] = ()) -> Iterator[Path]:
    """The package at ``path`` visible to this environment for the duration of the block.

    ``modules`` are the top-level packages it builds (their ``*.egg-info`` directories are
    removed afterwards when the build created them, as is ``build/``).

    The pytest-xdist workers share one environment, and several tests assert that no plugin
    fails to load; a package that another worker is half way through installing or uninstalling
    (its entry point written, its modules not, or the reverse) would break them. So the package
    is installed into a directory of its own (``pip --target``) and then made visible in one
    step: a ``.pth`` file naming that directory is renamed into site-packages; it disappears
    in one step too (the ``.pth`` file is unlinked, then the directory renamed away and
    removed). Users are counted across processes (a file lock and a count in the venv): the
    first installs, the last uninstalls, and no worker pulls the package from under another
    one's subprocess.
    """
    import json
    import os
    import sysconfig

    needs_build_backend()
    state = Path(sys.prefix) / f".dpbench-test-{distribution}.json"
    lock = state.with_suffix(".lock")
    target = Path(sys.prefix) / f".dpbench-test-{distribution}"
    pth = Path(sysconfig.get_paths()["purelib"]) / f"dpbench-test-{distribution}.pth"
    # One pytest run's workers share PYTEST_XDIST_TESTRUNUID; a count left by a killed run is
    # ignored (that run's users are gone).
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", f"pid-{os.getpid()}")
    artefacts = [path / "build", *(path / f"{m}.egg-info" for m in modules)]
    with _holding(lock):
        doc = json.loads(state.read_text()) if state.exists() else {}
        if doc.get("run") != run or doc.get("users", 0) <= 0 or not pth.exists():
            doc = {"run": run, "users": 0,
                   "existed": {str(a): a.exists() for a in artefacts}}
            pth.unlink(missing_ok=True)
            shutil.rmtree(target, ignore_errors=True)
            r = pip("install", "--no-deps", "--no-build-isolation", "-q", "--target",
                    str(target), str(path))
            assert r.returncode == 0, r.stderr
            tmp = pth.with_name(f".{pth.name}.{os.getpid()}")
            tmp.write_text(f"{target}\n")
            os.replace(tmp, pth)
        doc["users"] += 1
        state.write_text(json.dumps(doc))
    added = str(target) not in sys.path
    if added:  # this process read its .pth files at start-up
        sys.path.append(str(target))
        importlib.invalidate_caches()
    try:
        yield path
    finally:
        if added and str(target) in sys.path:
            sys.path.remove(str(target))
            importlib.invalidate_caches()
        with _holding(lock):
            doc = json.loads(state.read_text())
            doc["users"] -= 1
            state.write_text(json.dumps(doc))
            if doc["users"] == 0:
                pth.unlink(missing_ok=True)
                if target.exists():
                    trash = target.with_name(f"{target.name}.removed.{os.getpid()}")
                    os.replace(target, trash)
                    shutil.rmtree(trash, ignore_errors=True)
                for a in artefacts:
                    if not doc["existed"].get(str(a), True):
                        shutil.rmtree(a, ignore_errors=True)
