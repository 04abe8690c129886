"""Where the cases run: this process, a local process pool (the default), or Ray tasks.

Every backend calls worker.run_task on the same Task, so a case gives the same row whichever ran it. Ray is an
optional extra (`pip install kubetwin[ray]`): with no address the command starts a local Ray bound to loopback
(ray.init(address="local", _node_ip_address="127.0.0.1"), no dashboard) and stops it at the end; with an address
it joins that cluster and ships the scenario's folder as the tasks' working_dir (runtime_env, as Ray's docs
describe: https://docs.ray.io/en/latest/ray-core/handling-dependencies.html#api-reference).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from kubetwin.api.errors import Diagnostic, KubetwinError
from kubetwin.live.lifetime import die_with_parent
from kubetwin.sweep.worker import Task, failed, run_task

Row = dict[str, Any]


def in_process(tasks: Iterable[Task]) -> Iterator[tuple[Task, Row]]:
    for t in tasks:
        yield t, run_task(t)


def pool(tasks: Iterable[Task], jobs: int) -> Iterator[tuple[Task, Row]]:
    """A process pool of `jobs` workers (spawned: no state, threads or locks inherited from the driver). Each worker
    dies with the driver (die_with_parent: a `kill -9` of `kubetwin sweep` leaves no worker behind, and with the
    workers gone multiprocessing's resource tracker reads end-of-file on its pipe and exits too)."""
    todo = list(tasks)
    if not todo:
        return
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo))),
                             mp_context=multiprocessing.get_context("spawn"),
                             initializer=die_with_parent, initargs=(os.getpid(),)) as ex:
        futures: dict[Future[Row], Task] = {ex.submit(run_task, t): t for t in todo}
        while futures:
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for f in done:
                t = futures.pop(f)
                try:
                    yield t, f.result()
                except Exception as exc:  # the worker process died (out of memory, killed)
                    yield t, failed(t, f"worker failed: {type(exc).__name__}: {exc}")


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except Exception:  # not installed, or an import that breaks (see pyproject's ray extra)
        return False
    return True


def ray(tasks: Iterable[Task], jobs: int, address: str | None, base_dir: str) -> Iterator[tuple[Task, Row]]:
    """One Ray task per case (max_retries=0: a failing case is reported, not retried)."""
    todo = list(tasks)
    if not todo:
        return
    try:
        import ray as ray_mod
    except Exception as exc:
        raise KubetwinError([Diagnostic("", 0, "-", "--ray", f"Ray is not importable: {exc}",
                                        "pip install 'kubetwin[ray]'")]) from None
    started = False
    if not ray_mod.is_initialized():
        if address:
            try:
                ray_mod.init(address=address, runtime_env={"working_dir": base_dir}, log_to_driver=False)
            except Exception as exc:  # ConnectionError, a refused runtime_env upload
                raise KubetwinError([Diagnostic("", 0, "-", "--ray", f"cannot join the Ray cluster at {address}: "
                                                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                                                "give the head's address (HOST:6379 or ray://HOST:10001), or "
                                                "--ray alone for a local Ray")]) from None
        else:
            ray_mod.init(address="local", num_cpus=jobs, include_dashboard=False, _node_ip_address="127.0.0.1",
                         log_to_driver=False, configure_logging=False)
        started = True
    try:
        remote = ray_mod.remote(num_cpus=1, max_retries=0)(run_task)
        refs = {remote.remote(t): t for t in todo}
        while refs:
            done, _ = ray_mod.wait(list(refs), num_returns=1)
            for r in done:
                t = refs.pop(r)
                try:
                    yield t, ray_mod.get(r)
                except Exception as exc:  # the worker died (RayTaskError, WorkerCrashedError)
                    yield t, failed(t, f"ray task failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        if started:
            ray_mod.shutdown()


def runner(backend: str, jobs: int, address: str | None, base_dir: str
           ) -> Callable[[Iterable[Task]], Iterator[tuple[Task, Row]]]:
    """The backend by name: "process" (jobs 1 runs in this process), "ray"."""
    if backend == "ray":
        return lambda tasks: ray(tasks, jobs, address, base_dir)
    if jobs <= 1:
        return in_process
    return lambda tasks: pool(tasks, jobs)


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
