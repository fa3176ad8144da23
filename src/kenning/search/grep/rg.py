"""The ripgrep engine of `kenning grep`: which lines match and where, asked of ``rg --json``.

This module owns finding rg, the arguments it is run with, checking that it accepts the patterns, choosing for
each file whether rg can see exactly the lines kenning prints (:func:`_rg_encoding`; the other files go to the
RE2 matcher), running rg over chunks of files under the deadline, and reading its JSON back. The text printed
is always kenning's own (:mod:`kenning.search.grep.match`), so both engines give the same output.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from kenning.errors import KenningError, UsageError
from kenning.search.grep.match import (
    Deadline,
    GrepFile,
    file_result,
    line_spans,
    load,
    matching_lines,
    split_lines,
    stream_result,
    streamed,
)
from kenning.search.grep.pattern import GrepOptions, Matcher, wide_spans
from kenning.types import FileEntry, Skip
from kenning.walk.redaction import MARK

# One rg process per chunk of files: bounded so argv stays under the OS limit (Windows allows ~32K chars)
# and so the texts held for context rendering stay small.
_CHUNK_FILES = 2000
_CHUNK_BYTES = 32 << 20
_ARGV_CHARS = 30_000 if os.name == "nt" else 200_000
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def rg_available() -> bool:
    """True if ripgrep (`rg`) is on PATH."""
    return shutil.which("rg") is not None


def rg_path(engine: str) -> str | None:
    """The rg executable to use, or None for the Python matcher."""
    if engine not in ("auto", "rg", "python"):
        raise UsageError(f"unknown grep engine {engine!r}; pass auto, rg or python")
    if engine == "python":
        return None
    rg = shutil.which("rg")
    if rg is None and engine == "rg":
        raise UsageError(
            "ripgrep (rg) is not on PATH; install it (apt-get install ripgrep) or pass --engine python"
        )
    return rg


def _rg_args(options: GrepOptions, patterns: Sequence[str]) -> list[str]:
    # --no-config: a user's RIPGREP_CONFIG_PATH (smart case, --max-columns, ...) must not change results.
    # --no-ignore --hidden: rg searches exactly the files kenning chose. --text: those were judged text
    # already, so rg's own binary handling must not drop or alter any of them.
    args = ["--json", "--no-config", "--no-ignore", "--hidden", "--text"]
    args.append("--ignore-case" if options.ignore_case else "--case-sensitive")
    if options.fixed:
        args.append("--fixed-strings")
    if options.word:
        args.append("--word-regexp")
    if options.max_count is not None:
        args += ["--max-count", str(options.max_count)]
    for pattern in patterns:
        args += ["-e", pattern]  # after -e, a pattern starting with "-" is not read as a flag
    return args


def rg_check(rg: str, options: GrepOptions, patterns: Sequence[str]) -> None:
    """Let rg compile the patterns against empty input: RE2 accepted them, and rg must too, now."""
    proc = subprocess.run(
        [rg, *_rg_args(options, patterns), "-"], stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    if proc.returncode == 2:  # the input is empty, so the only thing that can fail is the pattern
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        reasons = [ln.removeprefix("error:").strip() for ln in stderr.splitlines() if ln.startswith("error:")]
        reason = reasons[-1] if reasons else (stderr.splitlines() or ["unknown error"])[0]
        names = ", ".join(repr(p) for p in options.patterns)
        raise UsageError(
            f"ripgrep cannot compile {names} ({reason}); pass -F for a literal, or --engine python"
        )


def _rg_encoding(raw: bytes) -> str | None:
    """The --encoding under which rg sees exactly read_text's lines of these bytes; None if there is none.

    read_text splits lines at a lone CR and turns CRLF into LF (rg does neither), decodes UTF-16 and
    latin-1 fallbacks rg cannot be told about, and keeps NULs past its sniff window that rg treats as binary.
    """
    if b"\r" in raw or b"\0" in raw or raw.startswith(_UTF16_BOMS):
        return None
    try:
        raw.decode("utf-8")
        return "auto"  # rg's default: raw UTF-8, a BOM stripped (read_text's utf-8-sig does the same)
    except UnicodeDecodeError:
        pass
    if raw.startswith(b"\xef\xbb\xbf"):
        return None  # rg would obey the UTF-8 BOM over --encoding; read_text decodes it as cp1252
    try:
        raw.decode("cp1252")  # where Python's cp1252 succeeds it agrees with WHATWG windows-1252 (rg's)
    except UnicodeDecodeError:
        return None  # read_text fell back to latin-1, which rg's decoder does not offer
    return "windows-1252"


def _chunks(entries: Iterable[FileEntry]) -> Iterator[list[FileEntry]]:
    chunk: list[FileEntry] = []
    size = chars = 0
    for entry in entries:
        if chunk and (
            len(chunk) >= _CHUNK_FILES
            or size + entry.size > _CHUNK_BYTES
            or chars + len(entry.rel) > _ARGV_CHARS
        ):
            yield chunk
            chunk, size, chars = [], 0, 0
        chunk.append(entry)
        size += entry.size
        chars += len(entry.rel) + 1
    if chunk:
        yield chunk


def rg_engine(
    root: Path,
    entries: Iterable[FileEntry],
    matcher: Matcher,
    options: GrepOptions,
    patterns: Sequence[str],
    rg: str,
    follow: bool,
    on_skip: Callable[[Skip], None] | None,
    clock: Deadline,
) -> Iterator[GrepFile]:
    args = _rg_args(options, patterns)
    own_spans = line_spans(matcher)
    for chunk in _chunks(entries):
        loaded: list[tuple[str, str, str | None]] = []  # (rel, text, rg encoding or None)
        big: dict[str, FileEntry] = {}  # files too large to hold: matched block by block, in their place
        for entry in chunk:
            if streamed(entry):
                big[entry.rel] = entry
                loaded.append((entry.rel, "", None))
                continue
            got = load(entry, follow, on_skip)
            if got is not None:
                # rg reads the bytes, secrets included: a redacted file is matched on its redacted text
                encoding = None if MARK in got[0] else _rg_encoding(got[1])
                loaded.append((entry.rel, got[0], encoding))
        found: dict[str, dict[int, list[tuple[int, int]]]] = {}
        for wanted in ("auto", "windows-1252"):
            rels = [rel for rel, _, enc in loaded if enc == wanted]
            if rels:
                found |= _rg_search(rg, root, args, wanted, rels, clock)
        for rel, text, encoding in loaded:
            if rel in big:
                result = stream_result(big[rel], matcher, options, follow, on_skip, clock)
                if result is not None:
                    yield result
                if clock.passed():
                    return
                continue
            if encoding is not None and rel not in found:
                continue  # most files: rg found nothing, so there is no need to split them into lines
            lines = split_lines(text)
            if encoding is None:
                hits = matching_lines(matcher, lines, options.max_count)
                spans_of = own_spans
            else:
                # rg counts lines exactly as split_lines does for these files; the bound guards against a file
                # rewritten between our read and rg's.
                by_line = found[rel]
                hits = sorted(n - 1 for n in by_line if 0 < n <= len(lines))[: options.max_count]
                spans_of = _rg_spans(by_line)
            if hits:
                yield file_result(rel, lines, hits, options, spans_of)
            if clock.passed():
                return
        if clock.hit:
            return


def _rg_spans(by_line: dict[int, list[tuple[int, int]]]) -> Callable[[int, str], tuple[tuple[int, int], ...]]:
    """rg's submatches of a line, from UTF-8 byte offsets to character offsets. rg saw exactly this line's
    text (see _rg_encoding), transcoded to UTF-8 where it was windows-1252."""

    def spans_of(index: int, line: str) -> tuple[tuple[int, int], ...]:
        raw = line.encode("utf-8", "surrogatepass")

        def chars(offset: int) -> int:
            return len(raw[:offset].decode("utf-8", "replace"))

        return wide_spans([(chars(a), chars(b)) for a, b in by_line.get(index + 1, ())])

    return spans_of


def _rg_search(
    rg: str, root: Path, args: list[str], encoding: str, rels: list[str], clock: Deadline
) -> dict[str, dict[int, list[tuple[int, int]]]]:
    """Run rg over these root-relative files: each file's matching lines (1-based) and their submatches (byte
    offsets into the line). Past the deadline rg is stopped, and what it printed until then is kept."""
    extra = [] if encoding == "auto" else ["--encoding", encoding]
    try:
        proc = subprocess.run(
            [rg, *args, *extra, "--", *rels], cwd=root, capture_output=True, check=False, timeout=clock.left()
        )
        stdout, returncode, stderr = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:  # subprocess.run killed rg
        clock.hit = True
        stdout, returncode, stderr = exc.stdout or b"", 0, b""
    found: dict[str, dict[int, list[tuple[int, int]]]] = {}
    finished = False
    for raw in stdout.splitlines():
        try:
            message = json.loads(raw)
        except ValueError:
            break  # the last line of an rg stopped mid-write
        kind = message.get("type")
        if kind == "summary":
            finished = True
        elif kind == "match":
            data = message["data"]
            spans = [(int(m["start"]), int(m["end"])) for m in data.get("submatches", ())]
            found.setdefault(_rg_text(data["path"]), {})[int(data["line_number"])] = spans
    # Exit 2 with a summary is a per-file error (a file deleted since the walk): the rest stands.
    if returncode == 2 and not finished:
        lines = stderr.decode("utf-8", "replace").strip().splitlines()
        raise KenningError(
            f"ripgrep failed ({lines[0] if lines else 'no message'}); retry with --engine python"
        )
    return found


def _rg_text(value: dict[str, str]) -> str:
    """rg's JSON string: {"text": ...}, or {"bytes": base64} when not UTF-8 (a path of raw bytes)."""
    if "text" in value:
        return value["text"]
    return os.fsdecode(base64.b64decode(value["bytes"]))  # the inverse of how subprocess passed the path
