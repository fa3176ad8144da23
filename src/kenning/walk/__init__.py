"""Which files of a root kenning reads: the walk, its filters, file kinds, and text decoding.

This module owns file selection (ignore files, default ignores, hidden files, secrets, globs, types, size
limits, symlinks) and turning a file's bytes into text. It yields paths relative to the root in posix form,
sorted, so the same tree always gives the same sequence. Nothing here chunks, embeds or stores.
"""

from __future__ import annotations

import difflib
import errno
import fnmatch
import os
import re
import stat
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from kenning.errors import RootError, UsageError
from kenning.types import FileEntry, FileKind, Selection, Skip
from kenning.walk.globs import expand_braces
from kenning.walk.redaction import redact

__all__ = [  # FileEntry, Selection and Skip are re-exported: callers use walk.FileEntry
    "INDEX_DIR_NAME", "TYPES", "FileEntry", "NotText", "PathFilter", "Selection", "SelectionMatcher", "Skip",
    "check_root", "check_selection", "compile_selection", "decode", "expand_braces", "holds_private_key",
    "is_secret", "kind_of", "read_bytes", "read_text", "screen", "walk",
]  # fmt: skip

INDEX_DIR_NAME = ".kenning"
MIB = 1 << 20
# Code past 1 MiB is almost always generated or vendored; prose can legitimately be large.
SIZE_LIMITS: dict[FileKind, int] = {"code": MIB, "markdown": 16 * MIB, "rst": 16 * MIB, "text": 16 * MIB}
SNIFF_BYTES = 8192


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _table(spec: str) -> dict[str, tuple[str, ...]]:
    """Parse "name: item item; name: item" into a dict (keeps the big tables below compact)."""
    pairs = (entry.split(":", 1) for entry in spec.split(";") if entry.strip())
    return {name.strip(): tuple(items.split()) for name, items in pairs}


# ripgrep's type names and globs (a subset of `rg --type-list`), plus the aliases rb/md. Matched on basenames.
TYPES: dict[str, tuple[str, ...]] = _table("""
    asciidoc: *.adoc *.asc *.asciidoc; bat: *.bat *.cmd; c: *.[chH] *.cats; cs: *.cs; css: *.css *.scss;
    clojure: *.clj *.cljc *.cljs *.cljx *.edn; cmake: *.cmake CMakeLists.txt; csv: *.csv; d: *.d;
    config: *.cfg *.conf *.config *.ini; dart: *.dart; diff: *.patch *.diff; docker: *Dockerfile*;
    cpp: *.[ChH] *.cc *.[ch]pp *.[ch]xx *.hh *.inl *.c++ *.h++ *.ipp *.tpp; elm: *.elm; erlang: *.erl *.hrl;
    elixir: *.ex *.eex *.exs *.heex *.leex; fish: *.fish; fsharp: *.fs *.fsx *.fsi; go: *.go;
    graphql: *.graphql *.graphqls; groovy: *.groovy *.gradle; haskell: *.hs *.lhs *.hsc;
    html: *.htm *.html *.ejs; java: *.java *.jsp *.jspx *.properties; jinja: *.j2 *.jinja *.jinja2;
    js: *.js *.jsx *.vue *.cjs *.mjs; json: *.json composer.lock *.sarif; jsonl: *.jsonl; julia: *.jl;
    jupyter: *.ipynb *.jpynb; kotlin: *.kt *.kts; less: *.less; log: *.log; lua: *.lua; nix: *.nix;
    make: [Gg][Nn][Uu]makefile [Mm]akefile [Gg][Nn][Uu]makefile.am [Mm]akefile.am [Gg][Nn][Uu]makefile.in
      [Mm]akefile.in *.mk *.mak;
    markdown: *.markdown *.md *.mdown *.mdwn *.mkd *.mkdn *.mdx; objc: *.h *.m; objcpp: *.h *.mm;
    ocaml: *.ml *.mli *.mll *.mly; org: *.org *.org_archive; perl: *.perl *.pl *.PL *.plh *.plx *.pm *.t;
    php: *.php *.php3 *.php4 *.php5 *.php7 *.php8 *.pht *.phtml; protobuf: *.proto; py: *.py *.pyi;
    ps: *.cdxml *.ps1 *.ps1xml *.psd1 *.psm1; r: *.R *.r *.Rmd *.Rnw; rst: *.rst; rust: *.rs;
    ruby: Gemfile *.gemspec .irbrc Rakefile config.ru *.rb *.rake; sass: *.sass *.scss; scala: *.scala *.sbt;
    sh: *.bash *.bashrc .bash_profile .bash_logout .profile *.sh *.zsh .zshrc .zshenv .zprofile *.ksh;
    sol: *.sol; sql: *.sql *.psql; svelte: *.svelte; svg: *.svg; swift: *.swift; tf: *.tf *.tfvars;
    tex: *.tex *.ltx *.cls *.sty *.bib; toml: *.toml Cargo.lock; ts: *.ts *.tsx *.cts *.mts; txt: *.txt;
    vim: *.vim .vimrc; vue: *.vue; xml: *.xml *.xml.dist *.dtd *.xsl *.xslt *.xsd *.xjb *.rng *.sch *.xhtml;
    yaml: *.yaml *.yml; zig: *.zig""")
