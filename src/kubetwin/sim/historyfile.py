"""A run folder's history.jsonl and events.jsonl: plain JSON lines, or, past a size, zstd-compressed in the seekable
format (history.jsonl.zst, events.jsonl.zst) -- and the one way every reader opens them.

Why compress: a day of 1,000,000 pods wrote 19.8 GB of history.jsonl (issue 32); its lines repeat each object's
fields version after version, and zstd level 1 stores them ~56x smaller at ~1.4 GB/s (seekable.py), less than
writing them plain costs. Why not always: a small run's history.jsonl stays readable by `jq` and `grep` as they are.
Scenario.spec.historyCompression chooses: Auto (plain until the history reaches AUTO_BYTES, then both files are
compressed, what was written included), Zstd (from the start) or None (never). Either way the lines are the same
bytes, so history.index's offsets (decompressed offsets) and every reader's answers are the same.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Literal, Protocol

from kubetwin.sim.seekable import FrameWriter, SeekableFile

__all__ = ["AUTO_BYTES", "EVENTS_FILE", "HISTORY_FILE", "ZSTD_SUFFIX", "Compression", "HistorySource", "LineSink",
           "history_path", "open_history"]

HISTORY_FILE, EVENTS_FILE = "history.jsonl", "events.jsonl"
ZSTD_SUFFIX = ".zst"
Compression = Literal["Auto", "Zstd", "None"]
# Twin choice: Auto compresses once the history passes 64 MiB (a run of ~8,000 pods): below it jq reads the plain
# file in a blink and compression saves little; above it the plain files grow by GBs (a 10,000-pod run's 77 MB
# history.jsonl is 1.3 MB compressed).
AUTO_BYTES = 64 << 20
_BUFFER = 1 << 20  # bytes written per system call (the default 8 KiB made ~10,000 writes of a 77 MB history)


def history_path(run_dir: Path, name: str = HISTORY_FILE) -> Path | None:
    """The run folder's file `name` as written (plain or compressed), None when it has neither."""
    for path in (run_dir / name, run_dir / (name + ZSTD_SUFFIX)):
        if path.is_file():
            return path
    return None


class HistorySource(Protocol):
    """A history file read by decompressed offset: plain or seekable zstd alike."""

    size: int | None  # decompressed bytes; None when unknown (a zstd file without a seek table)

    def lines(self, offset: int = 0) -> Iterator[bytes]:
        """The lines from `offset` (a line's start), newlines kept."""
        ...

    def pread(self, n: int, offset: int) -> bytes:
        """Up to n bytes from `offset`."""
        ...

    def lines_at(self, offsets: list[int]) -> Iterator[tuple[int, bytes]]:
        """(offset, line) for each of the sorted `offsets` (line starts)."""
        ...


class _PlainFile:
    def __init__(self, path: Path) -> None:
        self._file: IO[bytes] = path.open("rb")
        self.size: int | None = path.stat().st_size

    def lines(self, offset: int = 0) -> Iterator[bytes]:
        self._file.seek(offset)
        yield from self._file

    def pread(self, n: int, offset: int) -> bytes:
        return os.pread(self._file.fileno(), n, offset)

    def lines_at(self, offsets: list[int]) -> Iterator[tuple[int, bytes]]:
        return _lines_at(self._file.fileno(), offsets)

    def close(self) -> None:
        self._file.close()


# Lines close together are read in one block of at most _BLOCK bytes: a seek and a buffered read per line read
# 8 KiB for each ~1 KiB Event, and the 150,000 Events alive at a 1,000,000-pod day's end lie ~3 KiB apart over
# ~500 MB of history (issue 32: 1.7 s of `get events`, as many page faults through a map of the file).
_BLOCK, _GAP, _TAIL = 16 << 20, 64 << 10, 64 << 10


