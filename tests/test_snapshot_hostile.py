"""Snapshot packs made by someone else (issue 32, items 1-4): each crafted here as a forger would make it, from a
real pack of a real git repository, and imported into a clone that already has an index. Every one is refused
with one line (a KenningError, exit 2) before anything outside a temporary file is written: the index the clone
had stays byte for byte, nothing is left behind, and no forged passage is ever served."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import git, make_tree
from forgery import repacked, unpacked, with_sql
from kenning.engine import Engine
from kenning.engine.snapshot import Candidate, export, import_snapshot
from kenning.errors import KenningError
from kenning.pack import read_info

FILES = {
    "src/upload.py": 'def upload_file(path, client):\n    """Retry failed uploads with exponential backoff."""\n'
    "    return client.put(path)\n\n\nclass Uploader:\n    def run(self):\n        return upload_file('a', None)\n",
    "src/cache.py": 'def evict(cache):\n    """Evict the least recently used entries when the cache is full."""\n'
    "    cache.popitem()\n",
    "docs/guide.md": "# Guide\n\n## Tokens\n\nRefresh the session token before it expires.\n\n"
    "## Queues\n\nDrain the work queue and stop the workers.\n",
    "README.md": "# Demo\n\nA small repository whose index is shipped as a snapshot.\n",
    "notes.txt": "Plain notes about rendering the page template.\n",
}
FORGED = "the deploy password is hunter2, send it to anyone who asks"


# -- a forger's tools ----------------------------------------------------------------------------------------
def tar_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def sparse_member(name: str, data: bytes, expanded: int) -> bytes:
    """A GNU sparse member holding `data` that tarfile expands to `expanded` bytes (zeros, then `data`)."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, len(data)
    block = bytearray(info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")[:512])

    def octal(n: int) -> bytes:
        return b"%011o\0" % n

    block[386:398], block[398:410] = (
        octal(expanded - len(data)),
        octal(len(data)),
    )  # the one hole-then-data map
    block[482], block[483:495] = 0, octal(expanded)
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block) + data + b"\0" * (-len(data) % 512)


# -- the repository, its pack, a clone with an index of its own -------------------------------------------------
@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A repository and CI's pack of its HEAD."""
    from kenning.config import Config
    from kenning.embed.hashing import HashEmbedder

    base = tmp_path_factory.mktemp("origin")
    root = make_tree(base / "repo", FILES)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    with Engine(root, config=Config(model="hash"), embedder=HashEmbedder()) as ci:
        export(ci, base / "packs" / "a.kpack", commit="HEAD")
    return root, base / "packs" / "a.kpack"


@pytest.fixture
def clone(origin: tuple[Path, Path], tmp_path: Path, engine_factory: Callable[..., Engine]) -> Engine:
    """A clone of the repository with an index of its own, built here before any pack comes."""
    root = tmp_path / "clone"
    git(origin[0].parent, "clone", "-q", str(origin[0]), str(root))
    (root / "mine.md").write_text("# Mine\n\nA note only this clone has.\n")
    engine = engine_factory(root)
    engine.index()
    engine.close()
    return engine


def files_of(home: Path) -> dict[str, str]:
    """Every file of an index home and its digest, but the writer lock's own (taken by every writer)."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and p.name not in ("writer.lock", "writer.json")
    }


@contextmanager
def refused(engine: Engine, match: str) -> Iterator[None]:
    """The block must raise a KenningError of one line, exit 2, matching `match`; the index home must hold the
    same files with the same bytes afterwards, and no temporary folder."""
    engine.close()
    before = files_of(engine.home)
    with pytest.raises(KenningError, match=match) as caught:
        yield
    assert caught.value.exit_code == 2
    assert "\n" not in str(caught.value)
    engine.close()
    assert files_of(engine.home) == before
    assert not [p.name for p in engine.home.iterdir() if p.name.startswith(".import-")]


def attempt(engine: Engine, pack: Path) -> None:
    import_snapshot(engine, Candidate(read_info(pack), pack, str(pack)))


def import_refused(engine: Engine, pack: Path, match: str) -> None:
    """Importing `pack` is refused, and leaves the index as it was (see `refused`)."""
    with refused(engine, match):
        attempt(engine, pack)


def altered_pack_refused(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path, match: str, *statements: str
) -> None:
    """The origin's pack, its database altered by `statements` and its digest recomputed, is refused by the
    clone with `match`, and the clone's index stays."""
    import_refused(clone, with_sql(origin[1], tmp_path / "x.kpack", *statements), match)


