"""The database: Optuna's study tables and our own, side by side in one SQLAlchemy URL.

* Location: ``--db`` (a path or a full SQLAlchemy URL), else ``$AUTOTUNE_DB``, else ``studies/autotune.db``.
* `check_database` validates a location without writing anything, so bad input leaves no trace.
* Our tables: ``autotune_meta`` (schema version), ``autotune_best`` (best configuration per device, compute
  capability, kernel, shape, dtype and template hash), and since schema 2 ``autotune_claims`` with
  ``autotune_claim_locks`` (the configurations a study measures, one row each, taken across processes:
  `autotune.tuning.claims`). A newer program upgrades an older file in place (`MIGRATIONS`); an older program refuses a
  newer file instead of damaging it.
* SQLite runs in WAL mode with a busy timeout: readers never block the writer and short write transactions
  wait for each other instead of failing with "database is locked".
* Readers never write: ``Database(url, create=False)`` opens an SQLite file so that SQLite refuses every write
  and leaves its journal mode alone, so a file made by Optuna itself keeps every byte, and creates no file beside
  it (no -wal/-shm left behind), also on a read-only mount (`autotune.results.readonly` says how, and why).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from autotune.errors import StorageError

DEFAULT_DB = Path("studies") / "autotune.db"
ENV_DB = "AUTOTUNE_DB"
SCHEMA_VERSION = 3
BUSY_TIMEOUT_S = 120
SQLITE_MAGIC = b"SQLite format 3\x00"
# PostgreSQL through psycopg 3 (SQLAlchemy 2.1's default for postgresql://; the `postgres` extra installs it).
POSTGRES_DRIVER = "postgresql+psycopg"


class Base(DeclarativeBase):
    pass


class Meta(Base):
    __tablename__ = "autotune_meta"
    key: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    value: Mapped[str] = mapped_column(sa.Text)


class BestConfig(Base):
    __tablename__ = "autotune_best"
    __table_args__ = (
        sa.UniqueConstraint("device_name", "compute_capability", "kernel", "shape", "dtype", "template_hash"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    device_name: Mapped[str] = mapped_column(sa.String(128))
    compute_capability: Mapped[str] = mapped_column(sa.String(16))
    kernel: Mapped[str] = mapped_column(sa.String(64))
    shape: Mapped[str] = mapped_column(sa.String(128))
    dtype: Mapped[str] = mapped_column(sa.String(16))
    template_hash: Mapped[str] = mapped_column(sa.String(64))
    params: Mapped[str] = mapped_column(sa.Text)  # JSON object
    time_ms: Mapped[float]
    metric: Mapped[float]
    metric_unit: Mapped[str] = mapped_column(sa.String(16))
    default_time_ms: Mapped[float | None]
    driver_version: Mapped[str] = mapped_column(sa.String(64))
    nvcc_version: Mapped[str] = mapped_column(sa.String(64))
    study_name: Mapped[str] = mapped_column(sa.String(512))
    trial_number: Mapped[int]
    updated_at: Mapped[dt.datetime]

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.params)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device_name": self.device_name,
            "compute_capability": self.compute_capability,
            "kernel": self.kernel,
            "shape": self.shape,
            "dtype": self.dtype,
            "template_hash": self.template_hash,
            "params": self.config,
            "time_ms": self.time_ms,
            "metric": self.metric,
            "metric_unit": self.metric_unit,
            "default_time_ms": self.default_time_ms,
            "driver_version": self.driver_version,
            "nvcc_version": self.nvcc_version,
            "study_name": self.study_name,
            "trial_number": self.trial_number,
            "updated_at": self.updated_at.isoformat(),
        }


class Claim(Base):
    """A configuration of a study that is measured or being measured (`autotune.tuning.claims`): one row per study and
    configuration, so that no two processes measure the same one; ``trial_number`` is the study's trial that
    measures it."""

    __tablename__ = "autotune_claims"
    __table_args__ = (sa.UniqueConstraint("study_name", "config_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    study_name: Mapped[str] = mapped_column(sa.String(512))
    config_key: Mapped[str] = mapped_column(sa.Text)
    trial_number: Mapped[int]
    claimed_at: Mapped[dt.datetime]


class ClaimLock(Base):
    """One row per study with claims, updated first in every transaction that claims: it serialises those
    transactions (a row lock on PostgreSQL, the write lock on SQLite), so a claim and the count of the study's
    claims against its target are one step."""

    __tablename__ = "autotune_claim_locks"
    study_name: Mapped[str] = mapped_column(sa.String(512), primary_key=True)
    locked_at: Mapped[dt.datetime]


class CodeHash(Base):
    """The sha256 of the cubin a stored row was tuned with (`autotune.runtime.code_check`). Its own table, so that
    an older file (without it) reads unchanged."""

    __tablename__ = "autotune_code"
    best_id: Mapped[int] = mapped_column(sa.ForeignKey("autotune_best.id"), primary_key=True)
    code_hash: Mapped[str] = mapped_column(sa.String(64))


def _add_tables(*tables: type[Base]) -> Callable[[Connection], None]:
    """A migration that adds tables (no existing row changes)."""
    return lambda conn: Base.metadata.create_all(conn, tables=[t.__table__ for t in tables])


# version → function upgrading a database from version-1 to version, inside one transaction. Schema 2: the claims;
# 3: the machine-code identities of stored rows (rows stored before have none).
MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _add_tables(Claim, ClaimLock), 3: _add_tables(CodeHash)}


def resolve_url(db: str | os.PathLike[str] | None = None) -> str:
    """The SQLAlchemy URL for ``--db`` / ``$AUTOTUNE_DB`` / the default file."""
    value = str(db) if db is not None else os.environ.get(ENV_DB) or str(DEFAULT_DB)
    if "://" in value:
        try:
            parsed = make_url(value)
            if parsed.drivername == "postgresql":  # our driver whatever SQLAlchemy's default (2.0: psycopg2)
                value = parsed.set(drivername=POSTGRES_DRIVER).render_as_string(hide_password=False)
            dialect = make_url(value).get_dialect()
        except NoSuchModuleError:  # (a subclass of ArgumentError)
            raise StorageError(f"database URL {value!r}: SQLAlchemy knows no such database kind") from None
        except ArgumentError:
            raise StorageError(f"malformed database URL {value!r}") from None
        _check_driver(dialect, value)
        return value
    return f"sqlite:///{Path(value).expanduser().absolute()}"


def _check_driver(dialect: Any, url: str) -> None:
    """The database's Python driver must be importable: one line naming the package, not a traceback later."""
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        driver = getattr(dialect, "driver", "?")
        if getattr(dialect, "name", "") == "postgresql" and driver == "psycopg":
            hint = "pip install 'autotune[postgres]' (psycopg 3)"
        else:
            hint = f"pip install the {driver} package"
        missing = getattr(exc, "name", None) or driver
        raise StorageError(f"database {_display(url)} needs the Python module {missing}: {hint}") from None