TYPES["rb"] = TYPES["ruby"]
TYPES["md"] = TYPES["markdown"]

# Code language -> extensions (lowercase, no dot); prose kinds and unsupported formats follow.
_LANGS = _table("""
    python: py pyi pyw; rust: rs; go: go; javascript: js mjs cjs jsx; typescript: ts mts cts; tsx: tsx; java: java;
    c: c h; cpp: cc cpp cxx c++ hh hpp hxx h++ inl ipp tpp; csharp: cs; ruby: rb rake gemspec; php: php phtml;
    swift: swift; kotlin: kt kts; scala: scala sc sbt; shell: sh bash zsh ksh fish; sql: sql psql;
    css: css scss sass less; html: html htm xhtml; vue: vue; svelte: svelte; yaml: yaml yml; toml: toml;
    json: json jsonc json5 jsonl ndjson ipynb; xml: xml xsd xsl xslt svg plist; ini: ini cfg conf properties;
    proto: proto; graphql: graphql gql; hcl: tf tfvars hcl; lua: lua; perl: pl pm; r: r; dart: dart;
    elixir: ex exs; erlang: erl hrl; haskell: hs; clojure: clj cljs cljc edn; zig: zig; nim: nim; julia: jl;
    ocaml: ml mli; fsharp: fs fsx fsi; groovy: groovy gradle; objc: m mm; powershell: ps1 psm1 psd1;
    batch: bat cmd; vim: vim; nix: nix; solidity: sol; elm: elm; d: d; make: mk mak; cmake: cmake;
    dockerfile: dockerfile; starlark: bzl star; jinja: j2 jinja jinja2""")
