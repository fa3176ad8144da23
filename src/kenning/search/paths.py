"""What a file's path tells the ranking, judged once a folder and once a file name: the learned ranker's
query-free file columns (`path_traits`: a test, release notes, in a docs, example, bench, vendored, generated or
legacy folder, its depth, a barrel module, a readme) and the stemmed words of its file's and folder's names
(`path_words`, `name_words`), which the learned ranker's f_path_cov and f_name_cov and the hand-set path evidence
(`shape`) read.

A search meets about thirty files it has not met before in each new question, most of them in folders and many
under names it has met (`__init__.py`, `index.ts`, `README.md`): what a folder says is kept by folder, what a
name says by name, and a path puts the two together. The values are those of the path read whole, for every path
(tests/test_ranker.py pins the edges: empty names, the stopword fallback across the two names, a pattern's `$`
before a newline).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from kenning import walk
from kenning.store.terms import STOPWORDS, split_terms
from kenning.store.tokens import stem

# the folders and names the columns look for (FEATURES_VERSION 1: a change here is a change of column meaning)
_DOCS_DIRS = frozenset(
    {"doc", "docs", "documentation", "guide", "guides", "manual", "site", "website", "wiki"}
)
_EXAMPLE_DIRS = frozenset(
    {
        "example",
        "examples",
        "sample",
        "samples",
        "demo",
        "demos",
        "tutorial",
        "tutorials",
        "playground",
        "cookbook",
    }
)
_BENCH_DIRS = frozenset({"bench", "benches", "benchmark", "benchmarks", "perf"})
_VENDOR_DIRS = frozenset(
    {"vendor", "vendored", "third_party", "thirdparty", "external", "extern", "node_modules"}
)
_LEGACY = re.compile(
    r"^(?:legacy|compat|compatibility|deprecated|old|classic|v\d+|\d+\.x|backport\w*)$", re.I
)
_GENERATED = re.compile(
    r"(?i)(?:^|[/_.-])(?:generated|gen|autogen)(?:[/_.-]|$)|_pb2\.py$|\.pb\.go$|\.min\.\w+$"
)
_BARREL = frozenset(
    {"index", "mod", "lib", "__init__", "main", "exports", "public_api", "api", "prelude", "all"}
)
_NOTES_NAME = re.compile(
    r"(?i)^(?:change[-_ ]?log|changes|history|news|release[-_ ]?notes|releases|whats[-_]?new|upgrading)"
)


class _Words(NamedTuple):
    """The stemmed words of a name (digits left out): of its informative terms where it has one, else of all its
    terms (`query_terms`' stopword fallback)."""

    informative: bool
    stems: frozenset[str]


def _words(text: str) -> _Words:
    terms = split_terms(text)
    kept = [t for t in terms if t not in STOPWORDS]
    return _Words(bool(kept), frozenset(stem(t) for t in (kept or terms) if not t.isdigit()))


class _Folder(NamedTuple):
    """What a file's columns take from its folder, judged once a folder: its files come in many queries."""

    # whether its path says test, docs, example, bench, vendor, generated, legacy (f_test .. f_legacy but notes)
    traits: tuple[bool, bool, bool, bool, bool, bool, bool]
    depth: float
    words: _Words  # of the innermost folder's name


_NO_WORDS = _Words(False, frozenset())
_TOP = _Folder((False,) * 7, 0.0, _NO_WORDS)  # the folder of a file at the root (its path has no "/")


@lru_cache(maxsize=4096)
def _folder(folder: str) -> _Folder:
    dirs = folder.split("/")
    low = [d.lower() for d in dirs]
    return _Folder(
        (
            any(d in walk.TEST_DIRS for d in low),
            not _DOCS_DIRS.isdisjoint(low),
            not _EXAMPLE_DIRS.isdisjoint(low),
            not _BENCH_DIRS.isdisjoint(low),
            not _VENDOR_DIRS.isdisjoint(low),
            # the pattern's words hold no "/": one in a folder's name ends at the "/" after it
            _GENERATED.search(folder + "/") is not None,
            any(_LEGACY.match(d) for d in low),
        ),
        float(len(dirs)),
        _words(dirs[-1]),
    )


class _Name(NamedTuple):
    """What a file's columns take from its name alone, judged once a name: `__init__.py`, `index.ts`, `README.md`
    are in many folders."""

    test: bool
    notes: bool
    generated: bool
    barrel: float
    readme: float
    words: _Words  # of the name less its extension


@lru_cache(maxsize=16384)
def _name(name: str) -> _Name:
    base = name.rsplit(".", 1)[0] if "." in name[1:] else name
    low = base.lower()
    kind = walk.kind_of(name)  # a path's kind is its name's
    return _Name(
        walk.is_test_name(name),
        (kind is None or kind[0] != "code") and _NOTES_NAME.match(name) is not None,
        # one in the file's name starts after the "/" before it (or at its start, as a file at the root's)
        _GENERATED.search("/" + name) is not None,
        float(low in _BARREL),
        float(low.startswith("readme")),
        _words(base),
    )


def _split(path: str) -> tuple[_Folder, str]:
    """A path's folder and its file's name."""
    cut = path.rfind("/")
    return _folder(path[:cut]) if cut >= 0 else _TOP, path[cut + 1 :]


def _joined(own: _Words, around: _Words) -> frozenset[str]:
    """The words of a file's name and of its folder's, as `query_terms` keeps them of the two names joined: the
    informative ones, or where neither name holds one, every one."""
    if own.informative == around.informative:
        return own.stems | around.stems
    return own.stems if own.informative else around.stems


def path_columns(path: str) -> tuple[str, frozenset[str], frozenset[str], tuple[float, ...]]:
    """A file's name, `path_words`, `name_words` and `path_traits`, from what its folder and its name say, each
    judged once."""
    folder, name = _split(path)
    own = _name(name)
    test, docs, example, bench, vendor, generated, legacy = folder.traits
    traits = (
        float(test or own.test),
        float(own.notes),
        float(docs),
        float(example),
        float(bench),
        float(vendor),
        float(generated or own.generated),
        float(legacy),
        folder.depth,
        own.barrel,
        own.readme,
    )
    return name, _joined(own.words, folder.words), own.words.stems, traits


def path_traits(path: str) -> tuple[float, ...]:
    """The query-free columns of a file, from its path alone (f_test .. f_readme, in FEATURES' order)."""
    return path_columns(path)[3]


def path_words(path: str) -> frozenset[str]:
    """The stemmed words of a file's name and its folder's (`unicode_tables/property_names.rs`: unicod, tabl,
    properti, name), identifiers split as the lexical index splits them."""
    folder, name = _split(path)
    return _joined(_name(name).words, folder.words)


def name_words(path: str) -> frozenset[str]:
    """The stemmed words of a file's own name."""
    return _name(path.rsplit("/", 1)[-1]).words.stems
