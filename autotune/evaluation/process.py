"""Starting the GPU worker as ``python -m autotune.evaluation.worker``, not through multiprocessing.

multiprocessing's spawn start method re-imports the caller's main module in the child: a script that calls
``autotune.tune(...)`` at its top level, without ``if __name__ == "__main__":``, would run again there and fail.
A plain subprocess runs only the worker module. The parent and the worker talk over one end each of a socket
pair, wrapped as multiprocessing connections (the same pickled-tuple protocol, `poll` with a timeout).
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path

import autotune

# The directory that holds the autotune package: the worker imports the same autotune as its parent, even where
# the caller put it on sys.path by hand.
_PACKAGE_ROOT = str(Path(autotune.__file__).resolve().parent.parent)


def start_worker(device_ordinal: int) -> tuple[subprocess.Popen, Connection]:
    """Start a worker process for the GPU ``device_ordinal``; returns it and the parent's connection."""
    parent, child = Pipe(duplex=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    command = [sys.executable or "python3", "-m", "autotune.evaluation.worker",
               "--fd", str(child.fileno()), "--device", str(device_ordinal)]  # fmt: skip
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
