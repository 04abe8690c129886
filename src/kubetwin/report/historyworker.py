"""A run's history files written by a second process, so the clock does not wait for them (issue 32).

Writing a version is more than encoding it: history.jsonl (compressed past a size), events.jsonl, history.index's
offsets and snapshots, and the report's feed (the timeline and the panels' series) all take their share of every
store write -- 0.45 s of a 10,000-pod run's 2.65 s (measured: a run that only encodes its lines and sends them
down a pipe took 2.19 s). With a second core the run forks this worker when its history log opens; the run then
only encodes each line (orjson) and writes it down a pipe, and the worker parses it back and does the rest, report
included. The worker is a fork: it starts with the run's own modules and settings (no interpreter to start, nothing
to import), and builds the files from the same lines with the same code, so the files are byte for byte the ones
the run would have written itself (tests/test_history_worker.py).

The pipe carries history lines (each a JSON object, so never a NUL byte: orjson and the standard library escape
control characters) and commands, a NUL byte then a word: `close` (finish the files), `report` and the JSON of
[folder, name] (write report.html). The worker answers each command on a second pipe: a length-prefixed pickle,
None or the exception it raised (re-raised in the run, its traceback attached). When the pipe ends (the run is done
with it, or gone) the worker exits at once, writing nothing more. It ignores SIGINT, which the terminal sends to
both processes: the run decides what a Ctrl-C stops.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import struct
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from typing import IO, Any

__all__ = ["HistoryWorker", "available"]

_LENGTH = struct.Struct("<I")
_READ = 1 << 20  # bytes read from the pipe at a time
_BUFFER = 1 << 20  # bytes the run buffers before a write to the pipe
_PIPE_BYTES = 1 << 20  # the pipe's capacity, where Linux allows it (F_SETPIPE_SZ; the default is 64 KiB)
_F_SETPIPE_SZ = 1031  # linux/fcntl.h (F_LINUX_SPECIFIC_BASE + 7)
DISABLE_ENV = "KUBETWIN_HISTORY_WORKER"  # "0": write the history in the run's own process


def available() -> bool:
    """Whether a run may fork a worker: Linux (elsewhere the platform's own libraries may not survive a fork), more
    than one core to run it on, not turned off, from the main thread, and not in a process that has loaded gRPC
    (a Ray worker's, or the live tools'): gRPC does not support a fork while its threads run
    (grpc/grpc doc/fork_support.md), and a worker is not worth that risk."""
    if os.environ.get(DISABLE_ENV) == "0" or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if threading.current_thread() is not threading.main_thread() or "grpc" in sys.modules:
        return False
    return len(os.sched_getaffinity(0)) > 1


class HistoryWorker:
    """The run's end of the worker: `write(line)` for each history line; `request(command)` waits for the answer.

    `serve(item)` runs in the worker: it is called with each chunk of whole lines and each command (a str) and
    returns when the command is handled; what it raises goes back to the run. `start` runs first in the worker,
    `warm` in a thread of the worker beside it."""

    def __init__(self, serve: Callable[[bytes | str], None], start: Callable[[], None] | None = None,
                 warm: Callable[[], None] | None = None) -> None:
        lines_r, lines_w = os.pipe()
        answers_r, answers_w = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(lines_w, _F_SETPIPE_SZ, _PIPE_BYTES)
        except OSError:  # a lower limit (/proc/sys/fs/pipe-max-size): the default size works, only slower
            pass
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():  # Python 3.12+ warns of forking with threads: the worker uses none of theirs
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(lines_w)
                os.close(answers_r)
                code = _serve(lines_r, answers_w, serve, start, warm)
            finally:
                os._exit(code)  # never back into the caller's stack (nor its atexit handlers, nor its buffers)
        os.close(lines_r)
        os.close(answers_w)
        self.pid: int | None = pid
        self._lines: IO[bytes] = os.fdopen(lines_w, "wb", buffering=_BUFFER)
        self._answers: IO[bytes] = os.fdopen(answers_r, "rb")
        self.write = self._lines.write  # one history line, newline included (the buffered file's own method)

    def request(self, command: str) -> None:
        """Send a command after the lines written so far; wait for the worker's answer; raise what it raised."""
        try:
            self._lines.write(b"\0" + command.encode() + b"\n")
            self._lines.flush()
        except BrokenPipeError:
            pass  # gone: the answer below says why
        head = self._answers.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            self.stop()
            raise RuntimeError(f"the history worker ended before answering {command.split()[0]!r}")
        answer = pickle.loads(self._answers.read(_LENGTH.unpack(head)[0]))
        if answer is not None:
            exc, text = answer
            self.stop()
            if isinstance(exc, BaseException):
                exc.add_note(f"in the history worker:\n{text}")
                raise exc
            raise RuntimeError(f"the history worker failed:\n{text}")

    def stop(self) -> None:
        """End the worker (idempotent): the pipe closes, it exits writing nothing more; the run waits for it."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        for f in (self._lines, self._answers):
            try:
                f.close()
            except OSError:  # BrokenPipeError flushing lines the worker no longer reads
                pass
        os.waitpid(pid, 0)


def _answer(fd: int, value: Any) -> None:
    data = pickle.dumps(value)
    os.write(fd, _LENGTH.pack(len(data)) + data)


def _serve(lines: int, answers: int, serve: Callable[[bytes | str], None], start: Callable[[], None] | None,
           warm: Callable[[], None] | None) -> int:
    """The worker's loop: whole lines to `serve`, commands to `serve` and answered; 0 when the pipe ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The run's other threads (a terminal's progress bar) may have held stdout's or stderr's lock at the fork: the
    # worker writes neither (what goes wrong goes back to the run), so a warning it prints cannot wait on them.
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the worker ends with os._exit)
    gc.freeze()  # the run's objects, inherited: never scanned (a scan would copy every page it touches)
    gc.disable()  # what the worker makes is parsed JSON: no cycles to collect
    failed: tuple[BaseException | None, str] | None = None
    if start is not None:
        try:
            start()
        except BaseException as exc:
            failed = _failure(exc)
    if warm is not None:  # imports the worker needs only at the end (report.html's plotly), made while it waits
        threading.Thread(target=warm, daemon=True).start()
    carry = b""
    while True:
        chunk = os.read(lines, _READ)
        if not chunk:
            return 0  # the run is done with it (or gone)
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        data, carry = data[:cut], data[cut:]
        while data:
            nul = data.find(b"\0")
            block, data = (data, b"") if nul < 0 else (data[:nul], data[nul:])
            if block and failed is None:
                try:
                    serve(block)
                except BaseException as exc:  # told to the run at its next command
                    failed = _failure(exc)
            if not data:
                break
            end = data.index(b"\n") + 1
            command, data = data[1:end - 1].decode(), data[end:]
            if failed is None:
                try:
                    serve(command)
                except BaseException as exc:
                    failed = _failure(exc)
            _answer(answers, failed)


def _failure(exc: BaseException) -> tuple[BaseException | None, str]:
    """What goes back to the run: the exception if it pickles, and its traceback as text."""
    text = "".join(traceback.format_exception(exc))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return None, text
    return exc, text