_EXT_KIND: dict[str, tuple[FileKind, str | None]] = {
    e: ("code", lang) for lang, es in _LANGS.items() for e in es
}
_EXT_KIND |= {e: ("markdown", None) for e in _words("md markdown mdown mkd mkdn mdwn mdx")}
_EXT_KIND |= {e: ("rst", None) for e in ("rst", "rest")}
_NAME_KIND: dict[str, tuple[FileKind, str | None]] = {
    n: ("code", lang)
    for lang, ns in _table("""
        make: Makefile makefile GNUmakefile; dockerfile: Dockerfile Containerfile; groovy: Jenkinsfile;
        ruby: Gemfile Rakefile Vagrantfile Podfile Brewfile; cmake: CMakeLists.txt;
        starlark: BUILD BUILD.bazel WORKSPACE; shell: .bashrc .bash_profile .zshrc .zshenv .profile
        """).items()
    for n in ns
}
_RASTER = "png jpg jpeg gif bmp tif tiff webp ico heic heif avif psd"
_UNSUPPORTED = frozenset(
    _words(f"""{_RASTER} pdf doc docx dot dotx ppt pptx xls xlsx xlsm odt ods odp rtf epub mobi pages numbers
    zip tar gz tgz bz2 xz zst 7z rar lz lz4 jar war ear whl egg apk deb rpm dmg iso msi cab
    exe dll so dylib o a obj lib ko wasm class pyc pyo pyd bin elf beam
    mp3 mp4 m4a m4v wav flac ogg oga opus aac avi mov mkv webm wmv flv
    ttf otf woff woff2 eot db sqlite sqlite3 mdb accdb parquet arrow feather avro orc
    npy npz pkl pickle onnx safetensors pt pth ckpt h5 hdf5 gguf""")
)

DEFAULT_IGNORE_DIRS = frozenset(
    _words("""node_modules vendor thirdparty third_party external deps dist build out target coverage
    generated __pycache__ venv .venv env .tox .eggs Pods .next .nuxt .svelte-kit .turbo .vite .parcel-cache
    .cache .gradle .pytest_cache .mypy_cache .ruff_cache tmp temp logs""")
)
DEFAULT_IGNORE_FILES = _words(
    """*.lock *.lockb *-lock.json *-lock.yaml npm-shrinkwrap.json go.sum *.resolved *.map *.min.* *.bundle.*
    *.generated.* *.gen.* *.designer.* *.pb.* *_pb2.* *.g.*"""
) + tuple(f"*.{e}" for e in _RASTER.split())
SECRET_FILES = _words(
    """*.pem *.key *.p12 *.pfx *.keystore *.jks *.kdbx *.ppk id_rsa* id_dsa* id_ecdsa* id_ed25519* .env .env.*
    .envrc .netrc .pgpass .htpasswd .git-credentials .npmrc .pypirc .dockercfg credentials credentials.json
    secrets.* *.tfstate *.tfstate.*"""
)
# Committed templates documenting the variables, without values: worth finding, not secret.
SECRET_EXEMPT = frozenset(f".env.{s}" for s in ("example", "sample", "template", "dist", "defaults"))
SECRET_DIRS = frozenset({".ssh", ".gnupg"})


def _basename_re(globs: Iterable[str], flags: int = 0) -> re.Pattern[str]:
    """One regex for a set of fnmatch globs on a basename (one match call instead of one per glob)."""
    return re.compile("|".join(fnmatch.translate(g) for g in globs), flags)


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
        self._rest = _basename_re(rest) if rest else None
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


SECRET_CONTENT = "secret file (contains a private key)"
# The armor of a PEM (RFC 7468), OpenSSH, SSH2 or PGP private key, at most a few optional headers (Proc-Type,
# DEK-Info, Version, Comment), a run of base64, and the END line: a parser that only names "BEGIN RSA PRIVATE
# KEY", or a README showing a key's first line and "...", holds no key. A key's first body line is 64 characters
# or more; 40 leaves room. Line breaks may be real, escaped in a string (\n in a service-account JSON) or
# flattened to spaces (an environment variable). Every repetition is possessive and the headers are bounded, so
# the search stays linear on hostile input (an unbounded header group went quadratic on repeated BEGIN lines).
_BREAK_ATOM = rb"[ \t]|\r?\n|(?:\\r)?\\n"
_BREAK = rb"(?:%s)*+" % _BREAK_ATOM
_ARMOR_HEADER = rb"[A-Za-z][A-Za-z0-9-]*:[^\r\n\\]*+"
_PRIVATE_KEY = re.compile(
    rb"-{4,5} ?BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}"
    + rb"(?:%s%s){0,8}+%s[A-Za-z0-9+/]{40}" % (_BREAK, _ARMOR_HEADER, _BREAK)
    + rb"(?:[A-Za-z0-9+/=]|%s)*+-{4,5} ?END " % _BREAK_ATOM
)


