"""Which files of a root kenning reads: the walk, its filters, file kinds, and text decoding.

This package owns file selection (ignore files, default ignores, hidden files, secrets, globs, types, size
limits, symlinks) and turning a file's bytes into text. The walk yields paths relative to the root in posix
form, sorted, so the same tree always gives the same sequence. Nothing here chunks, embeds or stores.

Its modules, from the bottom up: ``kinds`` (what a file is by its name), ``read`` (a file's bytes and text,
and the secret rule for its content), ``filters`` (the selection's globs and types), ``rules`` (ignore files,
the default ignore list, secret names, and :class:`PathFilter`) and ``tree`` (the traversal itself). Callers
import from the package, which re-exports their names.
"""

from __future__ import annotations

from kenning.types import FileEntry, Selection, Skip
from kenning.walk.filters import SelectionMatcher, check_selection, compile_selection
from kenning.walk.globs import expand_braces
from kenning.walk.kinds import MIB, SIZE_LIMITS, TEST_DIRS, TYPES, is_test_name, is_test_path, kind_of
from kenning.walk.read import (
    NOT_REGULAR,
    SECRET_CONTENT,
    SNIFF_BYTES,
    NotText,
    decode,
    holds_private_key,
    read_bytes,
    read_text,
    screen,
)
from kenning.walk.rules import (
    BY_DEFAULT,
    DEFAULT_IGNORE_DIRS,
    DEFAULT_IGNORE_FILES,
    INDEX_DIR_NAME,
    RULE_FILE_NAMES,
    SECRET_DIRS,
    SECRET_EXEMPT,
    SECRET_FILES,
    SKIPPED,
    PathFilter,
    is_secret,
)
from kenning.walk.tree import check_root, walk

__all__ = [  # FileEntry, Selection and Skip are re-exported: callers use walk.FileEntry
    "BY_DEFAULT", "DEFAULT_IGNORE_DIRS", "DEFAULT_IGNORE_FILES", "INDEX_DIR_NAME", "MIB", "NOT_REGULAR",
    "RULE_FILE_NAMES", "SECRET_CONTENT", "SECRET_DIRS", "SECRET_EXEMPT", "SECRET_FILES", "SIZE_LIMITS",
    "SKIPPED", "SNIFF_BYTES", "TEST_DIRS", "TYPES", "FileEntry", "NotText", "PathFilter", "Selection",
    "SelectionMatcher", "Skip", "check_root", "check_selection", "compile_selection", "decode",
    "expand_braces", "holds_private_key", "is_secret", "is_test_name", "is_test_path", "kind_of", "read_bytes",
    "read_text", "screen", "walk",
]  # fmt: skip
