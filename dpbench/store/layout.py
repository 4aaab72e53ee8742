"""How a cube variable is cut into zarr chunks (written by :mod:`.cube`, checked by
:mod:`.integrity`).

A zarr chunk holds all seeds of several neighbouring (algorithm, problem, grid point) rows: up to
:data:`VALUE_CHUNK_CELLS` cells for the values and errors, :data:`STATUS_CHUNK_CELLS` for
``status``. Stores made before this layout hold one grid point per chunk (:func:`legacy_chunk_shape`)
and are read and written the same way.
"""

from __future__ import annotations

#: Upper bound on the cells of one ``status`` chunk (64 KiB of uint8 before compression).
STATUS_CHUNK_CELLS = 2 ** 16
#: Upper bound on the cells of one chunk of a value variable or ``error`` (32 KiB of float64).
VALUE_CHUNK_CELLS = 2 ** 12


def chunk_shape(shape: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """Chunk shape of a cube variable: whole trailing axes (seed first) while they fit in
    ``budget`` cells, then as much of the next axis as fits, and 1 along the leading axes.

    ``budget`` is :data:`STATUS_CHUNK_CELLS` for ``status`` and :data:`VALUE_CHUNK_CELLS` for
    the others. A chunk always holds whole seed rows, so a write never splits a row.
    """
    chunks = [1] * len(shape)
    size = 1
    for ax in range(len(shape) - 1, -1, -1):
        length = max(int(shape[ax]), 1)
        if ax == len(shape) - 1 or size * length <= budget:
            chunks[ax] = length
            size *= length
            continue
        chunks[ax] = max(1, budget // size)
        break
    return tuple(chunks)


def legacy_chunk_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The chunks of stores made before :func:`chunk_shape`: one grid point (all its seeds)."""
    return (*([1] * (len(shape) - 1)), max(int(shape[-1]), 1)) if shape else ()


def allowed_chunk_shapes(var: str, shape: tuple[int, ...]) -> set[tuple[int, ...]]:
    """The chunk shapes dpbench writes for cube variable ``var`` of ``shape``."""
    budget = STATUS_CHUNK_CELLS if var == "status" else VALUE_CHUNK_CELLS
    return {chunk_shape(shape, budget), legacy_chunk_shape(shape)}
