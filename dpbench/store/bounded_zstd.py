"""zarr's zstd codec with a bound on what one chunk may decompress to (docs/reliability.md,
"Damaged stores").

A zstd frame states its decompressed size in its header, and the decoder allocates that much:
a chunk of a few kilobytes can claim gigabytes (a decompression bomb). Before decoding, this
codec reads the size from the frame header (RFC 8878, section 3.1.1.1) and refuses a frame
without one, or one larger than the chunk can hold: its cells times the item size for numbers,
at most :data:`TEXT_BYTES_PER_CELL` per cell (and :data:`TEXT_CHUNK_BYTES` in all) for text.
Encoding is zarr's own, so the stores written are unchanged. :func:`install` makes zarr use it
for the codec name ``zstd`` in this process.
"""

from __future__ import annotations

import math
from typing import Any

from zarr.codecs.zstd import ZstdCodec

__all__ = ["BoundedZstdCodec", "frame_content_size", "install"]

_MAGIC = 0xFD2FB528
#: Most decompressed bytes per cell of a text variable (``error``, labels).
TEXT_BYTES_PER_CELL = 2**20
#: Most decompressed bytes of one text chunk.
TEXT_CHUNK_BYTES = 2**28


def frame_content_size(data: bytes) -> int | None:
    """The decompressed size a zstd frame states in its header, or None when it states none
    (or ``data`` is not a zstd frame)."""
    if len(data) < 6 or int.from_bytes(data[:4], "little") != _MAGIC:
        return None
    descriptor = data[4]
    fcs_flag, single_segment, did_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[did_flag]
    size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if size == 0 or len(data) < pos + size:
        return None
    value = int.from_bytes(data[pos:pos + size], "little")
    return value + 256 if size == 2 else value


def _bound(chunk_spec: Any) -> int:
    cells = math.prod(chunk_spec.shape)
    native = chunk_spec.dtype.to_native_dtype()
    if native.kind in "OTU":
        return min(cells * TEXT_BYTES_PER_CELL + 2**20, TEXT_CHUNK_BYTES)
    return cells * native.itemsize


class BoundedZstdCodec(ZstdCodec):
    """:class:`zarr.codecs.ZstdCodec` refusing frames larger than their chunk (module doc)."""

    def _decode_sync(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
        raw = chunk_bytes.as_numpy_array()
        stated = frame_content_size(raw[:18].tobytes())
        bound = _bound(chunk_spec)
        if stated is None or stated > bound:
            what = "no size" if stated is None else f"{stated} bytes"
            raise ValueError(f"a zstd chunk states {what}; a chunk of shape "
                             f"{list(chunk_spec.shape)} holds at most {bound} bytes")
        return super()._decode_sync(chunk_bytes, chunk_spec)


def install() -> None:
    """Make zarr decode ``zstd`` with :class:`BoundedZstdCodec` in this process."""
    import zarr
    from zarr.registry import register_codec

    register_codec("zstd", BoundedZstdCodec)
    zarr.config.set({"codecs.zstd": f"{__name__}.BoundedZstdCodec"})
