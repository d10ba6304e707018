"""Starting the GPU worker as a plain Python subprocess running only the worker module, not through
multiprocessing; `WorkerProcess`, the parent's end of one worker.

multiprocessing's spawn start method re-imports the caller's main module in the child: a script that calls
``autotune.tune(...)`` at its top level, without ``if __name__ == "__main__":``, would run again there and fail.
A plain subprocess runs only the worker module. The parent and the worker talk over one end each of a socket
pair, wrapped as multiprocessing connections (the same pickled-tuple protocol, `poll` with a timeout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from autotune.device import DeviceInfo
from autotune.errors import DeviceError
from autotune.tuning.evaluation.base import Measurement

if TYPE_CHECKING:
    from autotune.tuning.evaluation.gpu_session import Setup

START_TIMEOUT_S = 600.0  # worker start-up includes the fp64 reference of the target shape

# The worker imports with the parent's sys.path, as multiprocessing's spawn does (spaces named by an import
# reference, e.g. a test's "faults.space:FaultyGemmSpace", must resolve the same way), set before autotune is
# imported: the worker uses the same autotune as its parent, even one put on sys.path by hand.
_BOOT = (
    "import json, os, sys; sys.path[:] = json.loads(os.environ['AUTOTUNE_WORKER_SYS_PATH']); "
    "from autotune.tuning.evaluation.worker import _entry; _entry(sys.argv[1:])"
)


def start_worker(device_ordinal: int) -> tuple[subprocess.Popen, Connection]:
    """Start a worker process for the GPU ``device_ordinal``; returns it and the parent's connection."""
    parent, child = Pipe(duplex=True)
    env = dict(os.environ, AUTOTUNE_WORKER_SYS_PATH=json.dumps([p or os.getcwd() for p in sys.path]))
    command = [sys.executable or "python3", "-c", _BOOT, "--fd", str(child.fileno()), "--device", str(device_ordinal)]
    try:
        proc = subprocess.Popen(command, pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL)
    finally:
        child.close()
    return proc, parent


def stop_worker(proc: subprocess.Popen, wait_s: float = 10.0) -> int | None:
    """Wait for a worker that was told to stop (or whose connection closed), killing it if it lingers."""
    try:
        return proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            return proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            return None


class WorkerProcess:
    """The parent's end of one GPU worker: started, set up, asked, restarted after a crash or a hang, stopped.

    The protocol is the worker module's (`autotune.tuning.evaluation.worker`). A request never raises for a
    candidate: a worker that hangs is killed, one that dies is reaped, and the request answers a failed
    `Measurement` instead of a reply; the next request starts a new worker (``restarts`` counts them)."""

    def __init__(self, device_ordinal: int) -> None:
        self.device_ordinal = device_ordinal
        self.restarts = 0
        self.answered = 0  # requests answered by the current worker process (0: a fresh one)
        self._proc: Any = None
        self._conn: Any = None
        self._setup: Setup | None = None

    def spawn(self) -> DeviceInfo:
        """Start the worker; it tells which GPU it has (only then is the architecture to compile for known)."""
        self._proc, self._conn = start_worker(self.device_ordinal)
        msg = self._receive(START_TIMEOUT_S, "start")
        if msg[0] != "device":
            self.kill()
            raise DeviceError(msg[1] if msg[0] == "fatal" else f"GPU worker did not start: {msg!r}")
        return DeviceInfo.from_dict(msg[1])

    def configure(self, setup: Setup) -> None:
        """Send the setup (again to every restarted worker) and wait until the worker is ready."""
        self._setup = setup
        self.answered = 0  # the first request after a set-up draws its validation data again
        self._conn.send(("setup", asdict(setup)))
        msg = self._receive(START_TIMEOUT_S, "set up")
        if msg[0] != "ready":
            self.kill()
            raise DeviceError(msg[1] if msg[0] == "fatal" else f"GPU worker setup failed: {msg!r}")

    def _receive(self, timeout: float, what: str) -> tuple:
        if not self._conn.poll(timeout):
            self.kill()
            raise DeviceError(f"GPU worker did not {what} within {timeout:.0f} s")
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            code = self._reap()
            hint = ": killed, most likely for host memory (the set-up holds the shape's inputs and references)" \
                if code == -9 else ""  # fmt: skip
            raise DeviceError(f"GPU worker exited during {what} (exit code {code}){hint}") from None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _ensure(self) -> None:
        if self.alive():
            return
        if self._proc is not None:
            self._reap()
        self.spawn()
        assert self._setup is not None
        self.configure(self._setup)

    def _reap(self) -> int | None:
        self.answered = 0
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is None:
            return None
        return stop_worker(proc)

    def kill(self) -> None:
        if self.alive():
            self._proc.kill()
        self._reap()

    def request(self, kind: str, payload: dict, timeout: float) -> tuple[str, Any, bool] | Measurement:
        """Send one request; a Measurement comes back instead of a reply when the worker hung or died."""
        self._ensure()
        self._conn.send((kind, payload))
        if not self._conn.poll(timeout):
            self.kill()
            self.restarts += 1
            return Measurement.failed(
                "timeout", f"no answer within {timeout:.1f} s (hang?); worker restarted", worker_restarted=True
            )
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            code = self._reap()
            self.restarts += 1
            return Measurement.failed("crash", f"GPU worker died (exit code {code}); restarted", worker_restarted=True)
        if reply[2]:  # sticky: the worker exits after this answer
            self._reap()
            self.restarts += 1
        else:
            self.answered += 1
        return reply

    def stop(self) -> None:
        """Tell a live worker to stop, and wait for it (killing it if it lingers)."""
        if self.alive() and self._conn is not None:
            try:
                self._conn.send(("stop", None))
            except OSError:
                pass
        self._reap()
