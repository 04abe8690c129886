"""Zstandard's seekable format: independent zstd frames followed by a seek table, so a reader decompresses only the
frames that hold the bytes it wants, while any zstd decompressor (`zstdcat FILE | jq`, pandas, DuckDB) reads the
file whole as one stream (the seek table is a skippable frame, which decompressors pass over).

Format (facebook/zstd contrib/seekable_format/zstd_seekable_compression_format.md, v0.1.0): the frames, then one
skippable frame -- magic 0x184D2A5E and its size (4 bytes each, little-endian), an entry per frame (compressed size,
decompressed size: 4 bytes each; no checksum entries), and the 9-byte footer (number of frames: 4 bytes, descriptor:
1 byte, 0 here, seekable magic 0x8F92EAB1: 4 bytes). The writer here cuts frames at line ends only, so a line never
spans two frames; the reader does not rely on that.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO

import zstandard

__all__ = ["FRAME_BYTES", "FrameWriter", "SeekableFile"]

_SKIPPABLE_MAGIC, _SEEKABLE_MAGIC = 0x184D2A5E, 0x8F92EAB1
_FOOTER = struct.Struct("<IBI")  # number of frames, descriptor, seekable magic
_ENTRY = struct.Struct("<II")  # compressed size, decompressed size
# Twin choice: 4 MiB of lines per frame (a 10,000-pod run's history compresses 56x at level 1, 1.4 GB/s, measured
# with python-zstandard 0.25 on this machine); a read of one old version decompresses at most 4 MiB (~2 ms).
FRAME_BYTES = 4 << 20
LEVEL = 1
_PENDING = 2  # frames waiting for the writer's worker
_AHEAD = 2  # frames a reader's worker decompresses ahead


class FrameWriter:
    """Lines written to `path` in the seekable format: a frame whenever FRAME_BYTES of whole lines are buffered,
    the last frame and the seek table at `close`. The same lines give the same bytes (frames cut by content).

    Frames are compressed and written by one worker thread, in order: zstd releases the GIL while it compresses,
    so on a second core the simulation does not wait for it; at most _PENDING frames wait, so memory stays bounded
    when the worker falls behind."""

    def __init__(self, path: Path, frame_bytes: int | None = None) -> None:
        self.path = path
        self.size = 0  # decompressed bytes in the frames handed to the worker
        self._frame_bytes = FRAME_BYTES if frame_bytes is None else frame_bytes
        self._buffer = bytearray()  # the frame being filled (compressed from the buffer itself, no copy)
        self._entries: list[bytes] = []
        self._compressor = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)
        self._file: IO[bytes] = path.open("wb")
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="zstd")
        self._pending: deque[Future[None]] = deque()

    def write(self, line: bytes) -> None:
        """One line, newline included."""
        buffer = self._buffer
        buffer += line
        if len(buffer) >= self._frame_bytes:
            self._flush()

    def write_lines(self, data: bytes) -> None:
        """Whole lines at once (data ends with a newline), cut into frames where writing them one by one would."""
        pos = 0
        while pos < len(data):
            # writing line by line, the frame ends with the line that brings the buffer to frame_bytes: the first
            # line end at or after the byte that fills the buffer
            end = data.find(b"\n", pos + max(self._frame_bytes - len(self._buffer), 1) - 1)
            stop = len(data) if end < 0 else end + 1
            self._buffer += data[pos:stop]
            pos = stop
            if len(self._buffer) >= self._frame_bytes:
                self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        self.size += len(self._buffer)
        if len(self._pending) >= _PENDING:
            self._pending.popleft().result()
        self._pending.append(self._worker.submit(self._compress, self._buffer))
        self._buffer = bytearray()

    def _compress(self, data: bytearray) -> None:
        """The worker's part: one frame compressed, written and entered in the seek table."""
        frame = self._compressor.compress(data)
        self._file.write(frame)
        self._entries.append(_ENTRY.pack(len(frame), len(data)))

    def suspend(self) -> None:
        """Before a fork (report.historyworker): every frame handed over written and flushed, and the worker thread
        ended, so the process holds no thread and no unwritten bytes but the frame being filled."""
        self._worker.shutdown()
        while self._pending:
            self._pending.popleft().result()
        self._file.flush()

    def resume(self) -> None:
        """After `suspend`, in the process that goes on writing: a worker thread again."""
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="zstd")

    def abandon(self) -> None:
        """After `suspend`, in the process that stops writing: its copy of the file closed, nothing written."""
        self._file.close()

    def close(self) -> None:
        """The last frame and the seek table; the file is closed."""
        if self._file.closed:
            return
        self._flush()
        self._worker.shutdown()
        while self._pending:
            self._pending.popleft().result()  # a worker's error surfaces here
        table = b"".join(self._entries) + _FOOTER.pack(len(self._entries), 0, _SEEKABLE_MAGIC)
        self._file.write(struct.pack("<II", _SKIPPABLE_MAGIC, len(table)) + table)
        self._file.close()