def _lines_at(fd: int, offsets: list[int]) -> Iterator[tuple[int, bytes]]:
    """(offset, line) for each of the sorted `offsets` of the plain file open as fd."""
    i, n = 0, len(offsets)
    while i < n:
        start, j = offsets[i], i
        while j + 1 < n and offsets[j + 1] - offsets[j] <= _GAP and offsets[j + 1] - start < _BLOCK:
            j += 1
        block = os.pread(fd, offsets[j] - start + _TAIL, start)
        for k in range(i, j + 1):
            at = offsets[k] - start
            end = block.find(b"\n", at)
            if end < 0:  # longer than the block's tail: read on until the line ends
                line, more = block[at:], offsets[k] + len(block) - at
                while not line.endswith(b"\n"):
                    chunk = os.pread(fd, _TAIL, more)
                    if not chunk:
                        break
                    cut = chunk.find(b"\n")
                    line += chunk if cut < 0 else chunk[:cut + 1]
                    more += len(chunk)
                yield offsets[k], line
            else:
                yield offsets[k], block[at:end + 1]
        i = j + 1



@contextlib.contextmanager
def open_history(path: Path) -> Iterator[HistorySource]:
    """A history file (a path history_path gave) opened for reading, plain or compressed."""
    source: _PlainFile | SeekableFile = SeekableFile(path) if path.name.endswith(ZSTD_SUFFIX) else _PlainFile(path)
    try:
        yield source
    finally:
        source.close()


class LineSink:
    """Lines written to `folder/name`, plain or compressed as `compression` says; `compress()` turns a plain file
    written so far into the compressed one (what Auto does past AUTO_BYTES), the same bytes from the same lines.
    `write(line)` is the underlying file's own method (one call a line: a day of 1,000,000 pods writes ~25,000,000);
    `write_lines(data)` writes whole lines at once, the same bytes as writing them one by one."""

    def __init__(self, folder: Path, name: str, compression: Compression) -> None:
        self.folder, self.name = folder, name
        self._plain: IO[bytes] | None = None
        self._zstd: FrameWriter | None = None
        self.write: Callable[[bytes], object]
        self.write_lines: Callable[[bytes], object]
        if compression == "Zstd":
            self._zstd = FrameWriter(folder / (name + ZSTD_SUFFIX))
            self.write, self.write_lines = self._zstd.write, self._zstd.write_lines
        else:
            self._plain = (folder / name).open("wb", buffering=_BUFFER)
            self.write = self.write_lines = self._plain.write

    @property
    def compressed(self) -> bool:
        return self._zstd is not None

    def compress(self) -> None:
        """From here on compressed, with what was written plain moved into the compressed file."""
        if self._plain is None:
            return
        self._plain.close()
        self._plain = None
        plain = self.folder / self.name
        self._zstd = FrameWriter(self.folder / (self.name + ZSTD_SUFFIX))
        self.write, self.write_lines = self._zstd.write, self._zstd.write_lines
        with plain.open("rb") as f:
            carry = b""
            while chunk := f.read(_BUFFER):
                chunk = carry + chunk
                cut = chunk.rfind(b"\n") + 1
                self._zstd.write_lines(chunk[:cut])
                carry = chunk[cut:]
            if carry:
                self._zstd.write_lines(carry)
        plain.unlink()

    def suspend(self) -> None:
        """Before a fork: everything written so far in the file (FrameWriter.suspend)."""
        if self._plain is not None:
            self._plain.flush()
        if self._zstd is not None:
            self._zstd.suspend()

    def resume(self) -> None:
        """In the process that goes on writing after the fork."""
        if self._zstd is not None:
            self._zstd.resume()

    def abandon(self) -> None:
        """In the process that stops writing after the fork: its copy closed, nothing more written."""
        if self._plain is not None:
            self._plain.close()  # flushed by suspend: closing writes nothing
        if self._zstd is not None:
            self._zstd.abandon()

    def close(self) -> None:
        if self._plain is not None:
            self._plain.close()
        if self._zstd is not None:
            self._zstd.close()
