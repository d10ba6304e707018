"""How a reader (`best`, `studies`, `show`, `report`, `export`, `autotune.load`) opens an SQLite database: without
creating a file beside it, without changing a byte of it, and also where nothing can be written at all (a
read-only mount, or an image that ships its tuned configurations).

Why it takes a choice: in WAL mode SQLite keeps two companions beside an open database, the log (``-wal``) and
its index (``-shm``). A connection opened read-only (``mode=ro``) to a WAL database creates both where they are
missing, cannot delete them when it closes (it is read-only), and fails ("unable to open database file") where it
cannot create them. ``immutable=1`` reads the file alone (no locks, no companions) but ignores the log, so it is
right only where the log holds nothing and nothing can write the file while it is read. So, per file:

* rollback journal (header bytes 18-19 = 1, e.g. a file made by Optuna alone): ``mode=ro``, which creates nothing.
* WAL, log absent or empty (every transaction is in the file, as after the last writer closed):
  - in a read-only location (file or directory not writable, or with no write bit at all: root passes every
    permission check, so cleared bits count as the owner's word): ``mode=ro&immutable=1``. Exact there: no
    process can write the file while it is read, and the log holds nothing.
  - in a writable location: a read-write connection that SQLite itself forbids to write (``PRAGMA query_only``,
    set as each connection opens). It takes the usual locks, so a search starting meanwhile is read correctly,
    and, as the last connection, it removes the companions it made when it closes. (Immutable would not see a
    writer that starts meanwhile and could read a page torn by its checkpoint.)
* WAL with a log that holds transactions (a writer is running, or one was killed before it checkpointed):
  ``mode=ro``, through the log and its index, which are there already; immutable would silently miss those
  transactions. Where the index is missing and the location is read-only SQLite cannot read the log: one line
  says how to fold the log into the file before shipping it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from pathlib import Path
from typing import Any

from autotune.errors import StorageError

_WAL_VERSION = 2  # header bytes 18 and 19 (file format write / read version): 1 rollback journal, 2 WAL


class QueryOnlyConnection(sqlite3.Connection):
    """An SQLite connection that refuses every write from its first statement (Optuna's included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute("PRAGMA query_only = ON")


def is_wal(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and _WAL_VERSION in (header[18], header[19])


def read_only_location(path: Path) -> bool:
    """Whether ``path`` or its directory cannot, or is not meant to, be written."""
    for p in (path, path.parent):
        if not os.access(p, os.W_OK):  # permissions, or a read-only mount (EROFS, even for root)
            return True
        if not stat.S_IMODE(p.stat().st_mode) & 0o222:  # no write bit for anyone: root's access() ignores bits
            return True
    return False


def _uri(path: Path, query: str) -> str:
    return f"sqlite:///file:{urllib.parse.quote(str(path))}?{query}&uri=true"


def reader_engine(path: Path, url: str) -> tuple[str, dict[str, Any]]:
    """The SQLAlchemy URL and extra ``connect_args`` with which a reader opens the SQLite file ``path`` (see the
    module's docstring for the choice)."""
    if not is_wal(path):
        return _uri(path, "mode=ro"), {}
    log = path.with_name(path.name + "-wal")
    log_holds_data = log.exists() and log.stat().st_size > 0
    read_only = read_only_location(path)
    if not log_holds_data:
        if read_only:
            return _uri(path, "mode=ro&immutable=1"), {}
        return url, {"factory": QueryOnlyConnection}
    if read_only and not path.with_name(path.name + "-shm").exists():
        raise StorageError(
            f"database {path}: its write-ahead log {log.name} holds transactions not yet in the file, and SQLite "
            f"cannot read it where nothing can be written: fold it into the file where that is writable (e.g. "
            f"sqlite3 {path.name} 'PRAGMA wal_checkpoint(TRUNCATE)') before shipping it"
        )
    return _uri(path, "mode=ro"), {}
