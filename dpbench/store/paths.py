"""Where a store is: whether a path holds a dpbench store, without opening it with zarr (a run
checks its store path before it starts its workers; :mod:`.cube` imports zarr)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from ..core.files import read_regular

ROOT_KEY = "dpbench_store"
#: An experiment group's own entry in its metadata (schema, definition, fingerprint, initialised).
EXP_KEY = "dpbench_experiment"
#: Suffix of the staging directory beside a store in which an experiment is grown
#: (store/growth.py); like the writer lock, ``<store>.lock``, it sits outside the zarr hierarchy
#: so that no reader ever lists it.
STAGING_SUFFIX = ".grow"
#: In the root metadata: the status counts per experiment and algorithm label, as ``rows``
#: (experiment, label, cells, done, failed, not applicable, pending), with the
#: :func:`status_files` they were counted from; written by a run once it has written
#: everything, cleared by the next writer's prepare (``None``: count the status arrays).
#: ``dpbench status`` and the resume of a finished store read it without opening zarr.
SUMMARY_KEY = "status_summary"
#: The group of a store that holds its audits (dpbench.audit.store).
AUDIT_GROUP = "audit"


#: Largest metadata file (``zarr.json``) read from a store: a store's metadata is kilobytes.
MAX_METADATA_BYTES = 64 * 2**20


def root_meta(path: Path) -> dict[str, Any] | None:
    """The dpbench entry of a store's root metadata (``zarr.json``, read as JSON, at most
    :data:`MAX_METADATA_BYTES` of it, from a regular file only), or ``None`` when ``path``
    holds no dpbench store."""
    meta = path / "zarr.json"
    if not meta.is_file():
        return None
    try:
        doc = json.loads(read_regular(meta, MAX_METADATA_BYTES, "store metadata"))
    except (OSError, ValueError, RecursionError):  # NotReadable is a ValueError
        return None
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    found = attrs.get(ROOT_KEY) if isinstance(attrs, dict) else None
    return found if isinstance(found, dict) else None


def is_store(path: Path) -> bool:
    """Whether ``path`` holds a dpbench store (its root metadata names one)."""
    return root_meta(path) is not None


def check_store_files(path: Path) -> None:
    """Refuse a store that holds anything but directories and regular files: a symbolic link (to
    ``/dev/zero``, a system file, itself), a FIFO, a device or a socket inside it would make a
    read hang, fill the memory or read outside the store; and metadata larger than
    :data:`MAX_METADATA_BYTES`. :class:`StoreError` (exit 2) naming the entry; nothing is read
    (``lstat`` only)."""
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in (*dirs, *files):
            entry = os.path.join(root, name)
            try:
                st = os.lstat(entry)
            except FileNotFoundError:  # renamed away by a growth's swap meanwhile (growth.py)
                continue
            if stat.S_ISDIR(st.st_mode):
                continue
            what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else None
                    if stat.S_ISREG(st.st_mode) else "a FIFO, device or socket")
            if what is None and name == "zarr.json" and st.st_size > MAX_METADATA_BYTES:
                what = f"metadata of {st.st_size} bytes (at most {MAX_METADATA_BYTES} are read)"
            if what is not None:
                rel = os.path.relpath(entry, path)
                raise StoreError(f"store {str(path)!r} is damaged: {rel!r} is {what}; a store "
                                 "holds only directories and regular files (nothing in it is "
                                 "followed or read). Re-run its suite into a new --store")


def check_store_path(path: Path) -> bool:
    """True if ``path`` is an existing dpbench store, False if it is free (absent or an empty
    directory); :class:`StoreError` if it holds anything else."""
    if os.path.lexists(path) and not path.exists():
        raise StoreError(f"store path {str(path)!r} is a symbolic link that leads nowhere (or to "
                         "itself); choose a new path or an existing store directory")
    if not path.exists():
        return False
    if not path.is_dir():
        raise StoreError(f"store path {str(path)!r} is a file, not a dpbench store; "
                         "choose a new path or an existing store directory")
    if is_store(path):
        return True
    if any(path.iterdir()):
        raise StoreError(f"store path {str(path)!r} holds something else (a non-empty directory "
                         "that is not a dpbench store); choose a new path or an existing store")
    return False


def status_files(path: Path, experiments: list[str]) -> str:
    """A digest of the files of the experiments' ``status`` arrays (name, size, modification
    time): any write to a status array, by dpbench or by hand (a chunk rewritten, a chunk file
    deleted to have its cells computed again), changes it. The names come from the store:
    anything but a plain directory name is refused (:class:`StoreError`), so no path read from a
    store leads outside it."""
    entries = []
    for name in sorted(experiments):
        if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name \
                or "\\" in name:
            raise StoreError(f"store {str(path)!r}: {name!r} is not an experiment name")
        root = path / name / "status"
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for file in sorted(files):
                st = os.stat(os.path.join(folder, file))
                entries.append([os.path.relpath(os.path.join(folder, file), path), st.st_size,
                                st.st_mtime_ns])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()