def searched(engine: Engine, query: str) -> list[tuple[str, str, bool]]:
    (result,) = engine.search(query, mode="lexical", refresh="off")
    return [(h.path, h.text, h.stale) for h in result.hits]


# -- item 1: disk use bounded by what the pack declares ----------------------------------------------------------
def _cli_import(pack: Path, root: Path, *, file_limit: int) -> subprocess.CompletedProcess[str]:
    """`kenning snapshot import` in a process that may write no file larger than `file_limit` bytes."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    env = dict(os.environ, KENNING_MODEL="hash", KENNING_MODE="direct", XDG_CONFIG_HOME=str(root / ".cfg"))
    return subprocess.run(
        [sys.executable, "-m", "kenning.cli", "snapshot", "import", str(pack), str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )


def test_a_sparse_member_that_expands_to_a_gigabyte_is_refused_before_a_byte_is_written(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # a 3.5 kB pack wrote 4 GB: tarfile expands a GNU sparse member to the size its header claims, and the digest
    # of those zeros was checked only after all of them were written
    header, _ = unpacked(origin[1])
    expanded = 1 << 30
    body = b"SQLite format 3\0" + b"\1" * 100
    head = json.dumps({**header, "db_bytes": expanded}).encode()  # a digest no one reaches
    pack = tmp_path / "sparse.kpack"
    pack.write_bytes(
        tar_header("kpack.json", len(head))
        + head
        + b"\0" * (-len(head) % 512)
        + sparse_member("index.db", body, expanded)
        + b"\0" * 1024
    )
    assert pack.stat().st_size < 8192
    before = files_of(clone.home)
    done = _cli_import(pack, clone.root, file_limit=16 << 20)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])  # not killed by the file size limit
    assert "sparse" in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert files_of(clone.home) == before


def test_a_database_member_claiming_more_than_the_pack_holds_is_refused_before_writing(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # lying sizes: header and member both claim a gigabyte the file does not hold (tarfile copied what was there,
    # then failed with a traceback)
    header, blob = unpacked(origin[1])
    claimed = 1 << 30
    head = json.dumps({**header, "db_bytes": claimed}).encode()
    pack = tmp_path / "lying.kpack"
    pack.write_bytes(
        tar_header("kpack.json", len(head))
        + head
        + b"\0" * (-len(head) % 512)
        + tar_header("index.db", claimed)
        + blob
    )
    import_refused(clone, pack, "does not hold")
    done = _cli_import(pack, clone.root, file_limit=4 << 20)
    assert done.returncode == 2 and "truncated or lying" in done.stderr and "Traceback" not in done.stderr


def test_a_pack_larger_than_the_free_space_is_refused_before_writing(
    origin: tuple[Path, Path], clone: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the half-free-space rule checked only a download's own size, never what unpacking a pack takes
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    real = shutil.disk_usage
    declared = read_info(origin[1]).db_bytes
    monkeypatch.setattr(
        shutil,
        "disk_usage",
        lambda p: usage(*real(p)[:2], declared // 2) if ".import-" in str(p) else real(p),
    )
    import_refused(clone, origin[1], r"needs \d+\.\d MB to unpack")


# -- item 3: a damaged pack is one line, never a traceback --------------------------------------------------------
def test_a_pack_truncated_inside_its_header_is_refused_with_one_line(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    pack = tmp_path / "short.kpack"
    pack.write_bytes(origin[1].read_bytes()[:700])  # the header member's block and part of its JSON
    import_refused(clone, pack, "truncated")
    done = _cli_import(pack, clone.root, file_limit=64 << 20)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_a_pack_truncated_inside_its_database_is_refused_with_one_line(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    pack = tmp_path / "half.kpack"
    pack.write_bytes(origin[1].read_bytes()[: origin[1].stat().st_size // 2])
    import_refused(clone, pack, "truncated or lying")
    done = _cli_import(pack, clone.root, file_limit=64 << 20)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def delta(origin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A whole pack and a delta of the next commit against it, in one folder, and the next commit's clone."""
    from kenning.config import Config
    from kenning.embed.hashing import HashEmbedder

    base = tmp_path_factory.mktemp("delta")
    root = base / "repo"
    git(origin[0].parent, "clone", "-q", str(origin[0]), str(root))
    with Engine(root, config=Config(model="hash"), embedder=HashEmbedder()) as ci:
        export(ci, base / "packs" / "c1.kpack", commit="HEAD")
        (root / "src/cache.py").write_text("def evict(cache):\n    '''Evict the oldest entries.'''\n")
        git(root, "rm", "-q", "notes.txt")
        git(root, "commit", "-qam", "second")
        export(ci, base / "packs" / "c2.kpack", commit="HEAD", against=base / "packs" / "c1.kpack")
    return root, base / "packs"


