"""The walk itself: listing a root's files in path order, judging symlinks, and checking the root.

This module owns the traversal: each directory is listed once and sorted, every entry goes through the
rules (:class:`kenning.walk.rules.Rules`), symlinks are followed only inside the root and only with
``follow``, and each file left is stat'ed for its kind, size and readability. It reads no file's content;
the ignore files it applies are the rules' to read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from kenning.errors import RootError
from kenning.types import FileEntry, Selection, Skip
from kenning.walk.kinds import SIZE_LIMITS, kind_of
from kenning.walk.rules import BY_DEFAULT, INDEX_DIR_NAME, Rules, Specs, is_secret


def check_root(root: Path | str) -> Path:
    """The root, resolved; RootError if it is missing, not a directory, unreadable, or the filesystem root."""
    if not str(root).strip():
        raise RootError("the root is an empty string; pass a directory (use . for the current one)")
    try:
        path = Path(os.path.expanduser(root)).resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        raise RootError(f"root {root!s} cannot be resolved ({exc}); pass an existing directory") from exc
    if not path.exists():
        raise RootError(f"root {path} does not exist; pass an existing directory")
    if not path.is_dir():
        raise RootError(f"root {path} is not a directory; pass the directory that contains it")
    if path == Path(path.anchor):
        raise RootError(f"root {path} is the filesystem root; pass a project directory instead")
    if not os.access(path, os.R_OK | os.X_OK):
        raise RootError(f"root {path} is not readable; fix its permissions or pass another directory")
    return path


def walk(
    root: Path | str,
    selection: Selection,
    *,
    index_dir_name: str = INDEX_DIR_NAME,
    on_skip: Callable[[Skip], None] | None = None,
    on_prune: Callable[[str], None] | None = None,
    under: Iterable[str] = (),
    tracked: Iterable[str] | None = None,
    named: bool = False,
) -> Iterator[FileEntry | Skip]:
    """Yield the selected files under root, and a Skip for each file left out for a reason worth telling.

    Order is global lexicographic order of the posix relative paths. Silent (no Skip): ``.git``, the index
    dir, hidden and ignored paths, files the globs/types do not select, symlinks when ``follow`` is off.
    Symlinks are followed only with ``selection.follow`` and only when their target is inside the root; a
    link out of the root is never followed, even with ``follow``. With ``on_skip``, Skips go to it instead
    of the iterator. ``on_prune`` hears each directory the default ignore list prunes (not those the user's
    ignore files, hidden-ness or the filters leave out): the list applies at any depth, and a ``build`` or
    ``generated`` folder can hold what the user wants found. ``under`` limits the walk to those root-relative
    files and directories: it lists only the directories on the way to them, whose ignore files still apply,
    as the whole walk's would. ``named``: the user named the ``under`` paths outright (grep's PATHs): a hidden
    folder or file among them, or on the way to them, is walked, as ripgrep searches a hidden path it is
    given; what is hidden inside them is still left out.

    A folder the default list names is walked all the same when it is source (:meth:`Rules.is_source_dir`: in
    a git repository, git tracks a file in it; outside one, it holds documentation sources). ``tracked`` is
    git's list of tracked files under the root when the caller has it (the index run reads git's blob ids
    anyway); without it the walk asks git itself, once, and only if it meets such a folder.
    """
    base = check_root(root)
    rules = Rules(base, selection, index_dir_name, strict=True, tracked=tracked)
    real_root = str(base)
    never = rules.never
    scopes = frozenset(s.strip("/") for s in under)
    if "" in scopes:
        scopes = frozenset()  # the root itself: the whole walk
    on_the_way = frozenset(s[:i] for s in scopes for i, c in enumerate(s) if c == "/")
    given = (scopes | on_the_way) if named else frozenset()

    def walk_dir(
        prefix: str, dirpath: Path, specs: Specs, chain: frozenset[str], inside: bool
    ) -> Iterator[FileEntry | Skip]:
        try:
            with os.scandir(dirpath) as it:
                entries = list(it)
        except OSError as exc:
            yield Skip(prefix, f"directory not readable ({exc.strerror or exc})")
            return
        specs = rules.specs_in(prefix, dirpath, specs, {e.name for e in entries})
        keyed = []
        for e in entries:
            try:
                is_dir = e.is_dir()  # follows links, so a linked dir sorts like a dir
            except OSError:
                is_dir = False
            keyed.append((e.name + "/" if is_dir else e.name, is_dir, e))
        keyed.sort(key=lambda k: k[0])  # "a/" sorts after "a.txt", as in a sort of the full paths
        for _, is_dir, entry in keyed:
            name = entry.name
            rel = prefix + "/" + name if prefix else name
            within = inside or rel in scopes
            if not within and not (is_dir and rel in on_the_way):
                continue
            # Filters before symlink checks, so links the selection would not take are not reported.
            why = rules.excluded(specs, rel, name, is_dir, named=rel in given)
            if why:
                if why == BY_DEFAULT and is_dir and on_prune is not None:
                    on_prune(rel)
                continue
            real = None
            if entry.is_symlink():
                if not os.path.exists(entry.path):
                    yield Skip(rel, "broken symlink")
                    continue
                real = os.path.realpath(entry.path)
                if real != real_root and not real.startswith(real_root + os.sep):
                    yield Skip(rel, "symlink points outside the root")
                    continue
                if not selection.follow:
                    continue  # the target is inside the root, so it is walked under its own path
                # A link must not smuggle in what is never indexed under its real name.
                target = real[len(real_root) + 1 :].replace(os.sep, "/")
                if any(p in never for p in target.split("/")):
                    continue
                if not is_dir and is_secret(target):
                    yield Skip(rel, "secret file (excluded by default)")
                    continue
            if not is_dir:
                item = file_entry(rel, entry)
                if item is not None:
                    yield item
            elif not selection.follow:
                yield from walk_dir(rel, dirpath / name, specs, chain, within)
            else:
                # Only followed links can make loops; the chain holds the real dirs from the root down.
                real = real or os.path.realpath(entry.path)
                if real in chain:
                    yield Skip(rel, "symlink loop")
                else:
                    yield from walk_dir(rel, dirpath / name, specs, chain | {real}, within)

    def file_entry(rel: str, entry: os.DirEntry[str]) -> FileEntry | Skip | None:
        if is_secret(rel):
            return Skip(rel, "secret file (excluded by default)")
        kind = kind_of(rel)
        if kind is None:
            return Skip(rel, f"unsupported format (.{rel.rsplit('.', 1)[-1].lower()})")
        try:
            st = entry.stat()
        except OSError as exc:
            return Skip(rel, f"cannot stat ({exc.strerror or exc})")
        if not stat.S_ISREG(st.st_mode):
            return None  # fifos, sockets, devices: reading them could block or never end
        limit = selection.max_filesize if selection.max_filesize is not None else SIZE_LIMITS[kind[0]]
        if st.st_size == 0:
            return Skip(rel, "empty")
        if st.st_size > limit:
            return Skip(rel, f"{st.st_size} bytes, past the {limit}-byte limit (--max-filesize)")
        if not os.access(entry.path, os.R_OK):
            return Skip(rel, "permission denied")
        return FileEntry(rel, entry.path, st.st_size, st.st_mtime_ns, kind[0], kind[1])

    for item in walk_dir("", base, (), frozenset({real_root}), not scopes):
        if on_skip is not None and isinstance(item, Skip):
            on_skip(item)
        else:
            yield item
