"""The GPU worker process: owns the CUDA context, validates and times the candidates it is sent.

It runs in its own process so that a candidate that faults (the context is then unusable) or hangs takes down
only the worker; the parent (`GpuEvaluator`) records the failure and starts a new one. What a measurement is:
`autotune.tuning.evaluation.gpu_session`.

Protocol over a multiprocessing connection, pickled tuples:

    worker → parent   ("device", DeviceInfo dict)          once started
    parent → worker   ("setup", Setup dict)
    worker → parent   ("ready", None) | ("fatal", one-line message)
    parent → worker   ("evaluate", {"config", "cubin", "race_ms"}) → ("result", Measurement dict, sticky)
                      ("retime", {"items": [(config, cubin)], "rounds"}) → ("retimed", [samples | None], sticky)
                      ("setup", Setup dict) → ("ready", None) | ("fatal", …): the next problem, same process
                      ("stop", None)

A later "setup" replaces the session (the primary context is kept): the next shape of one command (a range's
buckets, `GpuEvaluator.release_worker`) reuses the process instead of starting one.

``sticky`` means the context is broken (illegal address, …): the worker exits after answering.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autotune.errors import DeviceError
from autotune.tuning.evaluation.base import Measurement
from autotune.tuning.evaluation.gpu_session import GpuSession, Setup
from autotune.tuning.evaluation.output_check import CandidateFailed

# Substrings of CUDA error messages after which the context cannot be used again.
_STICKY = (
    "illegal",
    "misaligned",
    "unspecified launch failure",
    "exception",
    "hardware stack error",
    "trap",
    "assert",
    "launch timed out",
    "context is destroyed",
    "not permitted",
)
_LAUNCH = ("too many resources", "out of resources", "invalid argument", "invalid value", "no binary",
           "invalid image", "invalid ptx", "unsupported", "shared object", "not found")  # fmt: skip


def classify_cuda_error(message: str) -> tuple[str, bool]:
    """(failure kind, sticky) for a CUDA error message."""
    m = message.lower()
    if any(s in m for s in _STICKY):
        return "crash", True
    if any(s in m for s in _LAUNCH):
        return "launch", False
    return "crash", True  # unknown: assume the worst, the parent restarts the worker


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main(conn: Any, device_ordinal: int = 0) -> None:
    """Entry point of the worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        from autotune.device import query_device

        info = query_device(device_ordinal)
        import pycuda.driver  # noqa: F401  (the worker measures through pycuda)
    except ImportError as exc:
        conn.send(("fatal", f"pycuda is not installed ({exc}); on a GPU machine: pip install 'autotune[cuda]'"))
        return
    except Exception as exc:
        conn.send(("fatal", str(exc)))
        return
    conn.send(("device", info.to_dict()))
    try:
        kind, payload = conn.recv()
    except EOFError:
        return
    if kind != "setup":
        return
    session = _set_up(conn, payload, info, device_ordinal)
    if session is not None:
        _serve(conn, session, info, device_ordinal)


def _set_up(conn: Any, payload: dict, info: Any, device_ordinal: int) -> GpuSession | None:
    """A session for the setup, answered "ready"; None (answered "fatal", the context stack left empty) if it fails."""
    try:
        session = GpuSession(Setup(**payload), info, device_ordinal)
    except Exception as exc:
        conn.send(("fatal", f"GPU worker setup failed: {_one_line(exc)}"))
        try:
            import pycuda.driver as cuda

            while cuda.Context.get_current() is not None:
                cuda.Context.pop()
        except Exception:
            pass
        return None
    conn.send(("ready", None))
    return session


def _serve(conn: Any, session: GpuSession, info: Any, device_ordinal: int) -> None:
    """Answer requests until "stop", a closed connection or a sticky error; the session is closed on the way out."""
    current: GpuSession | None = session
    try:
        while current is not None:
            try:
                kind, payload = conn.recv()
            except EOFError:
                return
            if kind == "stop":
                return
            if kind == "setup":  # the next problem: a new session in this process, once the old one is freed
                current.close()
                current = None
                gc.collect()  # pycuda frees device memory when its allocations are collected
                current = _set_up(conn, payload, info, device_ordinal)
            elif _answer(conn, current, kind, payload):
                return
    finally:
        if current is not None:
            current.close()


def _answer(conn: Any, session: GpuSession, kind: str, payload: Any) -> bool:
    """Answer one request; True where the context broke (sticky: the worker exits after answering)."""
    cuda = session.cuda
    sticky = False
    try:
        if kind == "evaluate":
            answer: Any = asdict(session.evaluate(payload["config"], payload["cubin"], payload.get("race_ms")))
        elif kind == "retime":
            answer = session.retime(payload["items"], payload["rounds"])
        else:
            raise ValueError(f"unknown request {kind!r}")
    except CandidateFailed as failure:
        answer = asdict(Measurement.failed(failure.kind, failure.reason))
    except (cuda.Error, DeviceError) as exc:
        failure_kind, sticky = classify_cuda_error(str(exc))
        if not sticky and not session.healthy():
            failure_kind, sticky = "crash", True
        answer = asdict(Measurement.failed(failure_kind, _one_line(exc)))
    except Exception as exc:  # a bug in autotune or in a space: report it, and start afresh
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(tb.filename).name}:{tb.lineno}"
        answer = asdict(Measurement.failed("worker", f"{_one_line(exc)} at {where}"))
        sticky = not session.healthy()
    reply = "retimed" if kind == "retime" and isinstance(answer, list) else "result"
    conn.send((reply, answer, sticky))
    return sticky


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone (killed): a worker stuck in a hung kernel would otherwise stay behind."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def _entry(argv: list[str]) -> None:
    """``python -m autotune.tuning.evaluation.worker --fd N --device D`` (see autotune.tuning.evaluation.process)."""
    import argparse
    import threading
    from multiprocessing.connection import Connection

    parser = argparse.ArgumentParser(prog="autotune.tuning.evaluation.worker")
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair to the parent")
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal")
    args = parser.parse_args(argv)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()
    conn = Connection(args.fd)
    try:
        main(conn, args.device)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went away mid-answer
    finally:
        conn.close()


if __name__ == "__main__":
    _entry(sys.argv[1:])
