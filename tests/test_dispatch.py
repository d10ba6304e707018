"""The dispatcher without a GPU: `autotune.load`'s read of the store."""

from __future__ import annotations


def test_the_dispatcher_reads_a_read_only_store_creating_nothing(tmp_path):
    """`autotune.load`'s read of the store (its own method; constructing a TunedKernel needs a GPU): from a
    WAL database whose file and folder have no write bit, the rows, and no file beside it."""
    import os
    import types

    from test_storage import _wal_database, read_only_folder

    from autotune.runtime.dispatch import TunedKernel
    from autotune.spaces import get_space

    from conftest import file_digest

    folder = tmp_path / "image"
    folder.mkdir()
    _wal_database(folder / "a.db")
    read_only_folder(folder, folder / "a.db")
    before = file_digest(folder / "a.db")
    try:
        stand_in = types.SimpleNamespace(strict=True, space=get_space("gemm"))
        rows, code_hashes = TunedKernel._read_rows(stand_in, str(folder / "a.db"))  # type: ignore[arg-type]
        assert [(r.kernel, r.shape) for r in rows] == [("gemm", "4096x4096x4096")] and code_hashes == {}
        assert [p.name for p in folder.iterdir()] == ["a.db"] and file_digest(folder / "a.db") == before
    finally:
        os.chmod(folder, 0o755)