def holds_private_key(data: bytes) -> bool:
    """True if the bytes hold a private key block, whatever the file is called (a ``deploy_key``, a key
    inside a ``.crt`` or a service-account JSON). Public keys and certificates are not matched."""
    # One substring scan of every file; the regex runs only on the rare file that names a private key.
    return data.find(b"PRIVATE KEY") >= 0 and _PRIVATE_KEY.search(data) is not None


def is_secret(rel: str) -> bool:
    """True for files that likely hold credentials; they are never indexed, whatever the selection says."""
    cut = rel.rfind("/")
    name = rel[cut + 1 :]
    if _SECRETS.match(name) and name.lower() not in SECRET_EXEMPT:
        return True
    # Every secret dir is a dot-name: most paths have none, so skip the split for them.
    parent = rel[:cut] if cut > 0 else ""
    return (parent.startswith(".") or "/." in parent) and any(p in SECRET_DIRS for p in parent.split("/"))


def kind_of(rel: str) -> tuple[FileKind, str | None] | None:
    """The kind (and code language) of a path by its name; None for formats kenning does not index."""
    name = rel.rsplit("/", 1)[-1]
    if name in _NAME_KIND:
        return _NAME_KIND[name]
    if name.startswith(("Dockerfile.", "Containerfile.")):
        return ("code", "dockerfile")
    stem, dot, ext = name.lstrip(".").rpartition(".")
    ext = ext.lower() if dot and stem else ""  # ".bashrc" and "README" have no extension
    if ext in _UNSUPPORTED:
        return None
    # Unknown extensions and extensionless names (README, LICENSE, scripts) count as text; the binary
    # sniff in read_text is what rejects them if they are not.
    return _EXT_KIND.get(ext, ("text", None))


# Where test code lives by the conventions of the common ecosystems: pytest and unittest, Go, JavaScript and
# TypeScript (jest, mocha, vitest, cypress), Ruby (rspec, minitest), Java, Kotlin and C# (JUnit, NUnit), Android,
# Perl and git (t/). Not `spec/` (as often a specification as rspec's, whose files say `_spec` anyway) nor
# `testing/` (numpy.testing, Go's testing: library code).
TEST_DIRS = frozenset({"test", "tests", "testdata", "__tests__", "__mocks__", "e2e", "t", "androidtest"})
_TEST_NAME = re.compile(
    r"(?:test_.*|.*[._-]tests?|.*[._-]spec|.*\.cy|conftest|.*[A-Za-z0-9]Tests?|tests?)\.[A-Za-z0-9]+$"
)


def is_test_path(rel: str) -> bool:
    """True for a file that is part of a test suite, by its directory or its name (``tests/x.py``,
    ``t/unit/y.py``, ``test_z.py``, ``z_test.go``, ``z.spec.ts``, ``ZTest.java``, ``conftest.py``)."""
    *dirs, name = rel.split("/")
    return _TEST_NAME.match(name) is not None or any(d.lower() in TEST_DIRS for d in dirs)


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


