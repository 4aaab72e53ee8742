"""The decompressed size a zstd frame states (RFC 8878, 3.1.1.1), read before a chunk is
decoded (dpbench.store.bounded_zstd), and the codec refusing a chunk that claims more than it
can hold."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from numcodecs import Zstd

from dpbench.store import cube  # noqa: F401  (installs the bounded codec)
from dpbench.store.bounded_zstd import BoundedZstdCodec, frame_content_size


@pytest.mark.parametrize("size", [0, 1, 255, 256, 300, 65_791, 65_792, 2**20, 5 * 2**20])
def test_the_stated_size_is_the_size(size: int) -> None:
    # each field width of the header (1, 2 with its +256 offset, 4 bytes) is met on the way
    assert frame_content_size(bytes(Zstd(level=0).encode(b"a" * size))) == size


def test_no_frame_states_no_size() -> None:
    assert frame_content_size(b"") is None
    assert frame_content_size(b"\x00garbage" * 5) is None


def test_zarr_decodes_zstd_with_the_bounded_codec(tmp_path) -> None:
    from zarr.registry import get_codec_class

    assert get_codec_class("zstd") is BoundedZstdCodec
    arr = zarr.create_array(str(tmp_path / "a"), shape=(4,), chunks=(4,), dtype="u1")
    arr[:] = np.arange(4)
    assert arr[...].tolist() == [0, 1, 2, 3]
    chunk = next(p for p in (tmp_path / "a").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.write_bytes(bytes(Zstd(level=0).encode(b"\0" * 2**20)))   # 1 MiB claimed by 4 cells
    arr = zarr.open_array(str(tmp_path / "a"), mode="r")   # its codecs built from its metadata
    with pytest.raises(ValueError, match="states 1048576 bytes; a chunk of shape \\[4\\] holds "
                                         "at most 4 bytes"):
        arr[...]
