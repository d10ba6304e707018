"""Starting the GPU worker as a plain Python subprocess running only the worker module, not through
multiprocessing.

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
from multiprocessing import Pipe
from multiprocessing.connection import Connection

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
