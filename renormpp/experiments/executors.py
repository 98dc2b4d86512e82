"""Where the points of a sweep run: in this process, in a local process pool, or on a Ray cluster.

Each executor maps a picklable function over jobs and yields ``(job, result, error)`` as points finish;
no scheduling is done here. Points only share the output folder, so on a cluster it must be a shared file
system, and every node needs renormpp installed (``pip install 'renormpp[ray]'``).
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from .signals import STOP, Interrupted


class InProcess:
    """One point after the other in this process (the default)."""

    def map(self, fn, jobs):
        for job in jobs:
            try:
                yield job, fn(job), None
            except Exception as err:  # noqa: BLE001 - reported per point by the runner
                yield job, None, err


class ProcessPool:
    """A local pool of ``workers`` processes (spawned: JAX does not survive fork)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers

    def map(self, fn, jobs):
        jobs = list(jobs)
        workers = self.workers or max(1, min(len(jobs), os.cpu_count() or 1))
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        try:
            pending = {pool.submit(fn, job): job for job in jobs}
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    job = pending.pop(fut)
                    err = fut.exception()
                    yield job, (None if err else fut.result()), err
        except BaseException:
            # on SIGTERM/Ctrl-C in the driver, pass SIGTERM on: workers save their progress and stop
            for proc in list(getattr(pool, "_processes", {}).values()):
                if proc.is_alive():
                    os.kill(proc.pid, signal.SIGTERM)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


class Ray:
    """Ray tasks, one per point, on the cluster at ``address`` (or a local Ray started here)."""

    def __init__(self, address: str | None = None, cpus_per_point: float = 1.0):
        try:
            import ray
        except ImportError:
            raise ImportError("the ray executor needs Ray: pip install 'renormpp[ray]'") from None
        self.ray = ray
        self.address = address
        self.cpus_per_point = cpus_per_point

    def map(self, fn, jobs):
        ray = self.ray
        started = not ray.is_initialized()
        if started:
            with warnings.catch_warnings():  # Ray starts its processes by fork + exec, which is safe with JAX
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
                ray.init(address=self.address, include_dashboard=False, log_to_driver=True, configure_logging=False)
        remote = ray.remote(num_cpus=self.cpus_per_point, max_retries=0)(fn)
        pending = {remote.remote(job): job for job in jobs}
        try:
            while pending:
                finished, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                if STOP.is_set():  # SIGTERM in the driver: the tasks save their progress and stop
                    raise Interrupted("stopped by SIGTERM")
                for ref in finished:
                    job = pending.pop(ref)
                    try:
                        yield job, ray.get(ref), None
                    except Exception as err:  # noqa: BLE001
                        yield job, None, getattr(err, "cause", None) or err
        except BaseException:
            for ref in pending:
                ray.cancel(ref)  # KeyboardInterrupt in the task: it saves its last finished block
            ray.wait(list(pending), num_returns=len(pending), timeout=60.0)
            raise
        finally:
            if started:
                ray.shutdown()


def get(name: str, *, workers: int | None = None, address: str | None = None):
    """The executor called ``name`` ("inprocess", "process" or "ray")."""
    if name == "inprocess":
        return InProcess()
    if name == "process":
        return ProcessPool(workers)
    if name == "ray":
        return Ray(address)
    raise ValueError(f"unknown executor {name!r}; choose one of 'inprocess', 'process', 'ray'")