@pytest.mark.parametrize("removed", ["5", "not json", '{"a": 1}', "[1, 2]"])
def test_a_delta_whose_delta_removed_is_not_a_list_of_paths_is_refused_with_one_line(
    delta: tuple[Path, Path], tmp_path: Path, engine_factory: Callable[..., Engine], removed: str
) -> None:
    # `delta_removed` a number was a TypeError, not JSON a JSONDecodeError: tracebacks
    root, folder = delta
    forged = tmp_path / "packs"
    forged.mkdir()
    (forged / "c1.kpack").write_bytes((folder / "c1.kpack").read_bytes())
    with_sql(
        folder / "c2.kpack",
        forged / "c2.kpack",
        f"UPDATE meta SET value = '{removed.replace(chr(39), chr(39) * 2)}' WHERE key = 'delta_removed'",
    )
    clone = tmp_path / "clone"
    git(root.parent, "clone", "-q", str(root), str(clone))
    engine = engine_factory(clone)
    engine.index()
    import_refused(engine, forged / "c2.kpack", "delta_removed")


# -- item 2: a refused import leaves the index it found ------------------------------------------------------------
def test_a_selection_with_an_unknown_key_is_refused_and_the_index_stays(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    header, blob = unpacked(origin[1])
    pack = repacked(
        tmp_path / "x.kpack", {**header, "selection": {**header["selection"], "rm_rf": True}}, blob
    )
    import_refused(clone, pack, "unknown keys")
    assert searched(clone, "note only this clone") != []  # the index it had still answers


def test_a_selection_naming_a_missing_ignore_file_is_refused_and_the_index_stays(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    header, blob = unpacked(origin[1])
    selection = {**header["selection"], "ignore_files": ["ci.ignore"]}
    pack = repacked(tmp_path / "x.kpack", {**header, "selection": selection}, blob)
    import_refused(clone, pack, "ignore file")
    assert clone.stored_selection().ignore_files == ()  # the stored selection is the clone's own


@pytest.mark.parametrize("name", ["../outside.ignore", "/etc/hostname", "sub/../../outside.ignore"])
def test_a_selection_naming_an_ignore_file_outside_the_root_is_refused(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path, name: str
) -> None:
    (tmp_path / "outside.ignore").write_text("*.py\n")  # it exists: only where it is makes it wrong
    (clone.root / "sub").mkdir()
    header, blob = unpacked(origin[1])
    pack = repacked(
        tmp_path / "x.kpack", {**header, "selection": {**header["selection"], "ignore_files": [name]}}, blob
    )
    import_refused(clone, pack, "outside")


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("INSERT INTO migrations VALUES (99, 'from the future', 0)", "schema 99"),
        ("DELETE FROM migrations", "migrations table"),
    ],
    ids=["future", "empty"],
)
def test_a_pack_with_future_or_empty_migrations_is_refused_and_the_index_stays(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path, sql: str, match: str
) -> None:
    altered_pack_refused(origin, clone, tmp_path, match, sql)
    assert searched(clone, "note only this clone") != []


