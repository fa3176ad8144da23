"""Evaluation and training sets over public git repositories, each pinned by commit.

    python bench/gitsets.py [--family questions|mined|...] [--names NAME,...] [--list]

A set lives in `bench/sets/<family>/<name>/`: `source.json` pins its repository and commit, and the judged queries
sit beside it in the layout of ../shared/eval (`queries.jsonl`, `qrels.jsonl` by file, `spans.jsonl` by line span
where the judgements have lines). `source.json`:

    {"repo": "owner/name", "commit": "<40 hex digits>", "language": "python", "split": "dev",
     "licence": "MIT", "include": ["src", "docs"]}

`split` is `train` (the ranker learns from it), `dev` (tune and report) or `test` (report only; never looked at
per query while tuning). `include` (optional) keeps only those paths of the tree.

Materialising writes `bench/.work/sets/<family>-<name>/corpus/` from git's objects at the pinned commit (the
whole tree as a checkout has it, export-ignore or not, minus files over MAX_FILE bytes and blobs the mirror
lacks), plus the query files. The repository is read from a local mirror: `$KENNING_MIRRORS/<owner>+<name>/repo`
(a bare git directory, as the session tool's fetch leaves it; default /work/.mirror), else
`bench/.work/mirrors/<owner>+<name>.git`, cloned from GitHub when missing. A marker records the commit, so a
second run leaves the corpus alone. Nothing fetched is committed: only the scripts, the pins and the judgements
are.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS_SRC = HERE / "sets"
DEFAULT_OUT = HERE / ".work" / "sets"
MIRRORS = Path(os.environ.get("KENNING_MIRRORS", "/work/.mirror"))
LOCAL_MIRRORS = HERE / ".work" / "mirrors"
MARKER = ".gitset.json"
SET_FILES = ("queries.jsonl", "qrels.jsonl", "spans.jsonl")
MAX_FILE = 2_000_000  # bytes: a generated blob or a data dump is no passage a person asks about
FAMILIES = ("questions", "mined", "related", "asked")


@dataclass(frozen=True)
class Source:
    family: str
    name: str
    repo: str
    commit: str
    language: str
    split: str
    licence: str = ""
    include: tuple[str, ...] = ()
    # another set of the same pin whose materialised corpus, and so whose cached index, this set reads: written
    # questions over a mined repository need no second copy of it, nor a second index
    shares: str = ""

    @property
    def set_name(self) -> str:
        return f"{self.family}-{self.name}"

    @property
    def folder(self) -> Path:
        return SETS_SRC / self.family / self.name


def load(family: str, name: str) -> Source:
    raw = json.loads((SETS_SRC / family / name / "source.json").read_text())
    return Source(
        family,
        name,
        raw["repo"],
        raw["commit"],
        raw["language"],
        raw["split"],
        raw.get("licence", ""),
        tuple(raw.get("include", ())),
        raw.get("shares", ""),
    )


def sources(family: str | None = None) -> list[Source]:
    """Every pinned set (of one family), sorted by name."""
    out = []
    for fam in [family] if family else FAMILIES:
        base = SETS_SRC / fam
        if base.is_dir():
            out += [load(fam, p.parent.name) for p in sorted(base.glob("*/source.json"))]
    return out


def set_names(family: str | None = None, split: str | None = None) -> list[str]:
    return [s.set_name for s in sources(family) if split is None or s.split == split]


def by_set_name(set_name: str) -> Source | None:
    family, _, name = set_name.partition("-")
    if family in FAMILIES and (SETS_SRC / family / name / "source.json").is_file():
        return load(family, name)
    return None


def mirror(repo: str) -> Path:
    """A bare git directory holding the repository's history."""
    key = repo.replace("/", "+")
    for candidate in (MIRRORS / key / "repo", LOCAL_MIRRORS / f"{key}.git"):
        if (candidate / "HEAD").is_file():
            return candidate
    target = LOCAL_MIRRORS / f"{key}.git"
    target.parent.mkdir(parents=True, exist_ok=True)
    url = f"https://github.com/{repo}.git"
    print(f"cloning {url} (no local mirror)", file=sys.stderr)
    subprocess.run(["git", "clone", "--bare", "--quiet", url, str(target)], check=True)
    return target


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(mirror(repo)), *args], check=True, capture_output=True
    ).stdout


