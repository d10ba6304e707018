import os
import sqlite3
import sys

import pytest
import sqlalchemy as sa

from autotune.errors import StorageError
from autotune.results.storage import DEFAULT_DB, SCHEMA_VERSION, BestEntry, Database, check_database, resolve_url

from conftest import file_digest


def entry(**change) -> BestEntry:
    base = dict(
        device_name="NVIDIA H200", compute_capability="9.0", kernel="gemm", shape="4096x4096x4096",
        dtype="float32", template_hash="ab" * 32, params={"BM": 128, "PIPELINE": "double"}, time_ms=3.0,
        metric=45.8, metric_unit="TFLOP/s", default_time_ms=5.5, driver_version="580.159.04",
        nvcc_version="13.0.88", study_name="gemm-4096x4096x4096-nvidia-h200-abababab", trial_number=17,
    )  # fmt: skip
    base.update(change)
    return BestEntry(**base)


def test_resolve_url(monkeypatch, tmp_path):
    assert resolve_url(None) == f"sqlite:///{DEFAULT_DB.absolute()}"
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "env.db"))
    assert resolve_url(None) == f"sqlite:///{tmp_path / 'env.db'}"
    assert resolve_url(tmp_path / "x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    # psycopg 3 whatever SQLAlchemy's default driver; an explicit driver is kept.
    assert resolve_url("postgresql://u:p@localhost/autotune") == "postgresql+psycopg://u:p@localhost/autotune"
    assert resolve_url("postgresql+psycopg://u@h/a") == "postgresql+psycopg://u@h/a"
    with pytest.raises(StorageError, match="no such database kind"):
        resolve_url("notadialect://host/db")


def test_round_trip_and_upsert(tmp_path):
    db = Database(resolve_url(tmp_path / "a.db"))
    db.save_best(entry())
    db.save_best(entry(shape="1024x1024x1024", time_ms=0.1, metric=21.0))
    db.save_best(entry(time_ms=2.9, metric=47.0, params={"BM": 256}, trial_number=40))  # same key: replaced
    rows = db.best(kernel="gemm")
    assert [(r.shape, r.time_ms, r.config) for r in rows] == [
        ("1024x1024x1024", 0.1, {"BM": 128, "PIPELINE": "double"}),
        ("4096x4096x4096", 2.9, {"BM": 256}),
    ]
    assert rows[1].trial_number == 40 and rows[1].nvcc_version == "13.0.88"
    assert db.best(kernel="softmax") == [] and db.best(device_name="NVIDIA H100") == []
    assert db.schema_version() == SCHEMA_VERSION
    db.close()
    # A second program opening the same file sees the rows.
    again = Database(resolve_url(tmp_path / "a.db"), create=False)
    assert len(again.best()) == 2
    again.close()


def test_sqlite_runs_in_wal_mode(tmp_path):
    db = Database(resolve_url(tmp_path / "w.db"))
    db.save_best(entry())
    db.close()
    assert sqlite3.connect(tmp_path / "w.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_home_is_created(tmp_path):
    assert not (tmp_path / "studies").exists()
    Database(resolve_url(None)).close()
    assert (tmp_path / "studies" / "autotune.db").is_file()


@pytest.mark.parametrize("create", [True, False])
def test_missing_directory(tmp_path, create):
    with pytest.raises(StorageError, match="does not exist"):
        Database(resolve_url(tmp_path / "nope" / "a.db"), create=create)
    assert not (tmp_path / "nope").exists()


def test_not_a_database_is_refused_untouched(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_text("these are my notes, not a database\n")
    before = file_digest(bogus)
    with pytest.raises(StorageError, match="not an SQLite database"):
        Database(resolve_url(bogus))
    assert file_digest(bogus) == before


def test_truncated_database_is_refused_untouched(tmp_path):
    path = tmp_path / "t.db"
    db = Database(resolve_url(path))
    db.save_best(entry())
    db.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 100])
    before = file_digest(path)
    with pytest.raises(StorageError):
        Database(resolve_url(path)).best()
    assert file_digest(path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(StorageError, match="not writable"):
            check_database(resolve_url(ro / "a.db"), create=True)
    finally:
        ro.chmod(0o700)


def test_unwritable_directory_is_refused(tmp_path, monkeypatch):
    """As root (CI) permissions are not enforced: the check itself is exercised through os.access."""
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real_access(p, mode))
    with pytest.raises(StorageError, match="is not writable"):
        check_database(resolve_url(tmp_path / "a.db"), create=True)
    assert not (tmp_path / "a.db").exists()


def test_newer_schema_is_refused_untouched(tmp_path):
    path = tmp_path / "new.db"
    db = Database(resolve_url(path))
    db.save_best(entry())
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE autotune_meta SET value = :v WHERE key = 'schema_version'"), {"v": "99"})
    db.close()
    before = file_digest(path)
    with pytest.raises(StorageError, match="newer autotune"):
        Database(resolve_url(path))
    assert file_digest(path) == before


def test_optuna_storage_shares_the_file(tmp_path):
    import optuna

    db = Database(resolve_url(tmp_path / "o.db"))
    study = optuna.create_study(storage=db.optuna_storage(), study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    tables = sa.inspect(db.engine).get_table_names()
    assert "autotune_best" in tables and "trials" in tables
    db.close()


def optuna_only_database(path) -> None:
    """A file made by Optuna itself (rollback journal, no table of ours), as `optuna create-study` leaves it."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{path}", study_name="plain")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    study._storage.engine.dispose() if hasattr(study._storage, "engine") else None


def test_reading_writes_nothing(tmp_path):
    path = tmp_path / "optuna.db"
    optuna_only_database(path)
    before = file_digest(path)
    db = Database(resolve_url(path), create=False)
    assert db.best() == [], "no table of ours: no configuration, not an error"
    storage = db.optuna_storage(read_only=True)
    storage.engine.dispose()
    db.close()
    assert file_digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["optuna.db"], "no -wal/-shm companions"
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_reader_refuses_to_write(tmp_path):
    Database(resolve_url(tmp_path / "r.db")).close()
    reader = Database(resolve_url(tmp_path / "r.db"), create=False)
    with pytest.raises(StorageError, match="opened for reading"):
        reader.import_entries([entry()], overwrite=True)
    reader.close()


def test_missing_postgresql_driver_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails as where it is not installed
    with pytest.raises(StorageError) as info:
        resolve_url("postgresql://u:secret@db.example/autotune")
    message = str(info.value)
    assert "psycopg" in message and "autotune[postgres]" in message and "\n" not in message
    assert "secret" not in message, "the password is not printed"


def test_table_creation_races_are_retried_and_other_errors_are_not():
    # Four processes on a fresh PostgreSQL database: one creates Optuna's tables between another's check and
    # its CREATE TABLE, which fails with "relation ... already exists" (a ProgrammingError, seen in CI).
    from autotune.results.storage import _retry_initialisation

    calls = []

    def creation(error: Exception | None):
        def step():
            calls.append(1)
            if len(calls) == 1 and error is not None:
                raise error
            return "made"

        return step

    lost = sa.exc.ProgrammingError("CREATE TABLE studies", {}, Exception('relation "studies" already exists'))
    assert _retry_initialisation(creation(lost)) == "made" and len(calls) == 2
    calls.clear()
    wrapped = RuntimeError("optuna could not create its tables")
    wrapped.__cause__ = lost
    assert _retry_initialisation(creation(wrapped)) == "made" and len(calls) == 2
    calls.clear()
    syntax = sa.exc.ProgrammingError("SELEC 1", {}, Exception("syntax error at or near SELEC"))
    with pytest.raises(sa.exc.ProgrammingError):
        _retry_initialisation(creation(syntax))
    assert len(calls) == 1


def _wal_database(path) -> None:
    """A database as a search leaves it: WAL mode, our row and an Optuna study, every writer closed."""
    import optuna

    db = Database(resolve_url(path))
    db.save_best(entry())
    storage = db.optuna_storage()
    optuna.create_study(storage=storage, study_name="s").optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    storage.engine.dispose()
    db.close()
    with open(path, "rb") as fh:
        assert fh.read(20)[18:20] == b"\x02\x02", "WAL mode (header bytes 18-19; no connection that leaves files)"


def _read_everything(path) -> tuple[list, list]:
    import optuna

    db = Database(resolve_url(path), create=False)
    try:
        storage = db.optuna_storage(read_only=True)
        studies = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
        storage.engine.dispose()
        return [r.time_ms for r in db.best()], studies
    finally:
        db.close()


def read_only_folder(folder, *files) -> None:
    """Write bits off, as an image's read-only files are (tests run as root, who passes every permission check:
    the bits are what the reader sees; a real read-only mount is tested in test_cli)."""
    for f in files:
        os.chmod(f, 0o444)
    os.chmod(folder, 0o555)


@pytest.mark.parametrize("location", ["writable", "read-only"])
def test_a_reader_creates_no_file_beside_a_wal_database(tmp_path, location):
    """Before: mode=ro made -wal and -shm beside every WAL database it read, and left them (a read-only
    connection cannot remove them); where they could not be made it failed."""
    folder = tmp_path / "db"
    folder.mkdir()
    path = folder / "a.db"
    _wal_database(path)
    if location == "read-only":
        read_only_folder(folder, path)
    before = file_digest(path)
    try:
        assert _read_everything(path) == ([3.0], ["s"])
        assert sorted(p.name for p in folder.iterdir()) == ["a.db"]
        assert file_digest(path) == before
    finally:
        os.chmod(folder, 0o755)


def test_a_reader_still_refuses_to_write_a_wal_database(tmp_path):
    """In a writable folder a reader's connection is read-write (SQLite removes the companions it made when it
    closes); SQLite itself refuses every write on it, from the first statement."""
    _wal_database(tmp_path / "a.db")
    db = Database(resolve_url(tmp_path / "a.db"), create=False)
    try:
        with db.engine.connect() as conn, pytest.raises(sa.exc.OperationalError, match="readonly database"):
            conn.execute(sa.text("DELETE FROM autotune_best"))
    finally:
        db.close()
    assert _read_everything(tmp_path / "a.db")[0] == [3.0]


def test_a_log_holding_transactions_is_read_through_not_skipped(tmp_path):
    """A copy taken while a writer had the database open: the change is in the log alone. It is read (immutable
    would show the old row); without the log's index, where nothing may be written, one line says what to do."""
    _wal_database(tmp_path / "a.db")
    writer = sqlite3.connect(tmp_path / "a.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE autotune_best SET time_ms = 2.5")
    writer.commit()
    copy = tmp_path / "copy"
    copy.mkdir()
    for suffix in ("", "-wal", "-shm"):
        (copy / f"a.db{suffix}").write_bytes((tmp_path / f"a.db{suffix}").read_bytes())
    writer.close()
    assert (copy / "a.db-wal").stat().st_size > 0
    read_only_folder(copy, *copy.iterdir())
    try:
        assert _read_everything(copy / "a.db")[0] == [2.5]
        (copy / "a.db-shm").unlink()
        with pytest.raises(StorageError) as err:
            Database(resolve_url(copy / "a.db"), create=False)
        assert "write-ahead log a.db-wal holds transactions" in str(err.value) and "wal_checkpoint" in str(err.value)
        assert sorted(p.name for p in copy.iterdir()) == ["a.db", "a.db-wal"]
    finally:
        os.chmod(copy, 0o755)


def test_a_rows_code_hash_is_stored_replaced_and_dropped_with_it(tmp_path):
    """`CodeHash`: a row's machine-code identity follows the row: stored with it, replaced with it, and gone when
    the row is replaced by one without a hash (its old hash would describe another configuration)."""
    db = Database(resolve_url(tmp_path / "c.db"))
    db.save_best(entry(code_hash="1" * 64))
    db.save_best(entry(shape="1024x1024x1024", code_hash=None))
    rows = {r.shape: r.id for r in db.best()}
    assert db.code_hashes() == {rows["4096x4096x4096"]: "1" * 64}
    db.save_best(entry(params={"BM": 256}, code_hash="2" * 64))  # same key: replaced
    assert db.code_hashes() == {rows["4096x4096x4096"]: "2" * 64}
    db.save_best(entry(params={"BM": 64}))  # replaced by a row without a hash
    assert db.code_hashes() == {}
    db.close()
    reader = Database(resolve_url(tmp_path / "c.db"), create=False)
    assert reader.code_hashes() == {}
    reader.close()