class SelectionMatcher:
    """The glob, iglob, type and type-not filters of a Selection, compiled once.

    These filters only narrow what the ignore rules let through; they never bring back ignored, hidden or
    secret files (unlike ripgrep, where ``-g`` overrides ignore files). Globs and types must both pass.
    """

    def __init__(self, selection: Selection) -> None:
        # (regex, include) per glob in order; iglobs come after globs, as in ripgrep. Gitignore-style
        # regexes also match descendants of a matched directory, so "!docs/*" excludes docs/a/b.md too.
        self._globs: list[tuple[re.Pattern[str], bool]] = []
        for globs, flags in ((selection.globs, 0), (selection.iglobs, re.IGNORECASE)):
            for glob in globs:
                # A glob's alternatives sit where it stood, so "later globs win" holds between globs.
                for alt in expand_braces(glob):
                    try:
                        pat = GitIgnoreSpecPattern(alt)
                    except (ValueError, re.error) as exc:  # re.error: a reversed range, "[z-a]"
                        # re.error's position would point into pathspec's regex, not into the glob
                        why = exc.msg if isinstance(exc, re.error) else exc
                        raise UsageError(f"invalid glob {glob!r} ({why}); fix or drop the --glob") from exc
                    if pat.include is not None and pat.regex is not None:
                        self._globs.append((re.compile(pat.regex.pattern, flags), pat.include))
                    elif alt.strip() and not alt.startswith("#"):
                        # pathspec drops a glob it cannot read ("[/]"): it would select everything
                        raise UsageError(
                            f"invalid glob {glob!r} (it can match no path); fix or drop the --glob"
                        )
        self._whitelist = any(inc for _, inc in self._globs)
        self._types = self._type_re(selection.types)
        self._types_not = self._type_re(selection.types_not)
        self.trivial = not (self._globs or self._types or self._types_not)

    @staticmethod
    def _type_re(names: tuple[str, ...]) -> re.Pattern[str] | None:
        unknown = [n for n in names if n not in TYPES]
        if unknown:
            # the whole list: no command prints it (the hint named a `--type-list` that did not exist)
            close = difflib.get_close_matches(unknown[0], TYPES, n=1, cutoff=0.5)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(
                f"unknown file type {unknown[0]!r}; {guess}valid types: {', '.join(sorted(TYPES))}"
            )
        return _basename_re(g for n in names for g in TYPES[n]) if names else None

    def _last_glob(self, path: str) -> bool | None:
        for regex, include in reversed(self._globs):
            if regex.match(path):
                return include
        return None

    def prunes_dir(self, rel: str) -> bool:
        """True if an exclude glob is the last glob matching the directory (include globs never prune)."""
        return bool(self._globs) and self._last_glob(rel + "/") is False

    def matches_file(self, rel: str) -> bool:
        """The file test alone, for a walk that has already pruned excluded directories."""
        if self.trivial:
            return True
        verdict = self._last_glob(rel)
        if verdict is False or (verdict is None and self._whitelist):
            return False
        name = rel.rsplit("/", 1)[-1]
        if self._types is not None and not self._types.match(name):
            return False
        return not (self._types_not is not None and self._types_not.match(name))

    def matches(self, rel: str) -> bool:
        """True if an indexed path passes the filters, its directories included (as the walk prunes)."""
        parts = rel.split("/")
        dirs = ("/".join(parts[:i]) for i in range(1, len(parts)))
        return self.matches_file(rel) and not any(self.prunes_dir(d) for d in dirs)


def compile_selection(selection: Selection) -> SelectionMatcher:
    """Compile the selection's globs and types; UsageError on an unknown type or a bad glob."""
    return SelectionMatcher(selection)


def check_selection(base: Path, selection: Selection) -> None:
    """UsageError unless a walk of `base` could use the selection: its globs and types compile and each
    --ignore-file exists. Cheap, so a selection is checked before anything stores it."""
    compile_selection(selection)
    for name in selection.ignore_files:
        _ignore_file_path(base, name)


def _ignore_file_path(base: Path, name: str) -> Path:
    path = base / name
    if not path.is_file():
        raise UsageError(f"ignore file {path} not found; pass an existing file (relative to the root)")
    return path


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


_Specs = tuple[tuple[str, _IgnoreFile], ...]  # (directory rel, its ignore files), root first

# _Rules.excluded's answers: left out by the default ignore list, or for any other silent reason.
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


