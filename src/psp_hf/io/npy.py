"""Writing float32 `.npy` files row by row or through a reserved memory map (a full disk is an error, not a
SIGBUS)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np

NPY_HEADER_BYTES = 128


def _npy_header(shape: tuple[int, ...]) -> bytes:
    # A fixed-size version 1.0 header, so the row count can be filled in after streaming the rows.
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape!r}, }}"
    text = text.ljust(NPY_HEADER_BYTES - 10 - 1) + "\n"
    if len(text) != NPY_HEADER_BYTES - 10:
        raise ValueError(f"shape {shape} does not fit a {NPY_HEADER_BYTES}-byte .npy header")
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")


class NpyRowWriter:
    """Stream float32 rows of width `dim` into a `.npy` file with plain writes (no memory map).

    A full disk is then an `OSError` at the write that hit it, never a SIGBUS. `close()` writes the row count.
    """

    def __init__(self, path: str | os.PathLike, dim: int):
        self.path = Path(path)
        self.dim = dim
        self.rows = 0
        self._handle = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._handle.write(_npy_header((0, dim)))

    def write(self, rows: np.ndarray) -> None:
        """Append rows (any float dtype; written as little-endian float32)."""
        rows = np.ascontiguousarray(rows, dtype="<f4")
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise ValueError(f"expected rows of width {self.dim}, got shape {rows.shape}")
        self._handle.write(memoryview(rows).cast("B"))
        self.rows += len(rows)

    def close(self) -> None:
        """Fill in the row count, flush to disk and close."""
        self._handle.seek(0)
        self._handle.write(_npy_header((self.rows, self.dim)))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()

    def __enter__(self) -> NpyRowWriter:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._handle.close()


def open_npy_for_writing(path: Path, shape: tuple[int, ...]) -> np.memmap:
    """A float32 `.npy` memmap, so outputs larger than RAM stream to disk.

    The file's blocks are reserved first (`posix_fallocate`): a full disk is an `OSError` here, not a SIGBUS
    when a page of a sparse file is first written.
    """
    header = _npy_header(tuple(shape))
    size = len(header) + int(np.prod(shape, dtype=np.int64)) * 4
    with open(path, "wb") as handle:
        handle.write(header)
        handle.flush()
        try:
            os.posix_fallocate(handle.fileno(), 0, size)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            handle.truncate(size)  # no fallocate on this file system: at least the size is right
    return np.memmap(path, dtype="<f4", mode="r+", offset=len(header), shape=tuple(shape))
