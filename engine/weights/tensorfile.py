"""Read and write safetensors files one tensor (or one slice) at a time, with plain file I/O.

Why not `safetensors.safe_open`: it memory-maps the file, and every page it touches counts as resident memory
of the process until the map is closed, so streaming a 50 GB checkpoint through it shows up as a 50 GB peak.
Reading with `readinto` into a buffer that is freed right away keeps the peak at one tensor (or one expert
slice), and writing with precomputed offsets lets a file of any size be produced without holding more than one
tensor.
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import torch

from engine.weights.validate import HeaderError, parse_header

READ_CHUNK = 64 << 20  # a progress report at least every 64 MB read, also inside one big tensor

DTYPES: dict[str, torch.dtype] = {
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "F32": torch.float32,
    "F64": torch.float64,
    "U8": torch.uint8,
    "I8": torch.int8,
    "I16": torch.int16,
    "I32": torch.int32,
    "I64": torch.int64,
    "BOOL": torch.bool,
}
NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


class TensorFileError(ValueError):
    """The file is not a well-formed safetensors file (truncated, bad header, unknown dtype)."""


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    nbytes: int

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class TensorFileReader:
    """Random access to the tensors of one safetensors file without memory-mapping it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh: io.BufferedReader = self.path.open("rb")
        try:
            # One checked header parse for the loader and the validation pass: length capped at the format's
            # 100 MB, every dtype known, shapes and offsets consistent with each other and with the file size.
            header = parse_header(self._fh, os.fstat(self._fh.fileno()).st_size, self.path.name)
        except (OSError, HeaderError) as exc:
            self._fh.close()
            raise TensorFileError(str(exc)) from exc
        self.metadata: dict[str, str] = header.metadata
        base = 8 + header.length
        self.entries: dict[str, TensorEntry] = {
            name: TensorEntry(name, DTYPES[raw.dtype], raw.shape, base + raw.begin, raw.end - raw.begin)
            for name, raw in header.entries.items()
        }

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> TensorFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_bytes(
        self,
        entry: TensorEntry,
        offset: int = 0,
        nbytes: int | None = None,
        on_chunk: Callable[[int], None] | None = None,
    ) -> memoryview:
        """The raw bytes of `entry` (or a part of it). With `on_chunk`, read READ_CHUNK bytes at a time into
        the same buffer and call it with the bytes read so far, so a load's progress moves inside a 1 GB
        tensor."""
        n = entry.nbytes - offset if nbytes is None else nbytes
        buf = _buffer(n)
        self._fh.seek(entry.start + offset)
        if on_chunk is None:
            got = self._fh.readinto(buf)
        else:
            got = 0
            while got < n:
                part = self._fh.readinto(buf[got : got + READ_CHUNK])
                if not part:
                    break
                got += part
                on_chunk(got)
        if got != n:
            raise TensorFileError(f"{self.path.name}: short read of {entry.name}")
        return buf

    def read(self, name: str) -> torch.Tensor:
        """The whole tensor, as a fresh CPU tensor that owns its memory."""
        entry = self.entries[name]
        return _to_tensor(self.read_bytes(entry), entry.dtype, entry.shape)

    def read_row(self, name: str, index: int) -> torch.Tensor:
        """One slice along the first dimension (one expert of a stacked expert tensor)."""
        entry = self.entries[name]
        rows = entry.shape[0]
        row_bytes = entry.nbytes // rows
        return _to_tensor(self.read_bytes(entry, index * row_bytes, row_bytes), entry.dtype, entry.shape[1:])


def _buffer(n: int) -> memoryview:
    """`n` writable bytes, not zeroed. A `bytearray(n)` zero-fills (and page-faults) its memory while holding
    the GIL: 30 ms per 64 MB on a quiet machine, 170 ms and more when the kernel must compact memory, and 380
    ms for a 1 GB tensor, all of it a frozen window during a load. torch.empty releases the GIL and touches
    nothing; the pages are faulted in by `readinto`, outside the GIL."""
    try:
        return torch.empty(n, dtype=torch.uint8).numpy().data  # the array's buffer as a memoryview
    except RuntimeError:  # a torch without numpy: the zeroed buffer still works, only slower to make
        return memoryview(bytearray(n))


def _to_tensor(buf: memoryview, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    if not buf:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(buf, dtype=dtype).reshape(shape)


@dataclass(frozen=True)
class PlannedTensor:
    """A tensor to be written later: its name, dtype and shape are known before its values exist."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        n = torch.tensor([], dtype=self.dtype).element_size()
        for d in self.shape:
            n *= d
        return n


class TensorFileWriter:
    """Write a safetensors file whose tensors arrive one by one, in the planned order.

    The header (names, dtypes, shapes, offsets) is written first from the plan, so no tensor needs to be in
    memory before its turn; `write` checks each tensor against its plan entry.
    """

    def __init__(
        self, path: str | Path, plan: Iterable[PlannedTensor], metadata: dict[str, str] | None = None
    ):
        self.path = Path(path)
        self.plan = list(plan)
        header: dict[str, Any] = {}
        if metadata:
            header["__metadata__"] = dict(metadata)
        offset = 0
        for item in self.plan:
            header[item.name] = {
                "dtype": NAMES[item.dtype],
                "shape": list(item.shape),
                "data_offsets": [offset, offset + item.nbytes],
            }
            offset += item.nbytes
        raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
        raw += b" " * (-len(raw) % 8)  # the spec allows space padding; aligned data is friendlier to readers
        self._fh: BinaryIO = self.path.open("wb")
        self._fh.write(struct.pack("<Q", len(raw)))
        self._fh.write(raw)
        self._next = 0
        self._pending_bytes = 0

    def write(self, name: str, tensor: torch.Tensor) -> None:
        """Write the next planned tensor (or, with `write_part`, a part of it)."""
        self.write_part(name, tensor, final=True)

    def write_part(self, name: str, part: torch.Tensor, *, final: bool) -> None:
        """Append `part` to the current tensor; `final=True` closes it. Lets a big tensor be written in
        slices."""
        item = self.plan[self._next]
        if item.name != name or part.dtype != item.dtype:
            raise ValueError(f"expected {item.name} ({item.dtype}), got {name} ({part.dtype})")
        data = part.detach().to("cpu").contiguous()
        if data.numel():
            self._fh.write(data.reshape(-1).view(torch.uint8).numpy().data)
        self._pending_bytes += data.numel() * data.element_size()
        if final:
            if self._pending_bytes != item.nbytes:
                raise ValueError(f"{name}: wrote {self._pending_bytes} bytes, planned {item.nbytes}")
            self._next += 1
            self._pending_bytes = 0

    def abandon(self) -> None:
        """Close after a failure without checking completeness (the caller deletes the file)."""
        self._fh.close()

    def close(self) -> None:
        complete = self._next == len(self.plan)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        if not complete:
            raise ValueError(
                f"{self.path.name}: only {self._next} of {len(self.plan)} planned tensors written"
            )


def iter_entries(paths: Iterable[Path]) -> Iterator[tuple[Path, TensorEntry]]:
    """Every tensor entry of several files, in file order then header order."""
    for path in paths:
        with TensorFileReader(path) as reader:
            for entry in reader.entries.values():
                yield path, entry
