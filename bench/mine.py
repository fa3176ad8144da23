"""Training and development pairs mined from pinned git repositories: the `mined` family of bench/gitsets.py.

    python bench/mine.py pin                      # pin REPOS at their mirrors' HEAD (once; the pins are committed)
    python bench/mine.py [--names NAME,...] [--jobs N] [--force]   # materialise and mine every pinned set
    python bench/mine.py --stats                  # counts per family, language and split (markdown)

Each set `bench/sets/mined/<name>/source.json` pins a repository and a commit (gitsets' layout). Mining reads the
mirror's history and the tree at that commit and writes `queries.jsonl`, `qrels.jsonl` (per file, grade 1) and
`spans.jsonl` (per line span) beside the materialised corpus in `bench/.work/sets/mined-<name>/`; nothing it writes
is committed, and the same pins give the same pairs (seeded samples, no clock, no network). Four query families,
marked by the query id's prefix (the rules, and the noise they leave, are in bench/sets/mined/README.md):

- `commit:` a commit's subject and body -> the files it changed that still exist at the pin; spans are the lines
  of those files that `git blame` at the pin still gives to that commit.
- `bug:` the same for commits whose message says fix, bug or #N -> the non-test files they changed.
- `doc:` a docstring's or doc comment's first sentence, without the name it documents -> the definition (its doc
  comment through its end).
- `section:` a Markdown or reST heading and the first sentence under it -> the section's own lines.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import gitsets

MINE_VERSION = 5  # bump when a rule changes: gitsets.ensure re-mines a set whose marker differs
MARKER = ".mined.json"
CAP = 60  # queries per family per repository, a seeded sample past that
HISTORY = 2000  # newest non-merge commits read per repository: blame stays bounded to them
MAX_CHANGED = 8  # a commit that changed more files is a sweep, not a topic
MIN_WORDS = 5
MAX_TEXT = 1500  # characters of a commit message kept (subject first)
MAX_DOC_FILE = 500_000  # bytes: a single-header amalgamation is not read for doc comments
SEED = "kenning-mined-1"

# owner/name, language, licence (read from the mirror's LICENSE/COPYING file when pinned). None is kept apart to
# judge kenning, nor vendors one of those (typer was dropped: it carries a copy of click in typer/_click/).
REPOS: list[tuple[str, str, str]] = [
    ("arrow-py/arrow", "python", "Apache-2.0"),
    ("python-humanize/humanize", "python", "MIT"),
    ("mahmoud/boltons", "python", "BSD-3-Clause"),
    ("pytoolz/toolz", "python", "BSD-3-Clause"),
    ("python-attrs/cattrs", "python", "MIT"),
    ("python-poetry/tomlkit", "python", "MIT"),
    ("python-jsonschema/jsonschema", "python", "MIT"),
    ("Delgan/loguru", "python", "MIT"),
    ("pyparsing/pyparsing", "python", "MIT"),
    ("theskumar/python-dotenv", "python", "BSD-3-Clause"),
    ("pytest-dev/pluggy", "python", "MIT"),
    ("fastify/fastify", "javascript", "MIT"),
    ("markedjs/marked", "javascript", "MIT"),
    ("handlebars-lang/handlebars.js", "javascript", "MIT"),
    ("preactjs/preact", "javascript", "MIT"),
    ("jashkenas/underscore", "javascript", "MIT"),
    ("node-fetch/node-fetch", "javascript", "MIT"),
    ("ajv-validator/ajv", "typescript", "MIT"),
    ("ianstormtaylor/superstruct", "typescript", "MIT"),
    ("sindresorhus/got", "typescript", "MIT"),
    ("pmndrs/jotai", "typescript", "MIT"),
    ("pmndrs/valtio", "typescript", "MIT"),
    ("spf13/pflag", "go", "BSD-3-Clause"),
    ("urfave/cli", "go", "MIT"),
    ("rs/zerolog", "go", "MIT"),
    ("go-playground/validator", "go", "MIT"),
    ("gorilla/websocket", "go", "BSD-2-Clause"),
    ("BurntSushi/toml", "go", "MIT"),
    ("stretchr/testify", "go", "MIT"),
    ("samber/lo", "go", "MIT"),
    ("knadh/koanf", "go", "MIT"),
    ("clap-rs/clap", "rust", "MIT OR Apache-2.0"),
    ("tokio-rs/tracing", "rust", "MIT"),
    ("seanmonstar/reqwest", "rust", "MIT OR Apache-2.0"),
    ("chronotope/chrono", "rust", "MIT OR Apache-2.0"),
    ("crossbeam-rs/crossbeam", "rust", "MIT OR Apache-2.0"),
    ("rust-random/rand", "rust", "MIT OR Apache-2.0"),
    ("indexmap-rs/indexmap", "rust", "MIT OR Apache-2.0"),
    ("toml-rs/toml", "rust", "MIT OR Apache-2.0"),
    ("dtolnay/thiserror", "rust", "MIT OR Apache-2.0"),
    ("hyperium/http", "rust", "MIT OR Apache-2.0"),
    ("bitflags/bitflags", "rust", "MIT OR Apache-2.0"),
    ("square/retrofit", "java", "Apache-2.0"),
    ("square/javapoet", "java", "Apache-2.0"),
    ("FasterXML/jackson-core", "java", "Apache-2.0"),
    ("mockito/mockito", "java", "MIT"),
    ("apache/commons-cli", "java", "Apache-2.0"),
    ("apache/commons-io", "java", "Apache-2.0"),
    ("ben-manes/caffeine", "java", "Apache-2.0"),
    ("javalin/javalin", "java", "Apache-2.0"),
    ("square/moshi", "kotlin", "Apache-2.0"),
    ("InsertKoinIO/koin", "kotlin", "Apache-2.0"),
    ("Kotlin/kotlinx-datetime", "kotlin", "Apache-2.0"),
    ("nlohmann/json", "cpp", "MIT"),
    ("CLIUtils/CLI11", "cpp", "BSD-3-Clause"),
    ("catchorg/Catch2", "cpp", "BSL-1.0"),
    ("yhirose/cpp-httplib", "cpp", "MIT"),
    ("google/leveldb", "cpp", "BSD-3-Clause"),
    ("libuv/libuv", "c", "MIT"),
    ("jqlang/jq", "c", "MIT"),
    ("madler/zlib", "c", "Zlib"),
    ("ruby-grape/grape", "ruby", "MIT"),
    ("jekyll/jekyll", "ruby", "MIT"),
    ("ruby/rake", "ruby", "MIT"),
    ("heartcombo/devise", "ruby", "MIT"),
    ("haml/haml", "ruby", "MIT"),
    ("dry-rb/dry-validation", "ruby", "MIT"),
    ("symfony/console", "php", "MIT"),
    ("thephpleague/flysystem", "php", "MIT"),
    ("vlucas/phpdotenv", "php", "BSD-3-Clause"),
    ("ramsey/uuid", "php", "MIT"),
    ("slimphp/Slim", "php", "MIT"),
    ("FluentValidation/FluentValidation", "csharp", "Apache-2.0"),
    ("DapperLib/Dapper", "csharp", "Apache-2.0"),
    ("serilog/serilog", "csharp", "Apache-2.0"),
    ("AutoMapper/AutoMapper", "csharp", "MIT"),
    ("jbogard/MediatR", "csharp", "Apache-2.0"),
    ("Alamofire/Alamofire", "swift", "MIT"),
]
NAMES = {
    "BurntSushi/toml": "toml-go",
    "toml-rs/toml": "toml-rs",
    "symfony/console": "symfony-console",
    "urfave/cli": "urfave-cli",
    "nlohmann/json": "nlohmann-json",
    "hyperium/http": "hyperium-http",
}
# languages split together: a pool of one language has too few repositories for a dev and a test each
POOLS = {"typescript": "js", "javascript": "js", "c": "c", "cpp": "c"}

SPAN_GAP = 3  # blamed lines this close are one span

# --- paths ---------------------------------------------------------------------------------------------------------

TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|spec|specs|testing|testdata|test-?data|fixtures?|e2e|benchmarks?|benches)(/|$)"
    r"|(^|/)(tests?\.[a-z]+|test_[^/]*|[^/]*_test\.[a-z]+|[^/]*[._-](test|spec)s?\.[a-z]+|[^/]*Tests?\.(java|kt|cs|php|swift))$",
    re.I,
)
SKIP_PATH = re.compile(
    r"(^|/)(vendor|third_party|thirdparty|node_modules|dist|build|out|target|\.github|\.yarn|site-packages)(/|$)"
    r"|\.min\.(js|css)$",
    re.I,
)
NOISE_FILE = re.compile(
    r"(^|/)(CHANGE_?LOG|CHANGES|HISTORY|NEWS|RELEASES?|RELEASE_NOTES|AUTHORS|CONTRIBUTORS|THANKS|LICEN[CS]E|COPYING)"
    r"([._-][^/]*)?$"
    r"|(^|/)(package-lock\.json|yarn\.lock|pnpm-lock\.yaml|Cargo\.lock|go\.sum|Gemfile\.lock|composer\.lock|"
    r"poetry\.lock|uv\.lock|Pipfile\.lock|packages\.lock\.json)$",
    re.I,
)

# --- commits -------------------------------------------------------------------------------------------------------

BOT = re.compile(
    r"\[bot\]|dependabot|renovate|greenkeeper|pre-commit-ci|github-actions|snyk|allcontributors", re.I
)
SKIP_SUBJECT = re.compile(
    r"^\s*(\[?release\]?|releasing|prepare (for |to )?(the |a )?(release|v?\d)|publish|bump|version\b|v?\d+(\.\d+)+\b"
    r"|prepare\b.*\brelease\b|ci\b|(chore|build)(\([^)]*\))?: (update|upgrade|bump)"
    r"|(update|upgrade|bump)s? .*\bto v?\d+(\.\d+)+"
    r"|(chore|build|ci)\((release|deps|deps-dev)\)|update (the )?change ?log|change ?log|merge\b|revert\b)"
    r"|\b(bump(ed|s)?\b.*\b(version|to v?\d)|version bump|release v?\d|(update|upgrade) (all )?(dependencies|deps)"
    r"|re-?format(ted|ting)?|code ?style|coding style|rustfmt|gofmt|go fmt|cargo fmt|prettier|eslint --fix"
    r"|clang-format|php-cs-fixer|cs ?fix|run black|apply black|\bblack\b.*format|whitespace|trailing spaces"
    r"|fix(ed)? (lint|linting|formatting|typos?|spelling)|typos?\b|\[skip ci\]|\[ci skip\])",
    re.I,
)
TRAILER = re.compile(
    r"^\s*(signed-off-by|co-authored-by|reviewed-by|acked-by|change-id|reported-by|tested-by|cc|helped-by"
    r"|suggested-by|pr-url|reviewed-on|approved-by|see-also|git-svn-id)\s*:.*$",
    re.I | re.M,
)
# a bug fix: the subject says so, or the message closes an issue (a bare "(#N)" is a squash-merged PR's number)
BUGGY_SUBJECT = re.compile(
    r"\b(fix(es|ed|ing)?|bug(s|fix|fixes)?|regression|crash(es|ed)?|broken|wrong)\b", re.I
)
CLOSES = re.compile(r"\b(fix(es|ed)?|close[sd]?|resolve[sd]?)\b:?\s+(\S+)?#\d+", re.I)
CI_PATH = re.compile(r"^(\.github|\.circleci|\.gitlab|\.azure|ci)/|^\.[\w.-]+\.ya?ml$|^appveyor\.yml$", re.I)
URL = re.compile(r"<?https?://\S+>?")
ISSUE_REF = re.compile(r"\(?(?<![\w&])#\d+\)?|\(?\bgh-\d+\)?", re.I)
CLOSING = re.compile(
    r"\b(fix(es|ed)?|close[sd]?|resolve[sd]?|see|refs?|related( to)?)\b:?\s*(#\d+|gh-\d+)"
    r"(\s*(,|and|&)\s*(#\d+|gh-\d+))*",
    re.I,
)
CONVENTIONAL = re.compile(r"^(\w+)(\(([^)]*)\))?!?:\s*")


@dataclass
class Commit:
    sha: str
    author: str
    message: str
    files: list[str]


def log(repo: str, pin: str) -> list[Commit]:
    """The newest HISTORY non-merge commits at the pin, newest first, with the paths each changed."""
    # --no-renames: finding a rename reads blobs, and a snapshot lacks its largest ones (git log stops there)
    raw = gitsets.git(
        repo,
        "log",
        "--no-merges",
        "--no-renames",
        f"-n{HISTORY}",
        "--format=%x1e%H%x1f%an <%ae>%x1f%B%x1f",
        "--name-only",
        "-z",
        pin,
    )
    out = []
    for record in raw.decode("utf-8", "replace").split("\x1e")[1:]:
        parts = record.split("\x1f")
        if len(parts) < 4:
            continue
        sha, author, message, rest = parts[0], parts[1], parts[2], "\x1f".join(parts[3:])
        files = [f.strip("\n") for f in rest.split("\0") if f.strip("\n")]
        out.append(Commit(sha, author, message, files))
    return out


def clean_message(message: str) -> str:
    """A commit message as a query: trailers, URLs, issue numbers and the conventional `type:` prefix taken out."""
    text = TRAILER.sub("", message)
    text = re.sub(r"^\s*\[(skip ci|ci skip)\]\s*$", "", text, flags=re.I | re.M)
    text = URL.sub("", text)
    text = CLOSING.sub("", text)
    text = ISSUE_REF.sub("", text)
    text = re.sub(r"[ \t]+([,.;:])(?=\s|$)", r"\1", text)
    text = re.sub(r"(?m)^[ \t]*[,.;:]+[ \t]*", "", text)
    text = re.sub(r"([.!?])[,;]+", r"\1", text)
    text = re.sub(r"(?mi)[ \t]*\b(see|at|here|in)\b:?[ \t]*$", "", text)
    subject, _, body = text.strip().partition("\n")
    match = CONVENTIONAL.match(subject)
    if match:
        scope = match.group(3) or ""
        subject = (scope + ": " if scope and scope != "*" else "") + subject[match.end() :]
    text = subject.strip() + ("\n\n" + body.strip() if body.strip() else "")
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT].rsplit(" ", 1)[0]
    return text


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9_]+", text)


def names_a_file(message: str, files: Iterable[str]) -> bool:
    low = message.lower()
    for f in files:
        base = f.rsplit("/", 1)[-1].lower()
        if f.lower() in low or (
            "." in base and re.search(r"(?<![\w.])" + re.escape(base) + r"(?![\w])", low)
        ):
            return True
    return False


def commit_candidates(
    commits: list[Commit], present: set[str]
) -> tuple[list[tuple[Commit, str, list[str]]], list[tuple[Commit, str, list[str]]]]:
    """(commit:, bug:) candidates: each commit with its query text and the relevant files at the pin."""
    plain, bugs = [], []
    for c in commits[:-1]:  # the oldest is blame's boundary: lines older than the window are given to it
        if BOT.search(c.author) or not c.files or len(c.files) > MAX_CHANGED:
            continue
        subject = c.message.strip().split("\n", 1)[0]
        if SKIP_SUBJECT.search(subject):
            continue
        if names_a_file(c.message, c.files):
            continue
        text = clean_message(c.message)
        if len(words(text)) < MIN_WORDS:
            continue
        changed = [f for f in c.files if not NOISE_FILE.search(f)]
        kept = [f for f in changed if f in present]
        if all(CI_PATH.search(f) for f in kept):
            continue
        if not kept or 2 * len(kept) < len(changed):
            continue
        if BUGGY_SUBJECT.search(subject) or CLOSES.search(c.message):
            code = [f for f in kept if not TEST_PATH.search(f)]
            if code:
                bugs.append((c, text, code))
            continue
        plain.append((c, text, kept))
    return plain, bugs


def blamed_spans(repo: str, pin: str, boundary: str, path: str) -> dict[str, list[tuple[int, int]]]:
    """Per commit, the line ranges of `path` at the pin that `git blame -w` gives to it (within the window)."""
    try:
        raw = gitsets.git(repo, "blame", "-w", "--incremental", f"{boundary}..{pin}", "--", path)
    except subprocess.CalledProcessError:
        return {}
    lines: dict[str, list[int]] = defaultdict(list)
    for line in raw.decode("utf-8", "replace").splitlines():
        m = re.match(r"^([0-9a-f]{40}) \d+ (\d+) (\d+)$", line)
        if m:
            start, n = int(m.group(2)), int(m.group(3))
            lines[m.group(1)].extend(range(start, start + n))
    return {sha: merge(sorted(set(ls))) for sha, ls in lines.items()}


def merge(lines: list[int], gap: int = SPAN_GAP) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for n in lines:
        if out and n - out[-1][1] <= gap:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [(a, b) for a, b in out]


# --- doc comments --------------------------------------------------------------------------------------------------

EXT_LANG = {
    ".py": "python",
    ".rs": "rust",
    ".go": "go",
    ".js": "js",
    ".mjs": "js",
    ".cjs": "js",
    ".jsx": "js",
    ".ts": "js",
    ".tsx": "js",
    ".mts": "js",
    ".java": "java",
    ".kt": "java",
    ".kts": "java",
    ".scala": "java",
    ".cs": "java",
    ".swift": "java",
    ".php": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "c",
    ".cpp": "c",
    ".cxx": "c",
    ".hpp": "c",
    ".hh": "c",
    ".hxx": "c",
    ".ipp": "c",
    ".rb": "ruby",
}
KEYWORDS = set(
    [
        "if",
        "for",
        "while",
        "switch",
        "return",
        "new",
        "sizeof",
        "catch",
        "else",
        "do",
        "try",
        "throw",
        "case",
        "typeof",
        "await",
        "yield",
        "delete",
        "in",
        "of",
        "import",
        "export",
        "from",
        "require",
        "super",
        "this",
        "self",
        "function",
        "def",
        "elif",
        "when",
        "match",
        "loop",
        "where",
        "unsafe",
        "assert",
    ]
)
DECL = re.compile(
    r"\b(?:class|interface|enum|record|struct|union|object|trait|protocol|extension|fun|func|function\*?|fn|def"
    r"|typealias|type|namespace|module|mod|macro_rules!|const|static|let|var|val|#define)\s+"
    r"(?:(?:class|struct|enum|mut|const|async|static|\*)\s+)*"
    r"([A-Za-z_$][\w$]*)"
)
CALLABLE = re.compile(r"([A-Za-z_$~][\w$]*)\s*(?:<[^()]*>)?\s*\(")
GO_DECL = re.compile(r"^(?:func\s+(?:\([^)]*\)\s*)?|type\s+|var\s+|const\s+)([A-Za-z_]\w*)")
GO_EMPTY_TYPE = re.compile(r"\b(?:interface|struct)\s*\{\s*\}(?=\s*\S)")
RUBY_DECL = re.compile(r"^\s*(?:def\s+(?:self\.)?([\w?!=\[\]<>+-]+)|class\s+([\w:]+)|module\s+([\w:]+))")
ATTRIBUTE = re.compile(r"^\s*(#\[|#!\[|@[A-Za-z]|\[[A-Z][\w.]*(\(|\]))")
BOILERPLATE = re.compile(
    r"^\s*(todo|fixme|xxx|hack|copyright|\(c\)|spdx|licensed|license|generated|do not edit|auto-?generated|"
    r"eslint|prettier|nolint|noinspection|@|\{@inheritdoc|inheritdoc|<inheritdoc|see |deprecated\b|"
    r"nolint|#region|#endregion|region\b|endregion\b|pragma|clang-format|type:)",
    re.I,
)


@dataclass
class Def:
    path: str
    name: str
    start: int  # first line of the doc comment (1-based)
    end: int  # last line of the definition
    doc: str  # the doc comment's text, markers taken out


def strip_markup(text: str) -> str:
    text = re.sub(r"\{@(?:link|linkplain|code|literal|see)\s+([^}]*)\}", r"\1", text)
    text = re.sub(
        r"<see\s+(?:c?ref|langword|href)=\"([^\"]*)\"\s*/?>", lambda m: m.group(1).split(":")[-1], text
    )
    text = re.sub(r"<paramref\s+name=\"([^\"]*)\"\s*/>", r"\1", text)
    text = re.sub(r"</?[A-Za-z][^>]*>", " ", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # markdown links and images
    text = re.sub(r"\[`?([^\]`]*)`?\]\[[^\]]*\]", r"\1", text)
    text = re.sub(r"\[`([^\]`]*)`\]", r"\1", text)  # rustdoc intra links
    text = re.sub(r":[\w:.-]+:`~?([^`<]*?)(?:\s*<[^`]*>)?`", r"\1", text)  # reST roles
    text = re.sub(r"`([^`<]*?)\s*<[^`]*>`_+", r"\1", text)
    text = text.replace("``", "").replace("`", "")
    text = re.sub(r"(\*\*|__)(.*?)\1", r"\2", text)
    text = re.sub(r"(?<!\w)[*_](\S[^*_]*?)[*_](?!\w)", r"\1", text)
    text = re.sub(
        r"&(lt|gt|amp|quot|nbsp);", lambda m: {"lt": "<", "gt": ">", "amp": "&"}.get(m.group(1), " "), text
    )
    return re.sub(r"\s+", " ", text).strip()


SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'`\[])|(?<=[.!?])$|(?<=:)\s*$")


def first_sentence(paragraph: str) -> str:
    text = strip_markup(paragraph)
    m = re.search(
        r"(?<![A-Za-z]\.[A-Za-z])(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?](\s+(?=[A-Z(\"'\[])|$)", text
    )
    if m:
        text = text[: m.start() + 1]
    return text.strip()


def without_name(text: str, name: str) -> str:
    """The sentence with the documented identifier taken out (whole word, any case, with a call's `()`)."""
    bare = name.rsplit("::", 1)[-1].rsplit(".", 1)[-1].strip("$")
    if not bare:
        return text
    pattern = r"(?<![\w$])(?:[\w$]+(?:\.|::|#))?" + re.escape(bare) + r"(?:\(\))?(?![\w$])"
    out = re.sub(pattern, " ", text, flags=re.I)
    out = re.sub(r"\s+([,.;:!?])", r"\1", out)
    out = re.sub(r"\s+", " ", out).strip(" ,;:-")
    return out


def doc_paragraph(lines: list[str]) -> str:
    """The first paragraph of a doc comment's lines (markers already stripped), before any tag or section."""
    para: list[str] = []
    for line in lines:
        s = line.strip()
        if re.match(
            r"^(@\w|#\s|:param|:return|:raises|:type|Args:|Arguments:|Returns:|Parameters|Example|\.\. )", s
        ):
            break
        if re.match(r"^</?(summary|remarks)>$", s):
            if para and s.startswith("</"):
                break
            continue
        if not s:
            if para:
                break
            continue
        para.append(s)
    return " ".join(para)


def python_definitions(
    source: str,
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, int]]:
    """Each function and class of a Python source that parses, with its first line (its first decorator's)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.end_lineno:
            yield node, min([node.lineno] + [d.lineno for d in node.decorator_list])


def python_defs(path: str, source: str) -> list[Def]:
    out = []
    for node, start in python_definitions(source):
        doc = ast.get_docstring(node)
        if doc and node.end_lineno is not None:
            out.append(Def(path, node.name, start, node.end_lineno, doc_paragraph(doc.splitlines())))
    return out


def source_files(corpus: Path, files: list[str]) -> Iterator[tuple[str, str, str]]:
    """(path, language, text) of each source file outside tests and vendored code, small enough to read."""
    for rel in files:
        lang = EXT_LANG.get(Path(rel).suffix.lower())
        if lang is None or TEST_PATH.search(rel) or SKIP_PATH.search(rel):
            continue
        p = corpus / rel
        if p.stat().st_size > MAX_DOC_FILE:
            continue
        yield rel, lang, p.read_bytes().decode("utf-8", "replace")


def block_end(lines: list[str], i: int, lang: str) -> int | None:
    """The last line (0-based) of the definition starting at line i: braces matched, or `end` in Ruby."""
    if lang == "ruby":
        indent = len(lines[i]) - len(lines[i].lstrip())
        if re.search(r"\bend\s*$", lines[i]) or re.match(r"^\s*def\s+[\w?!=]+(\(.*\))?\s*=", lines[i]):
            return i
        for j in range(i + 1, min(len(lines), i + 3000)):
            s = lines[j]
            if s.strip() and len(s) - len(s.lstrip()) <= indent:
                return j if s.strip().startswith("end") else None
        return None
    depth = 0
    opened = False
    for j in range(i, min(len(lines), i + 3000)):
        code = re.sub(r"\"(\\.|[^\"\\])*\"|'(\\.|[^'\\])'|//.*$", "", lines[j])
        if lang == "go":
            # an empty interface or struct with more code after it is a type in the signature, not the body
            # (`func F(v interface{}) error {`); at a line's end it is one (`type Empty struct{}`)
            code = GO_EMPTY_TYPE.sub("", code)
        for ch in code:
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
                if opened and depth <= 0:
                    return j
            elif ch == ";" and not opened and depth == 0:
                return j
        if not opened and j > i and not lines[j].strip():
            return j - 1  # no body: a declaration, an expression body, an abstract member
        if not opened and j - i > 12:
            return None
    return None


def declared_name(line: str, lang: str) -> str | None:
    s = line.strip()
    if lang == "go":
        m = GO_DECL.match(s)
        return m.group(1) if m else None
    if lang == "ruby":
        m = RUBY_DECL.match(s)
        if not m:
            return None
        return next(g for g in m.groups() if g).split("::")[-1]
    m = DECL.search(s)
    if m and m.group(1) not in KEYWORDS:
        return m.group(1)
    for m in CALLABLE.finditer(s):
        if m.group(1) not in KEYWORDS:
            return m.group(1)
    if lang == "js":  # a property or field: `name: ...` or `name = ...`
        m = re.match(
            r"^(?:(?:public|private|protected|static|readonly|export|default|declare|abstract|override)\s+)*"
            r"([A-Za-z_$][\w$]*)\??\s*[:=]",
            s,
        )
        if m and m.group(1) not in KEYWORDS:
            return m.group(1)
    return None


def comment_defs(path: str, source: str, lang: str) -> list[Def]:
    """Definitions preceded by a doc comment: `/** */`, `/*! */` or `///` (and `/* */` in C), `//` in Go, `#` in
    Ruby."""
    lines = source.splitlines()
    out = []
    i = 0
    n = len(lines)
    while i < n:
        s = lines[i].strip()
        start = i
        body: list[str] = []
        if (
            s.startswith("/**")
            or s.startswith("/*!")
            or (lang == "c" and s.startswith("/*") and not s.startswith("/**/"))
        ):
            j = i
            while j < n and "*/" not in lines[j]:
                j += 1
            if j >= n:
                break
            for k in range(i, j + 1):
                t = lines[k].strip()
                if k == i:
                    t = re.sub(r"^/\*[*!]?", "", t)
                t = re.sub(r"\*/\s*$", "", t)
                t = re.sub(r"^\*+ ?", "", t.strip())
                body.append(t)
            after = lines[j].split("*/", 1)[1].strip() if "*/" in lines[j] else ""
            i = j + 1
            if after:  # `/** doc */ int x;` on one line: the comment is inline, not above a definition
                continue
        elif s.startswith("///") and not s.startswith("////"):
            while i < n and lines[i].strip().startswith("///"):
                body.append(lines[i].strip()[3:].strip())
                i += 1
        elif (
            lang == "go"
            and s.startswith("//")
            and not s.startswith("//go:")
            and not s.startswith("// +build")
        ):
            while i < n and lines[i].strip().startswith("//"):
                body.append(lines[i].strip()[2:].strip())
                i += 1
            if lines[start].startswith(("\t", " ")):
                continue
        elif (
            lang == "ruby"
            and s.startswith("#")
            and not s.startswith("#!")
            and "frozen_string_literal" not in s
        ):
            while i < n and lines[i].strip().startswith("#"):
                body.append(lines[i].strip().lstrip("#").strip())
                i += 1
        else:
            i += 1
            continue
        j = i
        while j < n and ATTRIBUTE.match(lines[j]) and not lines[j].strip().startswith(("@param", "@return")):
            j += 1
        if j >= n or not lines[j].strip():
            continue
        name = declared_name(lines[j], lang)
        if not name:
            continue
        end = block_end(lines, j, lang)
        if end is None:
            continue
        doc = doc_paragraph(body)
        if doc:
            out.append(Def(path, name, start + 1, end + 1, doc))
    return out


def doc_candidates(corpus: Path, files: list[str]) -> list[tuple[str, dict[str, int], str]]:
    """(query text, {span key: 1}, id) for each documented definition outside tests and vendored code."""
    defs: list[Def] = []
    for rel, lang, source in source_files(corpus, files):
        defs += python_defs(rel, source) if lang == "python" else comment_defs(rel, source, lang)
    grouped: dict[str, list[Def]] = defaultdict(list)
    for d in defs:
        if BOILERPLATE.match(d.doc):
            continue
        text = without_name(first_sentence(d.doc), d.name)
        if len(words(text)) < MIN_WORDS or BOILERPLATE.match(text):
            continue
        grouped[text].append(d)
    out = []
    for text, ds in grouped.items():
        if len(ds) > 3:  # one sentence on many definitions (overloads, generated members) says nothing apart
            continue
        spans = {f"corpus/{d.path}:{d.start}-{d.end}": 1 for d in ds}
        out.append((text, spans, f"doc:{ds[0].path}:{ds[0].start}"))
    return out


# --- sections ------------------------------------------------------------------------------------------------------

RST_ADORN = re.compile(r"^([=\-~^\"'`*+#:.<>_])\1{2,}\s*$")
VERSIONISH = re.compile(r"^\W*(v?\d+(\.\d+)+|\d{4}-\d\d-\d\d|unreleased|version\b)", re.I)
DOC_SKIP = re.compile(
    r"(^|/)(CHANGE_?LOG|CHANGES|HISTORY|NEWS|RELEASES?|RELEASE[_-]NOTES|LICEN[CS]E|COPYING|CODE_OF_CONDUCT|"
    r"SECURITY|PULL_REQUEST_TEMPLATE|ISSUE_TEMPLATE|AUTHORS|CONTRIBUTORS|MIGRATION|UPGRADING|UPGRADE)[^/]*$",
    re.I,
)


@dataclass
class Section:
    path: str
    heading: str
    start: int
    end: int = 0
    prose: list[str] = field(default_factory=list)


def markdown_sections(path: str, lines: list[str]) -> list[Section]:
    out: list[Section] = []
    fence = None
    for i, line in enumerate(lines):
        s = line.strip()
        m = re.match(r"^(```+|~~~+)", s)
        if m:
            fence = None if fence and s.startswith(fence) else (fence or m.group(1))
            if out:
                out[-1].prose.append("\0")  # a code block ends the first paragraph
            continue
        if fence:
            continue
        h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        setext = (
            i + 1 < len(lines)
            and re.match(r"^(=+|-+)\s*$", lines[i + 1])
            and s
            and not s.startswith(("-", "*", "|", ">"))
            and not (out and out[-1].start == i)
        )
        if h or setext:
            if out and not out[-1].end:
                out[-1].end = i
            out.append(Section(path, h.group(2) if h else s, i + 1))
            continue
        if out and not re.match(r"^(=+|-+)\s*$", line):
            out[-1].prose.append(line)
    if out and not out[-1].end:
        out[-1].end = len(lines)
    return out


def rst_sections(path: str, lines: list[str]) -> list[Section]:
    out: list[Section] = []
    skip = -1
    for i, line in enumerate(lines):
        if i <= skip:
            continue
        s = line.rstrip()
        nxt = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
        if (
            s
            and not RST_ADORN.match(s)
            and RST_ADORN.match(nxt)
            and len(nxt) >= len(s.strip())
            and not s.startswith(" ")
        ):
            start = i
            if i > 0 and RST_ADORN.match(lines[i - 1].rstrip()):
                start = i - 1
            if out and not out[-1].end:
                out[-1].end = start
            out.append(Section(path, s.strip(), start + 1))
            skip = i + 1
            continue
        if RST_ADORN.match(s):
            continue
        if out:
            out[-1].prose.append(line)
    if out and not out[-1].end:
        out[-1].end = len(lines)
    return out


def section_sentence(prose: list[str], rst: bool) -> str:
    para: list[str] = []
    in_directive = False
    for line in prose:
        s = line.strip()
        if s == "\0":
            if para:
                break
            continue
        if rst and (s.startswith("..") or (in_directive and line.startswith(" "))):
            in_directive = s.startswith("..") or in_directive
            if para:
                break
            continue
        in_directive = False
        if not s:
            if para:
                break
            continue
        if re.match(r"^(\||<|!\[|\[!\[|>\s*\[!|\{[{%]|:\w+:|\+[-=]+\+|import |from |\$ |>>>|[-=]{3,})", s):
            if para:
                break
            continue
        para.append(re.sub(r"^([-*+]|\d+[.)])\s+", "", s))
    return first_sentence(" ".join(para)) if para else ""


def doc_pages(corpus: Path, files: list[str]) -> Iterator[tuple[str, list[str]]]:
    """(path, lines) of each Markdown or reST page but release notes, licences and vendored ones."""
    for rel in files:
        suffix = Path(rel).suffix.lower()
        if suffix in (".md", ".markdown", ".mdx", ".rst") and not (
            SKIP_PATH.search(rel) or DOC_SKIP.search(rel)
        ):
            yield rel, (corpus / rel).read_bytes().decode("utf-8", "replace").splitlines()


def section_candidates(corpus: Path, files: list[str]) -> list[tuple[str, dict[str, int], str]]:
    out: dict[str, tuple[dict[str, int], str]] = {}
    for rel, lines in doc_pages(corpus, files):
        rst = rel.lower().endswith(".rst")
        sections = rst_sections(rel, lines) if rst else markdown_sections(rel, lines)
        stem_words = {w.lower() for w in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", Path(rel).stem) if w}
        for sec in sections:
            heading = strip_markup(re.sub(r"\{#[^}]*\}|<a [^>]*>|</a>", "", sec.heading))
            if VERSIONISH.match(heading):
                continue
            kept = [w for w in heading.split() if re.sub(r"\W", "", w).lower() not in stem_words]
            heading = " ".join(kept).strip(" :-")
            sentence = section_sentence(sec.prose, rst)
            if not sentence or len(words(sentence)) < 3:
                continue
            text = f"{heading}: {sentence}" if heading else sentence
            if len(words(text)) < MIN_WORDS:
                continue
            end = sec.end
            while end > sec.start and not lines[end - 1].strip():
                end -= 1
            key = f"corpus/{rel}:{sec.start}-{end}"
            if text in out:
                out[text][0][key] = 1
            else:
                out[text] = ({key: 1}, f"section:{rel}:{sec.start}")
    return [(t, spans, qid) for t, (spans, qid) in out.items() if len(spans) <= 3]


# --- usage prose --------------------------------------------------------------------------------------------------

INLINE_CODE = re.compile(r"``?([A-Za-z_][\w.:#]*?)(?:\(\))?``?")
STRONG_DECL = re.compile(
    r"^\s*(?:(?:pub(?:\([^)]*\))?|export|default|public|private|protected|internal|static|final|abstract|async"
    r"|inline|open|override|data|sealed|virtual|extern|unsafe|const|readonly|declare|partial)\s+)*"
    r"(?:class|interface|enum|record|struct|trait|protocol|object|fun|func|function\*?|fn|def|typealias|type"
    r"|macro_rules!|module)\s+(?:self\.)?([A-Za-z_$][\w$?!]*)"  # no Rust `mod x;`: a file's name, no definition
)


def definitions(corpus: Path, files: list[str]) -> dict[str, list[tuple[str, int, int]]]:
    """Every named definition outside tests and vendored code: name -> (path, first line, last line)."""
    out: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for rel, lang, source in source_files(corpus, files):
        if lang == "python":
            for node, start in python_definitions(source):
                out[node.name].append((rel, start, node.end_lineno or start))
            continue
        lines = source.splitlines()
        for i, line in enumerate(lines):
            m = GO_DECL.match(line) if lang == "go" else STRONG_DECL.match(line)
            if not m:
                continue
            end = block_end(lines, i, lang)
            if end is not None:
                out[m.group(1)].append((rel, i + 1, end + 1))
    return out


def prose_paragraphs(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(first line, text) of each prose paragraph of a Markdown or reST page: no code, headings, tables, HTML."""
    fence = None
    para: list[str] = []
    first = 0
    for n, line in enumerate([*lines, ""], 1):
        s = line.strip()
        m = re.match(r"^(```+|~~~+)", s)
        if m:
            fence = None if fence and s.startswith(fence) else (fence or m.group(1))
        prose = not (m or fence or not s or line.startswith(("    ", "\t")) or RST_ADORN.match(s))
        prose = prose and not s.startswith(("#", "|", "<", "..", ">>>", "$ ", ":"))
        if prose:
            if not para:
                first = n
            para.append(re.sub(r"^(>\s*)?([-*+]|\d+[.)])?\s*", "", s))
        elif para:
            yield first, " ".join(para)
            para = []


