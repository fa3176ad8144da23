"""Materialise the multi-language development code set of issue 18: pinned package sources + hand-written questions.

    python bench/codeset_multi.py [--out bench/.work/sets] [--names cs-logrus,...] [--force] [--index]

Each repository is one set `cs-<name>` (one index per repository, as a user would have it). Its sources come from a
package registry, pinned by exact version and the sha256 of the downloaded archive (checked before unpacking):
PyPI sdists (`pip download --no-binary`), npm tarballs (`npm pack`), and Debian packages (`apt-get download`, then
unpacked with `dpkg-deb -x`: `golang-*-dev` ship full Go sources, `librust-*-dev` full crates, `ruby-*` and `php-*`
their library trees). The files under the package's source root with a code or documentation suffix are copied to
`<out>/cs-<name>/corpus/`, paths kept; builds (`dist/`), Debian packaging and checksums are left out. The questions,
file-level qrels and span-level qrels written for each repository live in `bench/sets/codeset/<name>/` and are
copied next to the corpus (`queries.jsonl`, `qrels.jsonl`, `spans.jsonl`; `spans.jsonl` holds `corpus/<path>:a-b`
keys for `shared/eval/score.py --match span`). See bench/sets/README.md.

Idempotent like bench/codeset.py: a marker records the pinned source; when it matches, the corpus is left alone.
`--index` also builds kenning's default index of each set into the quality bench's cache (the same key
bench/quality/run.py computes), niced, so a later run only searches.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from codeset import copy_set_files

HERE = Path(__file__).resolve().parent
SETS_SRC = HERE / "sets" / "codeset"
DEFAULT_OUT = HERE / ".work" / "sets"
MARKER = ".codeset.json"
SET_FILES = ("queries.jsonl", "qrels.jsonl", "spans.jsonl")
CODE_SUFFIXES = (".py", ".go", ".rs", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".rb", ".php")
DOC_SUFFIXES = (".md", ".rst")
SKIP_PARTS = ("dist", "debian", "node_modules", ".git", "__pycache__")
SKIP_NAMES = (".cargo-checksum.json", ".cargo_vcs_info.json", "Cargo.toml.orig")
PREFIX = "cs-"


@dataclass(frozen=True)
class Repo:
    name: str
    language: str
    registry: str  # "pypi" (sdist), "npm" (tarball), "debian" (.deb)
    package: str
    version: str
    sha256: str  # of the downloaded archive
    root: str  # the source tree inside the archive
    include: tuple[str, ...] = ()  # paths under root to keep (all when empty)
    # (archive path, corpus path) of docs the package ships elsewhere; a .gz is unpacked
    extra: tuple[tuple[str, str], ...] = ()
    split: str = "dev"  # "dev" or "heldout"
    licence: str = ""
    upstream: str = ""

    @property
    def set_name(self) -> str:
        return PREFIX + self.name

    @property
    def marker(self) -> dict[str, object]:
        d = asdict(self)
        keys = ("registry", "package", "version", "sha256", "root", "include", "extra")
        return json.loads(json.dumps({k: d[k] for k in keys}))  # tuples as lists, as read back


GO = "usr/share/gocode/src/github.com"
CARGO = "usr/share/cargo/registry"
REPOS: dict[str, Repo] = {
    r.name: r
    for r in (
        Repo("marshmallow", "python", "pypi", "marshmallow", "4.4.0",
             "9e6ffa8511012ca89732324c1c253efd7b4d35632dcbdf80aa793fe01804af3e", "marshmallow-4.4.0",
             ("src", "docs", "tests", "README.rst", "CHANGELOG.rst"), licence="MIT",
             upstream="github.com/marshmallow-code/marshmallow"),
        Repo("jinja", "python", "pypi", "jinja2", "3.1.6",
             "0137fb05990d35f1275a587e9aee6d56da821fc83491a0fb838183be43f66d6d", "jinja2-3.1.6",
             ("src", "docs", "tests", "README.md"), split="heldout", licence="BSD-3-Clause",
             upstream="github.com/pallets/jinja"),
        Repo("logrus", "go", "debian", "golang-github-sirupsen-logrus-dev", "1.9.0-1",
             "51fb87b05452e96be38b97c03d5f997f6ce3a144421f911338d6c4ea2e8aa118", f"{GO}/sirupsen/logrus",
             extra=(("usr/share/doc/golang-github-sirupsen-logrus-dev/README.md.gz", "README.md"),),
             licence="MIT", upstream="github.com/sirupsen/logrus"),
        Repo("goldmark", "go", "debian", "golang-github-yuin-goldmark-dev", "1.5.4-1",
             "c52d83484318f870494e3170646f7840a1085fd8c7ba77da75a9bb83d196ecf7", f"{GO}/yuin/goldmark",
             licence="MIT", upstream="github.com/yuin/goldmark"),
        Repo("echo", "go", "debian", "golang-github-labstack-echo-dev", "4.2.1-3",
             "3ec383b8cb239c415d9ab83b3e8871524931f6da13e75e41baf580b74b3599ef", f"{GO}/labstack/echo",
             split="heldout", licence="MIT", upstream="github.com/labstack/echo"),
        Repo("regex-syntax", "rust", "debian", "librust-regex-syntax-dev", "0.6.27-1",
             "16c9879e07d6f9c6b2618906126d17e51ec8b04bced0fe3bb0cf0f3062f8a353", f"{CARGO}/regex-syntax-0.6.27",
             ("src", "README.md"), licence="MIT OR Apache-2.0", upstream="github.com/rust-lang/regex"),
        Repo("hyper", "rust", "debian", "librust-hyper-dev", "0.14.19-1",
             "aece343fc0a52b2bc5f479962d8ed191ee4ac75716224cfdc693515234e2beef", f"{CARGO}/hyper-0.14.19",
             ("src", "README.md"), split="heldout", licence="MIT", upstream="github.com/hyperium/hyper"),
        Repo("mocha", "javascript", "npm", "mocha", "12.0.3",
             "3a93ba09b4b5f591a947ef5226ca9ae76220b124fe610dbcd5b76eb320512919", "package",
             ("lib", "bin", "index.js", "browser-entry.js", "README.md"), licence="MIT",
             upstream="github.com/mochajs/mocha"),
        Repo("knex", "javascript", "npm", "knex", "3.3.0",
             "6f017ec9d4b8d665c739fa5ed20833bc96e61bc3903ea7ab6ad8498c926f1cc5", "package",
             ("lib", "bin", "knex.js", "README.md", "UPGRADING.md"), licence="MIT",
             upstream="github.com/knex/knex"),
        Repo("rxjs", "typescript", "npm", "rxjs", "7.8.2",
             "2312f8ffd9726ffd7bd53ea12c5f13663d09a3dc3326f448c70b88f5ef6fac82", "package",
             ("src", "README.md"), licence="Apache-2.0", upstream="github.com/ReactiveX/rxjs"),
        Repo("mobx", "typescript", "npm", "mobx", "7.1.3",
             "bbd07665d8851ee01df2fd4e12db106c60fd878839610dd8b899548969625616", "package",
             ("src", "README.md"), split="heldout", licence="MIT", upstream="github.com/mobxjs/mobx"),
        Repo("thor", "ruby", "debian", "ruby-thor", "1.2.1-2",
             "509715d16039ee7336531718e2497d0f81ae125b9ee53f321dd909c2f03fd2e1",
             "usr/share/rubygems-integration/all/gems/thor-1.2.1", ("lib",),
             extra=(("usr/share/doc/ruby-thor/README.md", "README.md"),), licence="MIT",
             upstream="github.com/rails/thor"),
        Repo("commonmark", "php", "debian", "php-league-commonmark", "2.3.9-1+deb12u1",
             "c702ba9fbe6727f011f25eba2bdb89871b56f37d811092e51089816df8eecd81", "usr/share/php/League/CommonMark",
             extra=(("usr/share/doc/php-league-commonmark/README.md.gz", "README.md"),), split="heldout",
             licence="BSD-3-Clause", upstream="github.com/thephpleague/commonmark"),
    )
}  # fmt: skip


def set_names() -> list[str]:
    return [r.set_name for r in REPOS.values()]


def repo_of(set_name: str) -> Repo:
    return REPOS[set_name.removeprefix(PREFIX)]


def ensure(out: Path, name: str, *, force: bool = False) -> Path:
    """Make sure `<out>/cs-<name>` holds the corpus and the question files; return that folder."""
    repo = REPOS[name.removeprefix(PREFIX)]
    folder = Path(out).resolve() / repo.set_name
    corpus = folder / "corpus"
    marker = folder / MARKER
    if force or not corpus.is_dir() or _read(marker) != repo.marker:
        _build(repo, folder)
        marker.write_text(json.dumps(repo.marker, indent=2) + "\n")
    copy_set_files(SETS_SRC / repo.name, folder, SET_FILES)
    return folder


def _read(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def download(repo: Repo, dest: Path) -> Path:
    """Fetch the pinned archive with the registry's own client into `dest`; check its sha256."""
    dest.mkdir(parents=True, exist_ok=True)
    if repo.registry == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
               f"{repo.package}=={repo.version}", "-d", str(dest)]  # fmt: skip
    elif repo.registry == "npm":
        cmd = ["npm", "pack", "--silent", f"{repo.package}@{repo.version}", "--pack-destination", str(dest)]
    elif repo.registry == "debian":
        cmd = ["apt-get", "download", "-q", f"{repo.package}={repo.version}"]
    else:
        raise ValueError(repo.registry)
    subprocess.run(cmd, check=True, cwd=dest, stdout=subprocess.DEVNULL)
    found = sorted(p for p in dest.iterdir() if p.is_file())
    if len(found) != 1:
        raise RuntimeError(f"expected one archive for {repo.package} {repo.version}, got {found}")
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != repo.sha256:
        raise RuntimeError(f"{found[0].name}: sha256 {digest} does not match the pinned {repo.sha256}")
    return found[0]


