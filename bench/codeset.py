"""Materialise a code-repository retrieval set: a pinned PyPI package's source as the corpus, plus hand-written queries.

    python bench/codeset.py [--out bench/.work/sets] [--name rich] [--force]

The shared evaluation sets have no real code repository (CoSQA is one function per file), so this script builds one
from a pure-Python, permissively licensed package pinned to an exact version and wheel hash. Its wheel is fetched
with pip (the only network use), unpacked, and its `.py` files (plus `.md`/`.rst` files and the package's README,
taken from the wheel metadata) are copied under `<out>/<name>/corpus/` with their relative paths kept. The queries,
qrels and README written for the set live in `bench/sets/<name>/` and are copied next to the corpus, so the folder
has the layout `shared/eval/score.py` expects (`qrels.jsonl` keys are `corpus/<relpath>`).

Idempotent: a marker file records package, version and wheel hash; when it matches, the corpus is left alone and
only the (cheap) query files are refreshed. From Python: `ensure_codeset(out) -> Path` returns the set folder.
"""

from __future__ import annotations

import argparse
import email
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
SETS_SRC = HERE / "sets"  # hand-written queries.jsonl / qrels.jsonl / README.md per set
DEFAULT_OUT = HERE / ".work" / "sets"
MARKER = ".codeset.json"
SET_FILES = ("queries.jsonl", "qrels.jsonl", "README.md")
DOC_SUFFIXES = (".md", ".rst")


@dataclass(frozen=True)
class Source:
    package: str
    version: str
    wheel_sha256: str  # of the pure-Python wheel on PyPI; checked after download
    licence: str

    @property
    def marker(self) -> dict[str, str]:
        return {"package": self.package, "version": self.version, "wheel_sha256": self.wheel_sha256}


SOURCES: dict[str, Source] = {
    "rich": Source(
        package="rich",
        version="15.0.0",
        wheel_sha256="33bd4ef74232fb73fe9279a257718407f169c09b78a87ad3d296f548e27de0bb",
        licence="MIT",
    ),
}
DEFAULT_NAME = "rich"


def ensure_codeset(out: Path, name: str = DEFAULT_NAME, *, force: bool = False) -> Path:
    """Make sure `<out>/<name>` holds the set (corpus + queries + qrels) and return that folder.

    Downloads and unpacks only when the corpus is missing or was built from another version (or `force`).
    """
    source = SOURCES[name]
    folder = Path(out).resolve() / name
    corpus = folder / "corpus"
    marker = folder / MARKER
    if force or not corpus.is_dir() or read_marker(marker) != source.marker:
        _build_corpus(source, folder)
        marker.write_text(json.dumps(source.marker, indent=2) + "\n")
    copy_set_files(SETS_SRC / name, folder, SET_FILES)
    return folder


def read_marker(path: Path) -> dict[str, str] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _build_corpus(source: Source, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"codeset-{source.package}-", dir=folder.parent) as tmp:
        tmp_path = Path(tmp)
        wheel = download_pinned(
            source.package, source.version, source.wheel_sha256, tmp_path / "dl", wheel=True
        )
        staged = tmp_path / "corpus"
        count = _unpack(wheel, staged)
        licence = _licence_text(wheel)
        # swap in the new corpus only once it is complete
        corpus = folder / "corpus"
        (folder / MARKER).unlink(missing_ok=True)
        if corpus.exists():
            shutil.rmtree(corpus)
        staged.rename(corpus)
    if licence:
        (folder / f"LICENSE.{source.package}.txt").write_text(licence)
    print(f"[codeset] {source.package}=={source.version}: {count} files in {corpus}", file=sys.stderr)


def download_pinned(package: str, version: str, sha256: str, dest: Path, *, wheel: bool) -> Path:
    """`pip download` one pinned distribution (a wheel, or else the sdist) into `dest`, its sha256 checked.

    Shared by the code set (a wheel) and the FAQ set (an sdist, which ships the docs)."""
    dest.mkdir(parents=True)
    kind = ["--only-binary", ":all:"] if wheel else ["--no-binary", ":all:"]
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", *kind, "--quiet", f"{package}=={version}", "-d", str(dest),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    found = sorted(dest.glob("*.whl" if wheel else "*.tar.gz"))
    if len(found) != 1:
        raise RuntimeError(
            f"expected one {'wheel' if wheel else 'sdist'} for {package}=={version}, got {found}"
        )
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != sha256:
        raise RuntimeError(f"{found[0].name}: sha256 {digest} does not match the pinned {sha256}")
    return found[0]


def _unpack(wheel: Path, corpus: Path) -> int:
    """Copy source and doc files (not *.dist-info) keeping their paths; add the README from the metadata."""
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            rel = PurePosixPath(info.filename)
            if info.is_dir() or rel.is_absolute() or ".." in rel.parts:
                continue
            if rel.parts[0].endswith((".dist-info", ".data")):
                continue
            if rel.suffix not in (".py", *DOC_SUFFIXES):
                continue
            target = corpus.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            count += 1
        readme = _metadata_readme(zf)
    if readme and not (corpus / "README.md").exists():
        corpus.mkdir(parents=True, exist_ok=True)
        (corpus / "README.md").write_text(readme)
        count += 1
    return count


def _metadata_readme(zf: zipfile.ZipFile) -> str | None:
    """The long description from *.dist-info/METADATA, when it is Markdown."""
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if not names:
        return None
    meta = email.message_from_string(zf.read(names[0]).decode("utf-8"))  # from_bytes would mangle non-ASCII
    if "markdown" not in (meta.get("Description-Content-Type") or "").lower():
        return None
    body = meta.get_payload()
    return body.strip() + "\n" if isinstance(body, str) and body.strip() else None


def _licence_text(wheel: Path) -> str | None:
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            base = name.rsplit("/", 1)[-1].upper()
            if ".dist-info/" in name and base.startswith(("LICENSE", "LICENCE", "COPYING")):
                return zf.read(name).decode("utf-8", "replace")
    return None


def copy_set_files(src: Path, folder: Path, names: tuple[str, ...]) -> None:
    """Copy the hand-written files `names` of a set from `src` next to its corpus, when they differ."""
    for fname in names:
        path = src / fname
        if not path.is_file():
            raise FileNotFoundError(f"missing {path}")
        target = folder / fname
        if not target.is_file() or target.read_bytes() != path.read_bytes():
            shutil.copyfile(path, target)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default=str(DEFAULT_OUT), help="folder that receives <name>/ (default: %(default)s)"
    )
    parser.add_argument("--name", default=DEFAULT_NAME, choices=sorted(SOURCES))
    parser.add_argument("--force", action="store_true", help="download and unpack again even if up to date")
    args = parser.parse_args(argv)
    print(ensure_codeset(Path(args.out), args.name, force=args.force))


if __name__ == "__main__":
    main()