class SeekableFile:
    """A seekable-format file read by decompressed offset. A zstd file without a seek table (recompressed by hand)
    still reads whole (`lines()`); `seekable` is then False and `size` None."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] = path.open("rb")
        self._decompressor = zstandard.ZstdDecompressor()
        self._starts: list[int] = []  # decompressed offset of each frame's first byte
        self._cstarts: list[int] = []  # its offset in the file
        self._csizes: list[int] = []
        self.size: int | None = None
        self._cached: tuple[int, bytes] | None = None
        self._read_table()

    @property
    def seekable(self) -> bool:
        return self.size is not None

    @property
    def frames(self) -> int:
        """Frames the seek table lists (0 without one)."""
        return len(self._starts)

    def _read_table(self) -> None:
        end = self._file.seek(0, 2)
        if end < _FOOTER.size + 8:
            return
        self._file.seek(end - _FOOTER.size)
        frames, descriptor, magic = _FOOTER.unpack(self._file.read(_FOOTER.size))
        entry = _ENTRY.size + (4 if descriptor & 0x80 else 0)  # the checksum flag adds a checksum per entry
        table = frames * entry + _FOOTER.size
        if magic != _SEEKABLE_MAGIC or table + 8 > end:
            return
        self._file.seek(end - table - 8)
        head, body = self._file.read(8), self._file.read(frames * entry)
        if struct.unpack("<II", head) != (_SKIPPABLE_MAGIC, table):
            return
        cpos = dpos = 0
        for i in range(frames):
            csize, dsize = _ENTRY.unpack_from(body, i * entry)
            self._starts.append(dpos)
            self._cstarts.append(cpos)
            self._csizes.append(csize)
            cpos += csize
            dpos += dsize
        self.size = dpos

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SeekableFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def frame(self, i: int) -> bytes:
        """Frame i, decompressed (the last one read is kept)."""
        if self._cached is not None and self._cached[0] == i:
            return self._cached[1]
        self._file.seek(self._cstarts[i])
        data = self._decompressor.decompress(self._file.read(self._csizes[i]))
        self._cached = (i, data)
        return data

    def pread(self, n: int, offset: int) -> bytes:
        """Up to n decompressed bytes from `offset` (fewer at the end), as os.pread reads a plain file."""
        if self.size is None:
            raise ValueError(f"{self.path}: no seek table (not written by kubetwin); read it whole")
        parts: list[bytes] = []
        i = bisect.bisect_right(self._starts, offset) - 1
        while n > 0 and 0 <= i < len(self._starts):
            data = self.frame(i)
            part = data[offset - self._starts[i]:offset - self._starts[i] + n]
            parts.append(part)
            n -= len(part)
            offset += len(part)
            i += 1
        return b"".join(parts)

    def lines_at(self, offsets: list[int]) -> Iterator[tuple[int, bytes]]:
        """(offset, line) for each of the sorted `offsets` (line starts; past the end: none): each frame that holds
        one is decompressed once and the lines sliced from it (no block copied). The next frames are decompressed
        on a worker thread while this one's lines are read (zstd releases the GIL): `get events` at a 1,000,000-pod
        day's noon decompresses ~150 frames."""
        if self.size is None:
            raise ValueError(f"{self.path}: no seek table (not written by kubetwin); read it whole")
        groups = []  # (frame, first, end): offsets[first:end] start in that frame
        i, n = 0, len(offsets)
        while i < n and offsets[i] < self.size:
            f = bisect.bisect_right(self._starts, offsets[i]) - 1
            end = bisect.bisect_left(offsets, self._starts[f + 1] if f + 1 < len(self._starts) else self.size, i)
            groups.append((f, i, end))
            i = end
        if not groups:
            return
        fd, worker = self._file.fileno(), zstandard.ZstdDecompressor()  # the worker's own decompressor

        def decompress(f: int) -> bytes:
            data: bytes = worker.decompress(os.pread(fd, self._csizes[f], self._cstarts[f]))
            return data

        with ThreadPoolExecutor(1, thread_name_prefix="zstd") as pool:
            ahead = deque(pool.submit(decompress, f) for f, _, _ in groups[:_AHEAD])
            for k, (f, first, end) in enumerate(groups):
                data, start = ahead.popleft().result(), self._starts[f]
                if k + _AHEAD < len(groups):
                    ahead.append(pool.submit(decompress, groups[k + _AHEAD][0]))
                stop = start + len(data)
                for off in offsets[first:end]:
                    at = off - start
                    cut = data.find(b"\n", at)
                    yield off, data[at:cut + 1] if cut >= 0 else data[at:] + self._rest_of_line(stop)

    def _rest_of_line(self, offset: int) -> bytes:
        """From `offset` to the next newline (included): a line that runs on into the next frames."""
        parts = []
        while chunk := self.pread(1 << 16, offset):
            cut = chunk.find(b"\n")
            if cut >= 0:
                parts.append(chunk[:cut + 1])
                break
            parts.append(chunk)
            offset += len(chunk)
        return b"".join(parts)

    def lines(self, offset: int = 0) -> Iterator[bytes]:
        """The lines from decompressed `offset` (a line's start) to the end, newlines kept."""
        carry = b""
        for data in self._chunks(offset):
            if carry:
                data = carry + data
            lines = data.splitlines(keepends=True)
            carry = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""
            yield from lines
        if carry:
            yield carry

    def _chunks(self, offset: int) -> Iterator[bytes]:
        if self.size is None:  # no seek table: stream every frame (offset 0 only)
            if offset:
                raise ValueError(f"{self.path}: no seek table (not written by kubetwin); read it whole")
            self._file.seek(0)
            reader = self._decompressor.stream_reader(self._file, read_across_frames=True, closefd=False)
            while chunk := reader.read(FRAME_BYTES):
                yield chunk
            return
        i = bisect.bisect_right(self._starts, offset) - 1
        for j in range(max(i, 0), len(self._starts)):
            data = self.frame(j)
            yield data[offset - self._starts[j]:] if j == i else data