def unpack(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    if archive.suffix == ".deb":
        subprocess.run(["dpkg-deb", "-x", str(archive), str(dest)], check=True)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")


def keep(rel: PurePosixPath) -> bool:
    if any(part in SKIP_PARTS or part.startswith(".") for part in rel.parts[:-1]) or rel.name in SKIP_NAMES:
        return False
    return rel.suffix in CODE_SUFFIXES + DOC_SUFFIXES and not rel.name.endswith((".d.ts", ".min.js"))


def _build(repo: Repo, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"codeset-{repo.name}-", dir=folder.parent) as tmp:
        tmp_path = Path(tmp)
        archive = download(repo, tmp_path / "dl")
        unpacked = tmp_path / "x"
        unpack(archive, unpacked)
        root = unpacked / repo.root
        staged = tmp_path / "corpus"
        count = 0
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fname in sorted(filenames):
                path = Path(dirpath) / fname
                rel = PurePosixPath(path.relative_to(root).as_posix())
                if repo.include and not any(
                    rel == PurePosixPath(i) or rel.is_relative_to(i) for i in repo.include
                ):
                    continue
                if not keep(rel) or path.is_symlink():
                    continue
                target = staged.joinpath(*rel.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                count += 1
        for src, dst in repo.extra:
            data = (unpacked / src).read_bytes()
            (staged / dst).write_bytes(gzip.decompress(data) if src.endswith(".gz") else data)
            count += 1
        corpus = folder / "corpus"
        (folder / MARKER).unlink(missing_ok=True)
        if corpus.exists():
            shutil.rmtree(corpus)
        staged.rename(corpus)
    print(f"[codeset] {repo.package} {repo.version}: {count} files in {corpus}", file=sys.stderr)


def prebuild_indexes(out: Path, names: list[str], cache: Path) -> None:
    """Build kenning's default index of each set where bench/quality/run.py will look for it."""
    sys.path[:0] = [str(HERE / "quality"), str(HERE)]
    from kenning_run import DEFAULT, open_index

    from sets import resolve

    for name in names:
        s = resolve(name, HERE / ".work")
        engine, meta = open_index(s, DEFAULT, cache, fresh=False)
        engine.close()
        print(
            f"[codeset] {name}: {meta['passages']} passages, index {meta['index_seconds']:.0f}s",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--names", default=",".join(set_names()))
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--index", action="store_true", help="also build kenning's default index of each set")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    args = parser.parse_args(argv)
    names = [n if n.startswith(PREFIX) else PREFIX + n for n in args.names.split(",") if n]
    for name in names:
        print(ensure(Path(args.out), name, force=args.force))
    if args.index:
        prebuild_indexes(Path(args.out), names, Path(args.cache).expanduser())


if __name__ == "__main__":
    main()
