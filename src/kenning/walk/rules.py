"""The walk's rules: never-walked and hidden names, ignore files, the default ignore list, secret names.

This module owns which entries the walk leaves out by rule: ``.git`` and the index dir, hidden names, the
``.gitignore``/``.ignore`` files of each directory (and, for a root inside a git repository, those of the
folders above it and ``.git/info/exclude``) read with pathspec under git's and ripgrep's precedence, the
default ignore list, files named like credentials, and the selection's filters (:mod:`kenning.walk.filters`).
The default list's folder names are a guess that a folder holds output, and a guess can be wrong (Sphinx sources
in ``doc/build/``): :class:`Tracked` and :func:`holds_doc_sources` decide for a folder the name alone would prune.
:class:`Rules` applies them for the walk (:mod:`kenning.walk.tree`), :class:`PathFilter` one path at a time
for the daemon's watcher, so the two cannot drift apart.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from collections.abc import Container, Iterable, Sequence
from pathlib import Path

from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from kenning.errors import UsageError
from kenning.types import Selection
from kenning.walk.changes import git_output
from kenning.walk.filters import basename_re, compile_selection, ignore_file_path
from kenning.walk.kinds import RASTER
from kenning.walk.read import NotText, read_bytes

INDEX_DIR_NAME = ".kenning"


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


DEFAULT_IGNORE_DIRS = frozenset(
    _words("""node_modules vendor thirdparty third_party external deps dist build out target coverage
    generated __pycache__ venv .venv env .tox .eggs Pods .next .nuxt .svelte-kit .turbo .vite .parcel-cache
    .cache .gradle .pytest_cache .mypy_cache .ruff_cache tmp temp logs""")
)
# Folders of someone else's code: pruned by name even where git tracks them (a committed vendor/ is still not the
# project's source). The list's other names (build, dist, out, target, generated, tmp, ...) say "a tool writes
# here", which a folder git tracks files in, or one holding documentation sources, shows to be wrong.
THIRD_PARTY_DIRS = frozenset(_words("node_modules vendor thirdparty third_party external deps Pods"))
DEFAULT_IGNORE_FILES = _words(
    """*.lock *.lockb *-lock.json *-lock.yaml npm-shrinkwrap.json go.sum *.resolved *.map *.min.* *.bundle.*
    *.generated.* *.gen.* *.designer.* *.pb.* *_pb2.* *.g.*"""
) + tuple(f"*.{e}" for e in RASTER.split())
SECRET_FILES = _words(
    """*.pem *.key *.p12 *.pfx *.keystore *.jks *.kdbx *.ppk id_rsa* id_dsa* id_ecdsa* id_ed25519* .env .env.*
    .envrc .netrc .pgpass .htpasswd .git-credentials .npmrc .pypirc .dockercfg credentials credentials.json
    secrets.* *.tfstate *.tfstate.*"""
)
# Committed templates documenting the variables, without values: worth finding, not secret. `.env.example`,
# and a template of one environment's file as well (`.env.local.example`).
_TEMPLATE_ENDS = ("example", "sample", "template", "dist", "defaults")
SECRET_EXEMPT = frozenset(f".env.{s}" for s in _TEMPLATE_ENDS)
_TEMPLATE_SUFFIXES = tuple(f".{s}" for s in _TEMPLATE_ENDS)
SECRET_DIRS = frozenset({".ssh", ".gnupg"})


class _NameGlobs:
    """Basename globs matched with string methods: the per-file hot path, ~10x faster than a regex union."""

    def __init__(self, globs: Iterable[str]) -> None:
        exact: set[str] = set()
        prefix: list[str] = []
        suffix: list[str] = []
        contains: list[str] = []
        rest: list[str] = []
        for glob in (g.lower() for g in globs):  # matched case-insensitively: "KEY.PEM" is still a key
            core = glob.strip("*")
            if any(c in core for c in "*?["):
                rest.append(glob)
            elif glob.startswith("*") and glob.endswith("*"):
                contains.append(core)
            elif glob.startswith("*"):
                suffix.append(core)
            elif glob.endswith("*"):
                prefix.append(core)
            else:
                exact.add(core)
        self._exact, self._prefix, self._suffix = frozenset(exact), tuple(prefix), tuple(suffix)
        self._rest = basename_re(rest) if rest else None
        self._contains = re.compile("|".join(map(re.escape, contains))) if contains else None

    def match(self, name: str) -> bool:
        n = name.lower()
        return (
            n in self._exact
            or n.endswith(self._suffix)
            or n.startswith(self._prefix)
            or (self._contains is not None and self._contains.search(n) is not None)
            or (self._rest is not None and self._rest.match(n) is not None)
        )


_DEFAULT_FILES = _NameGlobs(DEFAULT_IGNORE_FILES)
_SECRETS = _NameGlobs(SECRET_FILES)


def _template(name: str) -> bool:
    return name in SECRET_EXEMPT or (name.startswith(".env.") and name.endswith(_TEMPLATE_SUFFIXES))


def is_secret(rel: str) -> bool:
    """True for files that likely hold credentials; they are never indexed, whatever the selection says."""
    cut = rel.rfind("/")
    name = rel[cut + 1 :]
    if _SECRETS.match(name) and not _template(name.lower()):
        return True
    # Every secret dir is a dot-name: most paths have none, so skip the split for them.
    parent = rel[:cut] if cut > 0 else ""
    return (parent.startswith(".") or "/." in parent) and any(p in SECRET_DIRS for p in parent.split("/"))


def _read_lines(path: Path) -> list[str]:
    data = read_bytes(path)  # a FIFO named .gitignore must not hang the walk
    if isinstance(data, NotText):
        return []  # an ignore file we cannot read cannot be applied; the walk goes on
    return data.decode("utf-8", errors="replace").splitlines()


class _IgnoreFile:
    """The rules of one directory's ignore files, with a one-regex pre-check for the common no-match case.

    ``lead`` is the root's path from that directory when the directory is above the root (a .gitignore of the
    enclosing repository): git matches a file's patterns against paths from the directory that holds it.
    """

    def __init__(self, lines: list[str], lead: str = "") -> None:
        patterns = []
        for line in lines:
            try:
                patterns.append(GitIgnoreSpecPattern(line))
            except ValueError:
                continue  # git skips a malformed line ("!", a lone "\\"); so does the walk
        self.lead = lead + "/" if lead else ""
        folders = [self.lead[: i + 1] for i, c in enumerate(self.lead) if c == "/"]
        if folders and any(GitIgnoreSpec(patterns).check_file(f).include for f in folders):
            # The root, or a folder between it and this file, is ignored here ("build/" for a root in build/).
            # A rule on a folder matches everything in it, yet the root is what the user named and is never
            # judged, as in ripgrep (`cd build && rg x` searches build/): drop the rules that match it, so
            # the others still apply below it.
            patterns = [p for p in patterns if not (p.regex and any(p.regex.match(f) for f in folders))]
        self.spec = GitIgnoreSpec(patterns)
        regexes = [p.regex.pattern for p in patterns if p.include is not None and p.regex]
        # Named groups repeat across patterns, and a union cannot hold two of one name: make them plain.
        union = "|".join(re.sub(r"\(\?P<\w+>", "(?:", r) for r in regexes)
        self.any = re.compile(union) if union else None

    def verdict(self, path: str) -> bool | None:
        path = self.lead + path
        if self.any is None or not self.any.search(path):
            return None
        return self.spec.check_file(path).include


Specs = tuple[tuple[str, _IgnoreFile], ...]  # (directory rel, its ignore files), root first


class Tracked:
    """The files git tracks under the root (root-relative), asked of git once and only when a folder of the
    default list is met; None inside when the root is in no repository or git cannot answer."""

    def __init__(self, base: Path, in_repository: bool, paths: Iterable[str] | None = None) -> None:
        self._base = base
        self._in_repository = in_repository
        self._paths: list[str] | None = sorted(paths) if paths is not None else None
        self._asked = paths is not None or not in_repository

    def _listing(self) -> list[str] | None:
        if not self._asked:
            self._asked = True
            try:
                out = git_output(self._base, "ls-files", "-z", "--", ".")
            except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
                return None  # no git, or it failed: the folder is judged by what it holds instead
            self._paths = sorted(p for p in out.split("\0") if p)
        return self._paths

    def holds(self, rel: str) -> bool | None:
        """True if git tracks a file under folder ``rel``; None when there is no listing to tell."""
        paths = self._listing()
        if paths is None:
            return None
        lead = rel + "/"
        i = bisect.bisect_left(paths, lead)
        return i < len(paths) and paths[i].startswith(lead)


# A folder of the default list holding these directly holds documentation sources, not a build's output: a
# Sphinx project's conf.py lives beside its sources and no builder writes one, and nothing builds into
# reStructuredText (Sphinx's own output keeps its sources as _sources/*.txt, in HTML's folder, not beside it).
DOC_SOURCE_MARKERS = frozenset({"conf.py"})
DOC_SOURCE_SUFFIXES = (".rst",)


def holds_doc_sources(dirpath: Path) -> bool:
    """True if the folder directly holds a Sphinx ``conf.py`` or a reStructuredText file."""
    try:
        with os.scandir(dirpath) as it:
            return any(
                e.name in DOC_SOURCE_MARKERS or e.name.lower().endswith(DOC_SOURCE_SUFFIXES) for e in it
            )
    except OSError:
        return False


# Rules.excluded's answers: left out by the default ignore list, or for any other silent reason.
BY_DEFAULT = "default ignore list"
SKIPPED = "skipped"


def _repository(base: Path) -> tuple[Path, Path] | None:
    """The top of the git work tree holding ``base`` (itself included) and that repository's info/exclude file;
    None outside a repository."""
    for top in (base, *base.parents):
        dot = top / ".git"
        if dot.is_dir():
            return top, dot / "info" / "exclude"
        if dot.is_file():
            # A linked worktree or a submodule: .git names the git dir, and a worktree's shares its
            # info/exclude with the main repository (the "commondir" file says where that is).
            text = "".join(_read_lines(dot)).strip()
            if not text.startswith("gitdir:"):
                return top, dot / "info" / "exclude"  # unreadable: a path that will not be there
            gitdir = top / text.removeprefix("gitdir:").strip()
            common = "".join(_read_lines(gitdir / "commondir")).strip()
            gitdir = Path(os.path.realpath(gitdir / common if common else gitdir))
            return top, gitdir / "info" / "exclude"
    return None


def _folders_above(base: Path, top: Path) -> Sequence[Path]:
    """The folders from ``base``'s parent up to ``top`` (its repository's top), nearest first."""
    return base.parents[: len(base.parents) - len(top.parents)]


def _ignored(specs: Specs, rel: str, is_dir: bool) -> bool | None:
    """The verdict of the nearest ignore file with a matching rule (deeper files override shallower)."""
    probe = rel + "/" if is_dir else rel  # a trailing slash lets dir-only rules ("build/") match
    for base, spec in reversed(specs):
        verdict = spec.verdict(probe[len(base) + 1 :] if base else probe)
        if verdict is not None:
            return verdict
    return None


class Rules:
    """The walk's per-entry rules, shared by walk() and PathFilter so the two cannot drift apart.

    ``strict`` refuses a missing --ignore-file (the walk reports it as a usage error); a long-lived watcher
    treats it as empty instead, since the file can vanish while it runs and the next walk will say so.
    """

    def __init__(
        self,
        base: Path,
        selection: Selection,
        index_dir_name: str,
        *,
        strict: bool,
        tracked: Iterable[str] | None = None,
    ) -> None:
        self.base = base
        self.selection = selection
        self.matcher = compile_selection(selection)
        self.never = (".git", index_dir_name)
        # Explicit --ignore-file rules stay on with no_ignore, as in ripgrep: the user named them. They have
        # the lowest precedence, then .git/info/exclude, then the .gitignore and .ignore of each directory
        # from the repository's top down to the root, nearer ones winning, as git and ripgrep rank them.
        explicit: list[str] = []
        for name in selection.ignore_files:
            try:
                explicit += _read_lines(ignore_file_path(base, name))
            except UsageError:
                if strict:
                    raise
        self.outer: Specs = (("", _IgnoreFile(explicit)),) if explicit else ()
        self.root_lines: list[str] = []
        repo = None if selection.no_ignore else _repository(base)
        self.tracked = Tracked(base, repo is not None, tracked)
        if repo is not None:
            top, exclude = repo
            lines = _read_lines(exclude)  # matched from the top, as the top's own .gitignore is
            # From the top down to the root's parent; nothing above the top is read, and a root outside any
            # repository reads no parent's files.
            for folder in reversed(_folders_above(base, top)):
                for f in (".gitignore", ".ignore"):
                    lines += _read_lines(folder / f)
                if lines:
                    self.outer += (("", _IgnoreFile(lines, base.relative_to(folder).as_posix())),)
                lines = []
            self.root_lines = lines  # still the exclude file's when the root is the top itself

    def specs_in(self, prefix: str, dirpath: Path, specs: Specs, names: Container[str] | None) -> Specs:
        """The ignore rules in force inside directory ``prefix``: its parent's (for the root, the files above
        it: :attr:`outer`), then its own ignore files.

        ``names`` are the directory's entries when the caller has listed it; None means "try to read them".
        """
        lines = list(self.root_lines) if not prefix else []
        specs = specs if prefix else self.outer
        if not self.selection.no_ignore:
            for f in (".gitignore", ".ignore"):  # .ignore last, so its rules win, as in ripgrep
                lines += _read_lines(dirpath / f) if names is None or f in names else []
        return (*specs, (prefix, _IgnoreFile(lines))) if lines else specs

    def excluded(self, specs: Specs, rel: str, name: str, is_dir: bool, *, named: bool = False) -> str | None:
        """Why the walk leaves the entry out silently (:data:`BY_DEFAULT` for the default ignore list, else
        "skipped" for never-dirs, hidden, ignored or filtered out), or None when it keeps it. A string, not a
        bool, so the walk can tell the user about the default list's prunes at no extra cost. ``named``: the
        user named this path (or one under it) outright, so its being hidden is no reason to leave it out."""
        if name in self.never or (name[0] == "." and not self.selection.hidden and not named):
            return SKIPPED
        verdict = _ignored(specs, rel, is_dir) if specs else None
        # The defaults rank below every ignore file, so "!vendor/" in a .gitignore brings vendor back.
        if (
            verdict is None
            and not self.selection.no_ignore
            and (
                (name in DEFAULT_IGNORE_DIRS and not self.is_source_dir(rel, name))
                if is_dir
                else _DEFAULT_FILES.match(name)
            )
        ):
            # a folder the user's own globs leave out as well is theirs to know of, not the list's doing
            return SKIPPED if is_dir and self.matcher.prunes_dir(rel) else BY_DEFAULT
        if verdict:
            return SKIPPED
        if self.matcher.prunes_dir(rel) if is_dir else not self.matcher.matches_file(rel):
            return SKIPPED
        return None

    def is_source_dir(self, rel: str, name: str) -> bool:
        """True for a folder of the default list that is source all the same: in a git repository, one that
        holds a file git tracks (the repository says what its source is); outside one, or when git cannot
        tell, one that directly holds documentation sources (:func:`holds_doc_sources`). Folders of third-party
        code (:data:`THIRD_PARTY_DIRS`) never are."""
        if name in THIRD_PARTY_DIRS:
            return False
        holds = self.tracked.holds(rel)
        return holds if holds is not None else holds_doc_sources(self.base / rel)


RULE_FILE_NAMES = frozenset({".gitignore", ".ignore"})


class PathFilter:
    """walk()'s rules for one path at a time, for a watcher that hears about paths instead of listing dirs.

    ``accepts(rel, is_dir)`` is True when walk() would descend into that directory or consider that file:
    every ancestor passes the rules (never-dirs, hidden, ignore files with the walk's precedence, defaults,
    globs and types), the entry itself passes them, and a file is not a secret. The path need not exist, so
    a deleted file is judged by its name. It does not look at what only the file can tell (size, symlinks,
    emptiness, format): the walk reports those. Parsed ignore files are cached per directory until
    :meth:`invalidate`, to call when an ignore file may have changed (see :meth:`is_rule_file`).
    """

    def __init__(self, root: Path | str, selection: Selection, index_dir_name: str = INDEX_DIR_NAME) -> None:
        # Not check_root: the watcher builds filters while the root may be briefly gone.
        self.root = Path(os.path.realpath(Path(os.path.expanduser(root))))
        self.selection = selection
        self.index_dir_name = index_dir_name
        compile_selection(selection)  # a bad glob or type is the caller's error, raised here and not later
        # The rules and both caches as one tuple, swapped whole by invalidate(): a check running in another
        # thread keeps the tuple it started with and never writes old verdicts into the new caches.
        self._state: tuple[Rules, dict[str, Specs], dict[str, bool]] | None = None
        self._rules_at = self._find_rule_files()

    def invalidate(self) -> None:
        """Forget the parsed ignore files and directory verdicts; the next call re-reads them."""
        self._state = None
        self._rules_at = self._find_rule_files()  # the root may have been moved into a repository since

    def rule_files(self) -> list[Path]:
        """Absolute paths of the rule files a walk reads outside the directories it enters: --ignore-file,
        the repository's info/exclude, and the .gitignore and .ignore of each folder from the repository's
        top down to the root's parent. They may live outside the root, where a watcher does not otherwise
        watch; those that do not exist yet are listed too, so creating one counts as a change."""
        return list(self._rules_at[0])

    def _find_rule_files(self) -> tuple[tuple[Path, ...], frozenset[str]]:
        """rule_files(), and the root-relative paths of those inside the root (for is_rule_file)."""
        paths = [self.root / name for name in self.selection.ignore_files]
        if not self.selection.no_ignore:
            repo = _repository(self.root)
            top, exclude = repo or (self.root, self.root / ".git" / "info" / "exclude")
            paths.append(exclude)
            paths += [
                folder / name for folder in _folders_above(self.root, top) for name in sorted(RULE_FILE_NAMES)
            ]
        root = str(self.root)
        inside = (os.path.realpath(p) for p in paths)
        rels = frozenset(
            p[len(root) + 1 :].replace(os.sep, "/") for p in inside if p.startswith(root + os.sep)
        )
        return tuple(paths), rels

    def is_rule_file(self, rel: str) -> bool:
        """True if a change to ``rel`` can change what the rules select: a .gitignore or .ignore in a
        directory the walk enters, .git/info/exclude, or one of the selection's --ignore-file files (rule
        files outside the root are :meth:`rule_files`)."""
        if rel in self._rules_at[1]:
            return True
        cut = rel.rfind("/")
        if rel[cut + 1 :] not in RULE_FILE_NAMES or self.selection.no_ignore:
            return False
        return cut < 0 or self.accepts(rel[:cut], is_dir=True)  # rules inside ignored dirs never apply

    def _load(self) -> tuple[Rules, dict[str, Specs], dict[str, bool]]:
        state = self._state
        if state is None:
            state = self._state = (
                Rules(self.root, self.selection, self.index_dir_name, strict=False),
                {},
                {},
            )
        return state

    def accepts(self, rel: str, is_dir: bool) -> bool:
        """True if walk() would descend into directory ``rel`` / consider file ``rel`` (root-relative, posix)."""
        rel = rel.strip("/")
        if not rel:
            return True
        rules, known_specs, known_dirs = self._load()

        def specs_in(prefix: str, parent: Specs) -> Specs:
            specs = known_specs.get(prefix)
            if specs is None:
                specs = known_specs[prefix] = rules.specs_in(prefix, self.root / prefix, parent, None)
            return specs

        parts = rel.split("/")
        specs = specs_in("", ())
        prefix = ""
        for name in parts[:-1]:
            here = prefix + "/" + name if prefix else name
            ok = known_dirs.get(here)
            if ok is None:
                ok = known_dirs[here] = not rules.excluded(specs, here, name, True)
            if not ok:
                return False
            prefix = here
            specs = specs_in(prefix, specs)
        if rules.excluded(specs, rel, parts[-1], is_dir):
            return False
        return is_dir or not is_secret(rel)
