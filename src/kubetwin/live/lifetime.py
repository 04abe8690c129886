"""Child processes that die with their parent, and ports that must be free before a server starts (issue 34).

A `kill -9` gives a parent no chance to stop its children: Envoy, a supervisor's replicas or a sweep's pool workers
would live on, re-parented to init, still holding their ports. On Linux the kernel can signal a child when its
parent dies: prctl(PR_SET_PDEATHSIG, SIGKILL) (man 2 prctl; PR_SET_PDEATHSIG = 1 in linux/prctl.h). The setting
survives execve (but for set-user-ID programs) and is tied to the thread that forked the child, so the thread that
starts a child must outlive it (the gateway's event loop thread, the supervisor's loop, the sweep's main thread).
The race the man page warns about: the parent may die between fork and prctl; the child then checks that its parent
is still the one that started it and kills itself if not. Elsewhere (macOS) the calls are no-ops."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


_PRCTL = _load_prctl()  # loaded here, in the parent: the child between fork and exec only calls it


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """In a child: have the kernel send `sig` when the parent dies, and send it now if the parent (pid `parent`) has
    already died (the child was re-parented before prctl ran)."""
    if _PRCTL is None:
        return
    _PRCTL(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def preexec_die_with_parent() -> Callable[[], None]:
    """A subprocess `preexec_fn` that makes the child die with this process (the pid is taken here, before fork)."""
    parent = os.getpid()
    return lambda: die_with_parent(parent)


# The same steps as a tiny launcher that then execs the real program (same pid): for a parent whose other threads
# are inside C libraries (gRPC's), where a preexec_fn would force fork() with their atfork handlers (gRPC logs
# "Other threads are currently calling into gRPC, skipping fork() handlers") instead of CPython's vfork.
_LAUNCH = ("import ctypes, os, sys\n"
           "parent = int(sys.argv[1])\n"
           f"ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}, 0, 0, 0)\n"
           "if os.getppid() != parent:\n"
           f"    os.kill(os.getpid(), {int(signal.SIGKILL)})\n"
           "os.execvp(sys.argv[2], sys.argv[2:])\n")


def dying_with_parent(argv: list[str]) -> list[str]:
    """`argv` wrapped so that the program dies with this process: an isolated `python -I -S -c` that sets
    PR_SET_PDEATHSIG, checks the race, and execs `argv` (about 20 ms more at start). Unchanged off Linux."""
    if _PRCTL is None:
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _LAUNCH, str(os.getpid()), *argv]


class PortInUse(RuntimeError):
    """A port the server must listen on is already held (by another process, or an orphan of an earlier run)."""


def _listener_inodes(port: int) -> set[str]:
    """The socket inodes listening on TCP `port` (/proc/net/tcp and tcp6: state 0A is LISTEN)."""
    out: set[str] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                out.add(f[9])
    return out


def port_holder(port: int) -> str:
    """Who listens on TCP `port`, as 'pid N (name)', when /proc tells (Linux, a process this user may inspect);
    else ''. Cheap: one pass over /proc/*/fd."""
    inodes = {f"socket:[{i}]" for i in _listener_inodes(port)}
    if not inodes:
        return ""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    name = (proc / "comm").read_text().strip()
                    return f"pid {proc.name} ({name})"
        except OSError:
            continue
    return ""


def check_free(what: str, host: str, port: int) -> None:
    """Raise PortInUse, naming `what`, the address and its holder, when `host:port` cannot be bound. The probe sets
    SO_REUSEADDR (as servers do, so a port in TIME_WAIT counts as free) but not SO_REUSEPORT, so a listener that
    set SO_REUSEPORT (Envoy's default on Linux, listener.proto enable_reuse_port) still counts as holding it.
    Port 0 (any free port) is always free."""
    if not port:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            who = port_holder(port)
            raise PortInUse(f"{what} {host}:{port} is already in use" + (f" by {who}" if who else "")
                            + f" ({exc.strerror or exc})") from None
