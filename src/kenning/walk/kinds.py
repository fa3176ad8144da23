"""What a file is by its name: its kind and code language, ripgrep's type names, test paths, size limits.

This module owns the tables that name formats (extensions and well-known file names to a kind, the formats
kenning never indexes, the ``--type`` names) and the per-kind size limits. It judges names only; what the
bytes hold is :mod:`kenning.walk.read`'s to say.
"""

from __future__ import annotations

import re

from kenning.types import FileKind

MIB = 1 << 20
# Code past 1 MiB is almost always generated or vendored; prose can legitimately be large.
SIZE_LIMITS: dict[FileKind, int] = {"code": MIB, "markdown": 16 * MIB, "rst": 16 * MIB, "text": 16 * MIB}


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
    json: json jsonc json5 jsonl ndjson ipynb; xml: xml xsd xsl xslt plist; ini: ini cfg conf properties;
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
# Images are unsupported, and also on the default ignore list (kenning.walk.rules), so the walk leaves them out
# silently instead of reporting each one. SVG is XML text, but drawing: path data and coordinates, which only
# crowd out passages a search is for.
RASTER = "png jpg jpeg gif bmp tif tiff webp ico heic heif avif psd svg svgz"
_UNSUPPORTED = frozenset(
    _words(f"""{RASTER} pdf doc docx dot dotx ppt pptx xls xlsx xlsm odt ods odp rtf epub mobi pages numbers
    zip tar gz tgz bz2 xz zst 7z rar lz lz4 jar war ear whl egg apk deb rpm dmg iso msi cab
    exe dll so dylib o a obj lib ko wasm class pyc pyo pyd bin elf beam
    mp3 mp4 m4a m4v wav flac ogg oga opus aac avi mov mkv webm wmv flv
    ttf otf woff woff2 eot db sqlite sqlite3 mdb accdb parquet arrow feather avro orc
    npy npz pkl pickle onnx safetensors pt pth ckpt h5 hdf5 gguf""")
)


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
    return is_test_name(name) or any(d.lower() in TEST_DIRS for d in dirs)


def is_test_name(name: str) -> bool:
    """True for a file name a test suite's file has (``test_z.py``, ``z_test.go``, ``ZTest.java``), wherever
    it is: `is_test_path` less the directories, for a caller that judges a folder once for its many files."""
    return _TEST_NAME.match(name) is not None