def sqlite_path(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def check_database(url: str, *, create: bool) -> None:
    """Raise StorageError if ``url`` cannot be used; writes nothing.

    ``create``: a missing SQLite file is fine (it will be created) provided its directory is writable.
    """
    path = sqlite_path(url)
    if path is None:
        return  # a server database: the first connection tells
    if path.exists():
        if path.is_dir():
            raise StorageError(f"database path {path} is a directory")
        try:
            with open(path, "rb") as fh:
                head = fh.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise StorageError(f"cannot read database {path}: {exc.strerror}") from None
        if path.stat().st_size and head != SQLITE_MAGIC:
            raise StorageError(f"{path} is not an SQLite database")
        if create and not os.access(path, os.W_OK):
            raise StorageError(f"database {path} is read-only")
        return
    if not create:
        raise StorageError(f"database {path} does not exist")
    parent = path.parent
    if not parent.is_dir():
        if path == DEFAULT_DB.absolute() and parent.parent.is_dir():
            return  # the default home, studies/, is made when the database is created
        raise StorageError(f"cannot create database {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StorageError(f"cannot create database {path}: directory {parent} is not writable")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")  # in WAL mode the file stays consistent; fewer fsyncs
        cursor.close()


def _sqlite_read_pragmas(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")  # a connection setting: writes nothing
        cursor.close()


def tune_engine(engine: Engine, *, read_only: bool = False) -> Engine:
    """WAL and a busy timeout on every new SQLite connection of ``engine`` (ours and Optuna's); read-only
    engines get the busy timeout alone (switching to WAL would rewrite the file's header)."""
    listener = _sqlite_read_pragmas if read_only else _sqlite_pragmas
    if engine.dialect.name == "sqlite" and not event.contains(engine, "connect", listener):
        event.listen(engine, "connect", listener)
        engine.dispose()  # connections opened before the listener get replaced
    return engine


def engine_kwargs(url: str) -> dict[str, Any]:
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": BUSY_TIMEOUT_S}}
    return {"pool_pre_ping": True}


@dataclass
class BestEntry:
    """A row for `Database.save_best` (the stored form is `BestConfig`)."""

    device_name: str
    compute_capability: str
    kernel: str
    shape: str
    dtype: str
    template_hash: str
    params: dict[str, Any]
    time_ms: float
    metric: float
    metric_unit: str
    default_time_ms: float | None
    driver_version: str
    nvcc_version: str
    study_name: str
    trial_number: int
    code_hash: str | None = None  # sha256 of the tuned configuration's cubin (`CodeHash`), where known


class Database:
    """Our tables in the database at ``url``; also hands Optuna its storage on the same database.

    ``create=False``: a reader. The database must exist; an SQLite file is opened read-only and nothing is
    created, upgraded or switched to WAL; a file without our tables reads as holding no configuration."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        self.read_only = not create
        check_database(url, create=create)
        path = sqlite_path(url)
        self._engine_url, self._engine_kwargs = url, engine_kwargs(url)
        if self.read_only and path is not None:
            from autotune.results.readonly import reader_engine

            self._engine_url, connect_args = reader_engine(path, url)
            self._engine_kwargs["connect_args"].update(connect_args)
        if create and path is not None and path == DEFAULT_DB.absolute():
            path.parent.mkdir(exist_ok=True)
        try:
            engine = sa.create_engine(self._engine_url, **self._engine_kwargs)
            self.engine = tune_engine(engine, read_only=self.read_only)
            _retry_initialisation(lambda: self._upgrade(create))
            with self.engine.connect() as conn:
                self.has_best_table = sa.inspect(conn).has_table(BestConfig.__tablename__)
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot open database {_display(url)}: {_one_line(exc)}") from None

    # --- schema ---------------------------------------------------------------------------------------------
    def _upgrade(self, create: bool) -> None:
        with self.engine.connect() if not create else self.engine.begin() as conn:
            inspector = sa.inspect(conn)
            if inspector.has_table(Meta.__tablename__):
                row = conn.execute(sa.select(Meta.value).where(Meta.key == "schema_version")).first()
                version = int(row[0]) if row else 0
            else:
                version = 0 if inspector.has_table(BestConfig.__tablename__) else -1
            if version > SCHEMA_VERSION:
                raise StorageError(
                    f"database {_display(self.url)} was written by a newer autotune (schema {version}); "
                    f"this one understands schema {SCHEMA_VERSION}: upgrade autotune"
                )
            if version == SCHEMA_VERSION:
                return
            if not create:
                return  # read-only use of an older file: read what is there, change nothing
            if version == -1:  # fresh database
                Base.metadata.create_all(conn)
            else:
                for target in range(max(version, 1) + 1, SCHEMA_VERSION + 1):
                    MIGRATIONS[target](conn)
                Base.metadata.create_all(conn)  # tables new in this version
            conn.execute(sa.delete(Meta).where(Meta.key == "schema_version"))
            conn.execute(sa.insert(Meta).values(key="schema_version", value=str(SCHEMA_VERSION)))

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(Meta.value).where(Meta.key == "schema_version")).first()
        return int(row[0]) if row else 0

    # --- optuna ---------------------------------------------------------------------------------------------
    def optuna_storage(self, heartbeat_s: int | None = None, *, read_only: bool = False) -> Any:
        """Optuna's RDBStorage on this database; with ``heartbeat_s``, trials silent for 4x that are stale.
        ``read_only``: Optuna's tables must already exist (they are not created)."""
        import optuna

        def create() -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeat_interval
                return optuna.storages.RDBStorage(
                    self._engine_url,
                    engine_kwargs={k: dict(v) if isinstance(v, dict) else v for k, v in self._engine_kwargs.items()},
                    heartbeat_interval=heartbeat_s,
                    grace_period=4 * heartbeat_s if heartbeat_s else None,
                    skip_table_creation=read_only or self.read_only,
                )

        try:
            storage = _retry_initialisation(create)
        except Exception as exc:  # optuna raises RuntimeError / SQLAlchemyError for a foreign or newer schema
            raise StorageError(f"cannot open Optuna's tables in {_display(self.url)}: {_one_line(exc)}") from None
        tune_engine(storage.engine, read_only=self.read_only)
        return storage

    # --- best configurations --------------------------------------------------------------------------------
    @staticmethod
    def _write(session: Session, entry: BestEntry, overwrite: bool) -> str:
        """Insert or update one row inside ``session``; returns "added", "replaced" or "kept"."""
        key = dict(
            device_name=entry.device_name,
            compute_capability=entry.compute_capability,
            kernel=entry.kernel,
            shape=entry.shape,
            dtype=entry.dtype,
            template_hash=entry.template_hash,
        )
        values = dict(
            params=json.dumps(entry.params, sort_keys=True),
            time_ms=entry.time_ms,
            metric=entry.metric,
            metric_unit=entry.metric_unit,
            default_time_ms=entry.default_time_ms,
            driver_version=entry.driver_version,
            nvcc_version=entry.nvcc_version,
            study_name=entry.study_name,
            trial_number=entry.trial_number,
            updated_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None),
        )
        row = session.scalars(sa.select(BestConfig).filter_by(**key).with_for_update()).first()
        if row is None:
            row = BestConfig(**key, **values)
            session.add(row)
            outcome = "added"
        elif not overwrite:
            return "kept"
        else:
            outcome = "replaced"
            for name, value in values.items():
                setattr(row, name, value)
        session.flush()  # the row's id, for its code hash
        session.execute(sa.delete(CodeHash).where(CodeHash.best_id == row.id))  # a replaced row's old code goes
        if entry.code_hash:
            session.add(CodeHash(best_id=row.id, code_hash=entry.code_hash))
        return outcome

    def save_best(self, entry: BestEntry) -> None:
        """Store the best configuration of a search (replacing the row of the same key)."""
        self.import_entries([entry], overwrite=True)

    def import_entries(self, entries: list[BestEntry], *, overwrite: bool) -> dict[str, int]:
        """Write ``entries`` in one transaction: all of them or, on any error, none."""
        if self.read_only:
            raise StorageError(f"database {_display(self.url)} was opened for reading")
        for attempt in range(2):
            counts = {"added": 0, "replaced": 0, "kept": 0}
            try:
                with Session(self.engine) as session, session.begin():
                    for entry in entries:
                        counts[self._write(session, entry, overwrite)] += 1
                return counts
            except IntegrityError:
                if attempt:  # another process inserted the same key between our read and write: retry once
                    raise StorageError("cannot write configurations: concurrent writers") from None
            except SQLAlchemyError as exc:
                raise StorageError(f"cannot write configurations: {_one_line(exc)}") from None
        raise AssertionError("unreachable")

    def best(
        self, kernel: str | None = None, device_name: str | None = None, dtype: str | None = None
    ) -> list[BestConfig]:
        query = sa.select(BestConfig).order_by(
            BestConfig.kernel, BestConfig.device_name, BestConfig.shape, BestConfig.updated_at
        )
        if kernel:
            query = query.where(BestConfig.kernel == kernel)
        if device_name:
            query = query.where(BestConfig.device_name == device_name)
        if dtype:
            query = query.where(BestConfig.dtype == dtype)
        if not self.has_best_table:
            return []  # e.g. a file holding only Optuna's studies: no tuned configuration yet
        try:
            with Session(self.engine, expire_on_commit=False) as session:
                return list(session.scalars(query))
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot read {_display(self.url)}: {_one_line(exc)}") from None

    def code_hashes(self) -> dict[int, str]:
        """Stored rows' machine-code identities by row id (`CodeHash`); none in a file older than schema 3."""
        try:
            with self.engine.connect() as conn:
                if not sa.inspect(conn).has_table(CodeHash.__tablename__):
                    return {}
                return {row[0]: row[1] for row in conn.execute(sa.select(CodeHash.best_id, CodeHash.code_hash))}
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot read {_display(self.url)}: {_one_line(exc)}") from None

    def devices(self) -> dict[str, set[str]]:
        """The compute capabilities stored per device name (one each, unless something let a wrong one in)."""
        if not self.has_best_table:
            return {}
        query = sa.select(BestConfig.device_name, BestConfig.compute_capability).distinct()
        out: dict[str, set[str]] = {}
        try:
            with self.engine.connect() as conn:
                for name, cc in conn.execute(query):
                    out.setdefault(name, set()).add(cc)
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot read {_display(self.url)}: {_one_line(exc)}") from None
        return out

    def close(self) -> None:
        self.engine.dispose()


def _retry_initialisation(step: Callable[[], Any], attempts: int = 6) -> Any:
    """Run a table-creating step; processes that create the same tables at once collide: on a unique key
    (Optuna's alembic_version, our schema_version row, PostgreSQL's pg_type), on a lock (SQLite), or on a table
    another process created between the check and the CREATE (PostgreSQL's "relation ... already exists", a
    ProgrammingError). The losers retry and find the tables made."""
    for attempt in range(attempts):
        try:
            return step()
        except sa.exc.DBAPIError as exc:
            if attempt == attempts - 1 or not _lost_a_creation_race(exc):
                raise
        except Exception as exc:  # optuna wraps what SQLAlchemy raised during its own creation
            cause = exc.__cause__ or exc.__context__
            if attempt == attempts - 1 or not (isinstance(cause, sa.exc.DBAPIError) and _lost_a_creation_race(cause)):
                raise
        time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


def _lost_a_creation_race(exc: sa.exc.DBAPIError) -> bool:
    text = str(exc).lower()
    return any(word in text for word in ("unique", "locked", "exists", "duplicate"))


def _display(url: str) -> str:
    path = sqlite_path(url)
    return str(path) if path is not None else make_url(url).render_as_string(hide_password=True)


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return " ".join(text.split())[:300]