def _ignored(specs: _Specs, rel: str, is_dir: bool) -> bool | None:
    """The verdict of the nearest ignore file with a matching rule (deeper files override shallower)."""
    probe = rel + "/" if is_dir else rel  # a trailing slash lets dir-only rules ("build/") match
    for base, spec in reversed(specs):
        verdict = spec.verdict(probe[len(base) + 1 :] if base else probe)
        if verdict is not None:
            return verdict
    return None


class _Rules:
    """The walk's per-entry rules, shared by walk() and PathFilter so the two cannot drift apart.

    ``strict`` refuses a missing --ignore-file (the walk reports it as a usage error); a long-lived watcher
    treats it as empty instead, since the file can vanish while it runs and the next walk will say so.
    """

    def __init__(self, base: Path, selection: Selection, index_dir_name: str, *, strict: bool) -> None:
        self.selection = selection
        self.matcher = compile_selection(selection)
        self.never = (".git", index_dir_name)
        # Explicit --ignore-file rules stay on with no_ignore, as in ripgrep: the user named them. They have
        # the lowest precedence, then .git/info/exclude, then the .gitignore and .ignore of each directory
        # from the repository's top down to the root, nearer ones winning, as git and ripgrep rank them.
        explicit: list[str] = []
        for name in selection.ignore_files:
            try:
                explicit += _read_lines(_ignore_file_path(base, name))
            except UsageError:
                if strict:
                    raise
        self.outer: _Specs = (("", _IgnoreFile(explicit)),) if explicit else ()
        self.root_lines: list[str] = []
        repo = None if selection.no_ignore else _repository(base)
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

    def specs_in(self, prefix: str, dirpath: Path, specs: _Specs, names: Container[str] | None) -> _Specs:
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

    def excluded(self, specs: _Specs, rel: str, name: str, is_dir: bool) -> str | None:
        """Why the walk leaves the entry out silently (:data:`BY_DEFAULT` for the default ignore list, else
        "skipped" for never-dirs, hidden, ignored or filtered out), or None when it keeps it. A string, not a
        bool, so the walk can tell the user about the default list's prunes at no extra cost."""
        if name in self.never or (name[0] == "." and not self.selection.hidden):
            return SKIPPED
        verdict = _ignored(specs, rel, is_dir) if specs else None
        # The defaults rank below every ignore file, so "!vendor/" in a .gitignore brings vendor back.
        if (
            verdict is None
            and not self.selection.no_ignore
            and ((name in DEFAULT_IGNORE_DIRS) if is_dir else _DEFAULT_FILES.match(name))
        ):
            # a folder the user's own globs leave out as well is theirs to know of, not the list's doing
            return SKIPPED if is_dir and self.matcher.prunes_dir(rel) else BY_DEFAULT
        if verdict:
            return SKIPPED
        if self.matcher.prunes_dir(rel) if is_dir else not self.matcher.matches_file(rel):
            return SKIPPED
        return None