def usage_candidates(corpus: Path, files: list[str]) -> list[tuple[str, dict[str, int], str]]:
    """A documentation sentence that names an identifier in inline code -> that identifier's definition.

    The sentence stays whole, name and all: the prose around it is in the corpus too, in the very file it came
    from, and that file is not judged, so these pairs teach the definition over the page that mentions it."""
    defs = definitions(corpus, files)
    out: dict[str, tuple[dict[str, int], str]] = {}
    for rel, lines in doc_pages(corpus, files):
        for n, paragraph in prose_paragraphs(lines):
            for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z`])", paragraph):
                for code in INLINE_CODE.findall(sentence):
                    name = re.split(r"[.:#]+", code)[-1]
                    where = defs.get(name, [])
                    if len(name) < 4 or not where or len({w[0] for w in where}) > 2 or len(where) > 3:
                        continue
                    text = strip_markup(sentence)
                    if len(words(text)) < MIN_WORDS or text in out:
                        break
                    out[text] = ({f"corpus/{p}:{a}-{b}": 1 for p, a, b in where}, f"usage:{rel}:{n}:{name}")
                    break
    return [(t, spans, qid) for t, (spans, qid) in out.items()]


# --- one set -------------------------------------------------------------------------------------------------------


def sample(items: list, name: str, family: str) -> list:
    rng = random.Random(f"{SEED}/{name}/{family}")
    if len(items) <= CAP:
        return list(items)
    picked = sorted(rng.sample(range(len(items)), CAP))
    return [items[i] for i in picked]


def corpus_files(corpus: Path) -> list[str]:
    return sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())


def mine_set(source: gitsets.Source, folder: Path) -> dict[str, int]:
    """Write the set's queries, qrels and spans into `folder` (its corpus already there); counts per family."""
    corpus = folder / "corpus"
    files = corpus_files(corpus)
    present = set(files)
    rows: list[tuple[str, str, dict[str, int], dict[str, int]]] = []  # id, text, files, spans

    commits = log(source.repo, source.commit)
    if len(commits) > 1:
        boundary = commits[-1].sha
        plain, bugs = commit_candidates(commits, present)
        picked = {"commit": sample(plain, source.name, "commit"), "bug": sample(bugs, source.name, "bug")}
        blame: dict[str, dict[str, list[tuple[int, int]]]] = {}
        for family, items in picked.items():
            for c, text, rel in items:
                spans: dict[str, int] = {}
                for path in rel:
                    if path not in blame:
                        blame[path] = blamed_spans(source.repo, source.commit, boundary, path)
                    ranges = blame[path].get(c.sha)
                    if ranges:
                        for a, b in ranges:
                            spans[f"corpus/{path}:{a}-{b}"] = 1
                    else:  # only deletions survive, or every line was rewritten since: the file as a whole
                        spans[f"corpus/{path}"] = 1
                rows.append((f"{family}:{c.sha[:12]}", text, {f"corpus/{p}": 1 for p in rel}, spans))

    for family, found in (
        ("doc", doc_candidates(corpus, files)),
        ("section", section_candidates(corpus, files)),
        ("usage", usage_candidates(corpus, files)),
    ):
        found.sort(key=lambda t: t[2])
        for text, spans, qid in sample(found, source.name, family):
            by_file = {re.sub(r":\d+-\d+$", "", k): 1 for k in spans}
            rows.append((qid, text, by_file, spans))

    seen: set[str] = set()
    with (
        open(folder / "queries.jsonl", "w") as q,
        open(folder / "qrels.jsonl", "w") as r,
        open(folder / "spans.jsonl", "w") as s,
    ):
        for qid, text, by_file, spans in rows:
            if qid in seen:
                continue
            seen.add(qid)
            kind = qid.split(":", 1)[0]
            q.write(
                json.dumps({"query_id": qid, "text": text, "kind": kind, "relevant": sorted(by_file)}) + "\n"
            )
            r.write(json.dumps({"query_id": qid, "relevant": by_file}) + "\n")
            s.write(json.dumps({"query_id": qid, "relevant": spans}) + "\n")
    counts = Counter(qid.split(":", 1)[0] for qid in seen)
    (folder / MARKER).write_text(json.dumps(marker(source), indent=2) + "\n")
    return dict(counts)


def marker(source: gitsets.Source) -> dict[str, object]:
    return {"version": MINE_VERSION, "repo": source.repo, "commit": source.commit}


def is_mined(source: gitsets.Source, folder: Path) -> bool:
    try:
        current = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return bool(current == marker(source) and all((folder / f).is_file() for f in gitsets.SET_FILES))


def run_one(set_name: str, force: bool) -> tuple[str, dict[str, int]]:
    source = gitsets.by_set_name(set_name)
    assert source is not None
    folder = gitsets.ensure(set_name, mine=False)
    if force or not is_mined(source, folder):
        counts = mine_set(source, folder)
    else:
        counts = dict(Counter(json.loads(line)["kind"] for line in (folder / "queries.jsonl").open()))
    return set_name, counts


# --- pins ----------------------------------------------------------------------------------------------------------


def set_name_of(repo: str) -> str:
    return NAMES.get(repo, repo.split("/")[1].lower().removesuffix(".js").replace(".", "-"))


def splits() -> dict[str, str]:
    """Split by repository: in each language pool about 15% dev and 15% test (at least one each from 3 repos
    up), the rest train; the order within a pool is a hash of the name, so adding a repository moves few."""
    pools: dict[str, list[str]] = defaultdict(list)
    for repo, lang, _ in REPOS:
        pools[POOLS.get(lang, lang)].append(repo)
    out = {}
    for repos in pools.values():
        repos.sort(key=lambda r: hashlib.sha256(f"{SEED}/{r}".encode()).hexdigest())
        k = max(1, round(0.15 * len(repos))) if len(repos) >= 3 else 0
        for i, repo in enumerate(repos):
            out[repo] = "dev" if i < k else "test" if i < 2 * k else "train"
    return out


def pin() -> None:
    split = splits()
    for repo, lang, licence in REPOS:
        head = gitsets.git(repo, "rev-parse", "HEAD").decode().strip()
        folder = gitsets.SETS_SRC / "mined" / set_name_of(repo)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "source.json"
        if target.is_file():  # a pin stays: re-pinning would change the pairs under the ranker's feet
            continue
        pinned = {"repo": repo, "commit": head, "language": lang, "split": split[repo], "licence": licence}
        target.write_text(json.dumps(pinned, indent=2) + "\n")
        print(f"{set_name_of(repo)}\t{head[:12]}\t{lang}\t{split[repo]}")


def stats(out: Path) -> str:
    """Markdown tables of the mined counts: per family and split, per language."""
    per_lang: dict[str, Counter[str]] = defaultdict(Counter)
    per_split: dict[str, Counter[str]] = defaultdict(Counter)
    repos: Counter[str] = Counter()
    rows = []
    for s in gitsets.sources("mined"):
        path = out / s.set_name / "queries.jsonl"
        if not path.is_file():
            continue
        kinds = Counter(json.loads(line)["kind"] for line in path.open())
        per_lang[s.language].update(kinds)
        per_split[s.split].update(kinds)
        repos[s.split] += 1
        rows.append((s.name, s.language, s.split, kinds))
    fams = ["commit", "bug", "doc", "section", "usage"]
    lines = [
        "| split | repositories | " + " | ".join(fams) + " | all |",
        "|---|---|" + "---|" * (len(fams) + 1),
    ]
    for sp in ("train", "dev", "test"):
        c = per_split[sp]
        lines.append(
            f"| {sp} | {repos[sp]} | " + " | ".join(str(c[f]) for f in fams) + f" | {sum(c.values())} |"
        )
    total: Counter[str] = sum(per_split.values(), Counter())
    lines.append(
        f"| **all** | {sum(repos.values())} | "
        + " | ".join(str(total[f]) for f in fams)
        + f" | **{sum(total.values())}** |"
    )
    lines += [
        "",
        "| language | repositories | " + " | ".join(fams) + " | all |",
        "|---|---|" + "---|" * (len(fams) + 1),
    ]
    n_lang = Counter(s.language for s in gitsets.sources("mined"))
    for lang in sorted(per_lang):
        c = per_lang[lang]
        lines.append(
            f"| {lang} | {n_lang[lang]} | " + " | ".join(str(c[f]) for f in fams) + f" | {sum(c.values())} |"
        )
    lines += [
        "",
        "| set | language | split | " + " | ".join(fams) + " |",
        "|---|---|---|" + "---|" * len(fams),
    ]
    for name, lang, sp, kinds in rows:
        lines.append(f"| {name} | {lang} | {sp} | " + " | ".join(str(kinds[f]) for f in fams) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("action", nargs="?", default="mine", choices=("mine", "pin"))
    parser.add_argument("--names", default="", help="set names (mined-NAME), comma-separated")
    parser.add_argument("--split", choices=("train", "dev", "test"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--force", action="store_true", help="mine again though the marker matches")
    parser.add_argument(
        "--stats", action="store_true", help="print the counts of what is mined, mine nothing"
    )
    parser.add_argument("--status", default="", help="append a line per finished set to this file")
    args = parser.parse_args(argv)
    if args.action == "pin":
        pin()
        return
    if args.stats:
        print(stats(gitsets.DEFAULT_OUT))
        return
    names = [n for n in args.names.split(",") if n] or gitsets.set_names("mined", args.split)
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for set_name, counts in pool.map(run_one, names, [args.force] * len(names)):
            line = f"{set_name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            print(line, flush=True)
            if args.status:
                with open(args.status, "a") as f:
                    f.write(line + "\n")


def iter_rows(path: Path) -> Iterator[dict[str, object]]:
    for line in path.read_text().splitlines():
        if line.strip():
            yield json.loads(line)


if __name__ == "__main__":
    main()