def extract(source: Source, corpus: Path) -> int:
    """Write the pinned tree (or its `include` paths) into `corpus`; the number of files written.

    Read from git's objects rather than `git archive`: an archive honours `export-ignore` (Carbon's
    .gitattributes drops its tests, which a checkout has) and fails whole on one blob a snapshot lacks (a
    mirror leaves out files of 4 MiB and more). Symlinks and submodules are skipped, as are missing blobs.
    """
    listing = git(source.repo, "ls-tree", "-r", "-l", "-z", source.commit, "--", *source.include)
    wanted: list[tuple[str, str]] = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, oid, size = meta.split()
        if kind != b"blob" or mode not in (b"100644", b"100755"):
            continue
        if not size.isdigit() or int(size) > MAX_FILE:  # ls-tree says BAD for a blob the mirror lacks
            continue
        rel = Path(raw_path.decode("utf-8", "surrogateescape"))
        if rel.is_absolute() or ".." in rel.parts:
            continue
        wanted.append((oid.decode(), str(rel)))
    batch = subprocess.run(
        ["git", "--git-dir", str(mirror(source.repo)), "cat-file", "--batch"],
        input=b"".join(oid.encode() + b"\n" for oid, _ in wanted),
        check=True,
        capture_output=True,
    ).stdout
    stream = io.BytesIO(batch)
    written = 0
    for _oid, rel_path in wanted:
        header = stream.readline().split()
        if len(header) != 3:  # "<oid> missing": the snapshot lacks this blob
            continue
        data = stream.read(int(header[2]))
        stream.read(1)  # the newline after each object
        target = corpus / rel_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1
    return written


def corpus_set(set_name: str) -> str:
    """The set whose materialised corpus (and cached index) `set_name` reads: its own, or the one it shares."""
    source = by_set_name(set_name)
    return source.shares if source is not None and source.shares else set_name


def ensure(set_name: str, out: Path = DEFAULT_OUT, *, force: bool = False, mine: bool = True) -> Path:
    """`<out>/<family>-<name>` with the corpus at the pinned commit and the query files; that folder. A set that
    shares another's corpus gets only its query files there; its corpus is `<out>/<corpus_set(set_name)>/corpus`.

    The `mined` family has no written query files: bench/mine.py writes them from the pinned history, here when
    they are missing or were mined by other rules (`mine=False` leaves that to the caller).
    """
    source = by_set_name(set_name)
    if source is None:
        raise SystemExit(
            f"unknown git set {set_name!r}: see bench/sets/{{{','.join(FAMILIES)}}}/*/source.json"
        )
    folder = Path(out).resolve() / set_name
    if source.shares:
        ensure(source.shares, out, force=force, mine=False)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        corpus = folder / "corpus"
        marker = folder / MARKER
        pin = {"repo": source.repo, "commit": source.commit, "include": list(source.include)}
        try:
            current = json.loads(marker.read_text())
        except (OSError, ValueError):
            current = None
        if force or current != pin or not corpus.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            corpus.mkdir(parents=True)
            n = extract(source, corpus)
            marker.write_text(json.dumps(pin, indent=2) + "\n")
            print(f"[{set_name}] {n} files at {source.repo}@{source.commit[:10]}", file=sys.stderr)
    for name in SET_FILES:
        src = source.folder / name
        if src.is_file():
            shutil.copyfile(src, folder / name)
    if mine and source.family == "mined":
        import mine as miner  # the miner imports this module: import it when first needed

        if not miner.is_mined(source, folder):
            miner.mine_set(source, folder)
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES)
    parser.add_argument("--names", default="", help="set names (family-name), comma-separated")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--force", action="store_true")
    parser.add_argument(
        "--list", action="store_true", help="list the sets and their pins, materialise nothing"
    )
    args = parser.parse_args(argv)
    picked = [n for n in args.names.split(",") if n] or set_names(args.family)
    for name in picked:
        if args.list:
            s = by_set_name(name)
            assert s is not None
            print(f"{name}\t{s.repo}@{s.commit[:12]}\t{s.language}\t{s.split}")
        else:
            print(ensure(name, Path(args.out), force=args.force))


if __name__ == "__main__":
    main()