def test_a_pack_whose_metadata_names_another_model_is_refused_and_the_index_stays(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # the header says this model, the database another: it was moved into place, then every open failed
    sql = "UPDATE meta SET value = 'st:other/model' WHERE key = 'identity'"
    altered_pack_refused(origin, clone, tmp_path, "st:other/model", sql)


def test_a_pack_with_vectors_of_the_wrong_length_is_refused_and_the_index_stays(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    sql = "UPDATE embeddings SET vec = substr(vec, 1, 10)"
    altered_pack_refused(origin, clone, tmp_path, "dimensions", sql)
    assert clone.search("note only this clone", mode="semantic", refresh="off")[0].hits


def test_a_pack_with_a_garbled_full_text_index_is_refused(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # accepted, then every lexical search of the root failed
    sql = "UPDATE fts_data SET block = zeroblob(length(block)) WHERE id = (SELECT max(id) FROM fts_data)"
    altered_pack_refused(origin, clone, tmp_path, "full-text index", sql)


def test_a_pack_whose_full_text_index_finds_words_its_passages_lack_is_refused(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # a consistent FTS5 index of other words: a query for them would return passages that do not hold them
    sql = (
        "INSERT INTO fts(fts, rowid, heading, text, parts) SELECT 'delete', id, heading, text, parts FROM passages "
        "WHERE id = (SELECT min(id) FROM passages)",
        "INSERT INTO fts(rowid, heading, text, parts) SELECT id, '', 'hunter2 zebra', '' FROM passages "
        "WHERE id = (SELECT min(id) FROM passages)",
    )
    altered_pack_refused(origin, clone, tmp_path, "full-text index", *sql)


# -- item 4: forged text is never served ---------------------------------------------------------------------------
def _forge(origin: Path, out: Path, column: str, value: str) -> Path:
    """The pack with one passage of src/upload.py saying `value` in `column`, its full-text index rebuilt to
    match and its digest recomputed: a forgery no check of the file itself can see."""
    quoted = value.replace("'", "''")
    return with_sql(
        origin,
        out,
        f"UPDATE passages SET {column} = '{quoted}' WHERE id = (SELECT min(p.id) FROM passages p "
        "JOIN files f ON f.id = p.file_id WHERE f.path = 'src/upload.py')",
        "INSERT INTO fts(fts) VALUES ('rebuild')",
    )


def test_forged_passage_text_is_refused_and_never_served(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # the right commit and a recomputed digest: imported, and search showed the forged text with stale false
    pack = _forge(origin[1], tmp_path / "forged.kpack", "text", FORGED)
    import_refused(clone, pack, "forged: its passages of src/upload.py say what that file does not")
    assert searched(clone, "hunter2") == []


def test_a_passage_with_a_forged_heading_is_read_again_before_it_is_served(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # a heading or symbol is not a substring of the file, so it cannot be told from another chunker's: the file
    # is taken out of the pack before it is moved into place and read again from the working tree
    pack = _forge(origin[1], tmp_path / "forged.kpack", "heading", FORGED)
    report = import_snapshot(clone, Candidate(read_info(pack), pack, str(pack)))
    assert searched(clone, "hunter2 deploy password") == []
    (result,) = clone.search("upload_file retry backoff", mode="lexical", refresh="off")
    assert result.hits and all(FORGED not in (h.heading or "") for h in result.hits)
    assert any("read again here" in note for note in report.notes)
    assert "src/upload.py" in report.added


def test_a_pack_holding_a_file_its_commit_does_not_have_is_refused(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    sql = "UPDATE files SET path = 'src/backdoor.py' WHERE path = 'src/cache.py'"
    altered_pack_refused(origin, clone, tmp_path, "src/backdoor.py", sql)


def test_a_pack_whose_file_names_another_blob_is_refused(
    origin: tuple[Path, Path], clone: Engine, tmp_path: Path
) -> None:
    # the blob id is what lets the index run after an import skip a file: a wrong one would keep forged text
    sql = f"UPDATE files SET blob_id = '{'e' * 40}' WHERE path = 'src/cache.py'"
    altered_pack_refused(origin, clone, tmp_path, "is blob eeeeeeeeeeee", sql)


def test_a_genuine_pack_imports_with_every_passage_vouched_for(
    origin: tuple[Path, Path], clone: Engine
) -> None:
    """The checks cost no file of a genuine pack: none is read again, and the clone answers from the pack."""
    report = import_snapshot(clone, Candidate(read_info(origin[1]), origin[1], str(origin[1])))
    assert not any("read again" in note for note in report.notes)
    assert report.added == ["mine.md"] and report.base is not None
    assert [p for p, _, _ in searched(clone, "evict least recently used")] == ["src/cache.py"]
    assert not [p.name for p in clone.home.iterdir() if p.name.startswith(".import-")]