def walk(
    root: Path | str,
    selection: Selection,
    *,
    index_dir_name: str = INDEX_DIR_NAME,
    on_skip: Callable[[Skip], None] | None = None,
    on_prune: Callable[[str], None] | None = None,
    under: Iterable[str] = (),
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
    as the whole walk's would.
    """
    base = check_root(root)
    rules = _Rules(base, selection, index_dir_name, strict=True)
    real_root = str(base)
    never = rules.never
    scopes = frozenset(s.strip("/") for s in under)
    if "" in scopes:
        scopes = frozenset()  # the root itself: the whole walk
    on_the_way = frozenset(s[:i] for s in scopes for i, c in enumerate(s) if c == "/")

    def walk_dir(
        prefix: str, dirpath: Path, specs: _Specs, chain: frozenset[str], inside: bool
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
            why = rules.excluded(specs, rel, name, is_dir)
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
        self._state: tuple[_Rules, dict[str, _Specs], dict[str, bool]] | None = None
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

    def _load(self) -> tuple[_Rules, dict[str, _Specs], dict[str, bool]]:
        state = self._state
        if state is None:
            state = self._state = (
                _Rules(self.root, self.selection, self.index_dir_name, strict=False),
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

        def specs_in(prefix: str, parent: _Specs) -> _Specs:
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


@dataclass(frozen=True, slots=True)
class NotText:
    """Why read_text gave no text: "binary", "not text", "empty", a size or an OS error."""

    reason: str


# Control bytes that do not occur in text; \t \n \r \f \b and ESC (ANSI colour in logs) do.
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\b\x1b") + b"\x7f"


NOT_REGULAR = "not a regular file now (a FIFO, socket or device took its place since the walk)"
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def read_bytes(path: Path | str, *, max_bytes: int | None = None, follow: bool = True) -> bytes | NotText:
    """The file's bytes, or NotText saying why they cannot be had (unreadable, past the size limit, no longer
    a regular file).

    Every read of a walked file comes here: the walk judged the path, but what sits there may have changed
    since. A FIFO put in a file's place would block a plain open() for good (no writer ever comes), so the
    open never blocks, and what was opened is judged by its descriptor before a byte is read. ``follow=False``
    (a walk that does not follow links, which then never yields one) also refuses a link put in its place.
    """
    flags = _READ_FLAGS if follow else _READ_FLAGS | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            return NotText("a symlink now (it was a file when the walk listed it)")
        return NotText(f"cannot read ({exc.strerror or exc})")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return NotText(NOT_REGULAR)
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    except OSError as exc:
        return NotText(f"cannot read ({exc.strerror or exc})")
    finally:
        os.close(fd)
    if max_bytes is not None and len(data) > max_bytes:
        return NotText(f"past the {max_bytes}-byte limit (--max-filesize)")
    return data


def read_text(path: Path | str, *, max_bytes: int | None = None, follow: bool = True) -> str | NotText:
    """The file's text as kenning may show it (see :func:`screen`), or NotText saying why there is none (read
    as :func:`read_bytes`)."""
    data = read_bytes(path, max_bytes=max_bytes, follow=follow)
    return data if isinstance(data, NotText) else screen(data)


def screen(data: bytes) -> str | NotText:
    """The one secret rule for a file's bytes: every surface that reads a file (index, grep, symbols, and so
    the daemon and MCP, which call them) gets its text here, so none can show what another refuses.

    A file holding a private key gives no text at all (NotText(SECRET_CONTENT)); any other is decoded
    (:func:`decode`) and its token-shaped secrets are replaced (:func:`kenning.walk.redaction.redact`), line
    numbers unchanged.
    """
    if holds_private_key(data):
        return NotText(SECRET_CONTENT)
    text = decode(data)
    if isinstance(text, NotText):
        return text
    return redact(
        text, None if data.startswith(_UTF16_BOMS) else data
    )  # UTF-16 bytes do not hold ASCII hints


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode(data: bytes) -> str | NotText:
    """Bytes to text with line ends normalised to ``\\n``, or NotText ("empty", "binary", "not text").

    UTF-8 first (BOM stripped), then UTF-16 if it has a BOM, then cp1252, then latin-1, so legacy 8-bit files
    keep their accented letters instead of turning into U+FFFD.
    """
    if not data:
        return NotText("empty")
    if data.startswith(_UTF16_BOMS):  # UTF-16 has NULs, so decode before the sniff
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return NotText("not text")
    else:
        head = data[:SNIFF_BYTES]
        if b"\0" in head or len(head) - len(head.translate(None, _CONTROL)) > 0.3 * len(head):
            return NotText("binary")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            try:
                text = data.decode("cp1252")
            except UnicodeDecodeError:
                text = data.decode("latin-1")  # maps every byte, never fails
    if text.count("\ufffd") > 0.01 * len(text):
        return NotText("not text")
    return text.replace("\r\n", "\n").replace("\r", "\n")
