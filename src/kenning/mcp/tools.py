"""What each MCP tool does, as plain synchronous functions over the Engine (no protocol code here).

A `Workspace` holds one Engine per served root, kept open between calls so the model stays loaded. Each tool
takes checked arguments and returns an `Answer`: the text block the model reads and the structured content
that matches the tool's published output schema. Paths are resolved against the served roots and anything
outside them is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import jsonschema

from kenning import grep as grep_mod
from kenning import walk
from kenning.engine import Engine, Status
from kenning.errors import ArgumentError, IndexMissing, OutsideRoot
from kenning.index import IndexReport, Progress
from kenning.literal import literal_search
from kenning.mcp import schemas
from kenning.render import hit_header, hit_json, preview_lines, symbol_line, trace_line
from kenning.search import Filters, parse_time
from kenning.types import Hit, Mode, Preview, SearchResult, Selection

SHOW_SKIPPED = 100


@dataclass
class Answer:
    text: str
    structured: dict[str, Any]


def check_arguments(tool: str, schema: schemas.Schema, arguments: dict[str, Any]) -> None:
    """Refuse what the published schema refuses (types are strict: "true" is not true), and NUL bytes."""
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path)
    )
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "arguments"
        raise ArgumentError(f"{tool}: {where}: {_plain(err)}", hint=_fix(err))
    for where, text in _strings(arguments):
        if "\x00" in text:
            raise ArgumentError(f"{tool}: {where} contains a NUL byte", hint="remove it")


def _plain(err: jsonschema.ValidationError) -> str:
    if err.validator == "type":
        return f"{err.instance!r} is not of type {err.validator_value!s}"
    if err.validator == "additionalProperties":
        return str(err.message).replace("Additional properties are not allowed", "unknown argument")
    if err.validator in ("maxLength", "maxItems"):
        return f"too long (at most {err.validator_value})"
    return str(err.message)


def _fix(err: jsonschema.ValidationError) -> str:
    if err.validator == "type":
        return f"pass a JSON {err.validator_value}, not a string spelling of one"
    if err.validator == "additionalProperties":
        return "see the tool's input schema for the arguments it takes"
    if err.validator in ("maxLength", "maxItems", "minLength", "minItems", "minimum", "maximum"):
        return "stay within the bounds in the tool's input schema"
    return "see the tool's input schema"


def _strings(value: Any, where: str = "arguments") -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, where)
            yield from _strings(item, f"{key}" if where == "arguments" else f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")


class McpProgress:
    """The index run's Progress, forwarded as one monotonic count over both passes (at most every 0.5 s)."""

    def __init__(self, send: Callable[[float, float, str], None]) -> None:
        self._send = send
        self._base = 0
        self._done = 0
        self._total = 0
        self._phase = ""
        self._last = 0.0

    def start(self, phase: str, total: int) -> None:
        self._base += self._done
        self._done, self._total, self._phase = 0, total, phase
        self._emit(force=True)

    def advance(self, n: int = 1) -> None:
        self._done += n
        self._emit()

    def finish(self) -> None:
        self._emit(force=True)

    def _emit(self, force: bool = False) -> None:
        import time

        now = time.monotonic()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        unit = "files" if self._phase == "lexical" else "passages"
        self._send(
            float(self._base + self._done),
            float(self._base + self._total),
            f"{self._phase} pass: {self._done}/{self._total} {unit}",
        )


@dataclass
class Workspace:
    """The roots one server serves, each with its resident Engine."""

    roots: list[Path]
    model: str | None = None
    engines: list[Engine] = field(default_factory=list)

    def __post_init__(self) -> None:
        unique: list[Path] = []
        for r in self.roots:
            root = walk.check_root(r)
            if root not in unique:
                unique.append(root)
        self.roots = unique
        self.engines = [Engine(root, model=self.model) for root in self.roots]
        self._read_lock = threading.Lock()  # one reader at a time on each engine's connection
        # index runs of this server queue behind each other (a cancelled run finishes its batch first); the
        # file lock still refuses a writer from another process at once, naming it
        self._write_lock = threading.Lock()

    def check(self) -> None:
        """Load every embedder now: a server must not advertise search it cannot do."""
        for engine in self.engines:
            engine.embedder.embed_query("kenning")

    # -- paths ------------------------------------------------------------------------------------------------
    def _locate(self, path: str) -> tuple[Engine, str]:
        p = Path(path).expanduser()
        candidate = (p if p.is_absolute() else self.roots[0] / p).resolve()
        # the deepest served root that holds it, so nested roots resolve to the nearer one
        for engine in sorted(self.engines, key=lambda e: len(e.root.parts), reverse=True):
            if candidate == engine.root or engine.root in candidate.parents:
                return engine, candidate.relative_to(engine.root).as_posix().removeprefix(".")
        served = ", ".join(str(r) for r in self.roots)
        raise OutsideRoot(
            f"{path} is outside the workspace ({served})",
            hint="name a path inside it; `kenning mcp --root DIR` serves another folder",
        )

    def split(self, paths: Sequence[str] | None) -> list[tuple[Engine, list[str]]]:
        """The engines to ask and the root-relative paths for each; every engine when no paths are given."""
        if not paths:
            return [(e, []) for e in self.engines]
        by_engine: dict[int, tuple[Engine, list[str]]] = {}
        for path in paths:
            engine, rel = self._locate(path)
            entry = by_engine.setdefault(id(engine), (engine, []))
            if rel:
                entry[1].append(rel)
            else:
                entry[1].clear()
                entry[1].append("")  # the whole root wins over any part of it
        return [(e, [r for r in rels if r]) for e, rels in by_engine.values()]

    def _show(self, engine: Engine, rel: str) -> str:
        return rel if len(self.engines) == 1 else str(engine.root / rel)

    # -- tools ------------------------------------------------------------------------------------------------
    def text_search(self, args: dict[str, Any]) -> Answer:
        queries = [args["query"]] if "query" in args else list(args.get("queries") or [])
        if ("query" in args) == ("queries" in args):
            raise ArgumentError(
                "text_search: give exactly one of query and queries",
                hint='e.g. {"query": "where are uploads retried"}',
            )
        if any(not q.strip() for q in queries):
            raise ArgumentError("text_search: a query is empty", hint="describe what you are looking for")
        k = int(args.get("k", 10))
        mode = cast(Mode, args.get("mode", "hybrid"))
        preview = cast(Preview, args.get("preview", "short"))
        after = parse_time(args["modified_after"]) if "modified_after" in args else None
        before = parse_time(args["modified_before"]) if "modified_before" in args else None
        globs, types = tuple(args.get("globs", ())), tuple(args.get("types", ()))
        walk.compile_selection(Selection(globs=globs, types=types))  # a bad glob or type is refused up front
        per_root: list[tuple[Engine, list[SearchResult]]] = []
        literal = False
        for engine, rels in self.split(args.get("paths")):
            filters = Filters(
                paths=tuple(rels),
                globs=globs,
                types=types,
                modified_after=after,
                modified_before=before,
                symbol_types=tuple(args.get("symbol_types", ())),
            )
            if not engine.exists():
                if mode == "semantic":
                    raise IndexMissing(
                        f"{engine.root} has no index, so there is nothing to search by meaning",
                        hint='call text_index with paths ["."] first, or use mode "hybrid" for literal matches',
                    )
                literal = True
                selection = Selection(globs=globs, types=types)
                targets = [engine.root / r for r in rels]
                results = [
                    literal_search(engine.root, q, limit=k, selection=selection, paths=targets)
                    for q in queries
                ]
                for i, r in enumerate(results, 1):
                    r.group = f"Q{i}"
            else:
                with self._read_lock:
                    results = engine.search(
                        queries,
                        mode=mode,
                        limit=k,
                        filters=filters,
                        trace=bool(args.get("trace")),
                        prefer_symbol=bool(args.get("prefer_symbol")),
                    )
            per_root.append((engine, results))
        return self._search_answer(queries, per_root, k, mode, preview, literal)

    def _search_answer(
        self,
        queries: list[str],
        per_root: list[tuple[Engine, list[SearchResult]]],
        k: int,
        mode: Mode,
        preview: Preview,
        literal: bool,
    ) -> Answer:
        # per group: every root's hits, best first (scores share one scale: RRF, or the literal word share)
        groups: list[list[tuple[Engine, Hit]]] = []
        summaries: list[dict[str, Any]] = []
        group_notes: list[list[str]] = []
        searched = 0
        coverages = []
        for i, query in enumerate(queries):
            merged = [(e, h) for e, results in per_root for h in results[i].hits]
            merged.sort(key=lambda eh: -eh[1].score)
            groups.append(merged[:k])
            group_notes.append([n for _, results in per_root for n in results[i].notes])
            group_searched = sum(results[i].searched for _, results in per_root)
            summaries.append(
                {
                    "group": f"Q{i + 1}",
                    "query": query,
                    "searched": group_searched,
                    "hits": len(merged[:k]),
                    "notes": group_notes[-1],
                }
            )
            searched = max(searched, group_searched)
        for _, results in per_root:
            if results and not literal:
                coverages.append(results[0].coverage)
        coverage = min(coverages) if coverages else (0.0 if literal else 1.0)
        combined = _combine(groups, queries, k)
        lines: list[str] = []
        notes: list[str] = []
        if literal:
            lines.append(
                "LITERAL MATCHES: this workspace has no index yet, so these are files that contain the query's "
                'words, not passages ranked by meaning. Call text_index with paths ["."] to build the index.'
            )
        unit = "files" if literal else "passages"
        if len(queries) == 1:
            lines.append(
                f'{len(combined)} {"hit" if len(combined) == 1 else "hits"} for "{queries[0]}"; searched {searched} '
                f"{unit}" + ("" if literal else f", semantic coverage {coverage:.0%}")
            )
        else:
            lines.append(
                f"{len(queries)} query groups, {len(combined)} distinct hits (each group's best first); searched "
                f"{searched} {unit}" + ("" if literal else f", semantic coverage {coverage:.0%}")
            )
            for s in summaries:
                lines.append(f'  {s["group"]} "{s["query"]}": {s["hits"]} hits')
        for i, these in enumerate(group_notes, 1):
            notes.extend(f"Q{i}: {n}" if len(queries) > 1 else n for n in these)
        if not literal and coverage < 1.0:
            notes.append(
                f"only {coverage:.0%} of passages have embeddings yet; text_index finishes the semantic pass"
            )
        if not combined:
            notes.append(
                "nothing matched. If this part of the workspace was never indexed, call index_status; otherwise "
                "rephrase, widen the filters, or use grep for an exact string"
            )
        lines.extend(f"note: {n}" for n in notes)
        hits_json: list[dict[str, Any]] = []
        budget = schemas.MAX_OUTPUT_CHARS - sum(len(x) + 1 for x in lines) - 200
        truncated = False
        for rank, (engine, hit, labels, query) in enumerate(combined, 1):
            block = self._hit_block(engine, hit, labels, query, preview, len(queries) > 1)
            if len(block) + 1 > budget:
                truncated = True
                left = len(combined) - rank + 1
                cut = (
                    f"note: {left} more hits not shown, to keep this answer under {schemas.MAX_OUTPUT_CHARS} "
                    'characters; ask for fewer (k) or preview "none"'
                )
                lines.append(cut)
                notes.append(cut.removeprefix("note: "))
                break
            budget -= len(block) + 1
            lines.extend(["", block])
            result = SearchResult(query, [hit], 0, coverage, mode)
            item = hit_json(hit, result, rank, preview)
            for key in ("type", "schema", "group", "query", "rank"):
                item.pop(key)
            item.update(path=hit.path, root=str(engine.root), groups=labels)
            hits_json.append(item)
        structured = {
            "literal": literal,
            "mode": "lexical" if literal else mode,
            "searched": searched,
            "coverage": round(coverage, 4),
            "groups": summaries,
            "hits": hits_json,
            "notes": notes,
            "truncated": truncated,
        }
        return Answer("\n".join(lines), structured)

    def _hit_block(
        self, engine: Engine, hit: Hit, labels: list[str], query: str, preview: Preview, grouped: bool
    ) -> str:
        header = hit_header(hit).replace(hit.path, self._show(engine, hit.path), 1)
        out = [header + (f"  [{', '.join(labels)}]" if grouped else "")]
        label = symbol_line(hit)
        if label:
            out.append(f"  {label}")
        width = len(str(hit.end_line))
        out.extend(f"  {n:>{width}}  {t}" for n, t in preview_lines(hit, preview, query))
        trace = trace_line(hit)
        if trace:
            out.append(f"  {trace}")
        return "\n".join(out)

    def text_index(
        self, args: dict[str, Any], progress: Progress | None = None, cancel: threading.Event | None = None
    ) -> Answer:
        parts = self.split(args["paths"])
        if len(parts) > 1:
            raise ArgumentError(
                "text_index: the paths lie in several served roots", hint="call text_index once per root"
            )
        engine, rels = parts[0]
        with self._write_lock:
            return self._index(engine, rels, args, progress, cancel)

    def _index(
        self,
        engine: Engine,
        rels: list[str],
        args: dict[str, Any],
        progress: Progress | None,
        cancel: threading.Event | None,
    ) -> Answer:
        if args.get("forget"):
            if args.get("glob"):
                raise ArgumentError(
                    "text_index: glob cannot be combined with forget", hint="name the paths to forget"
                )
            if not rels:
                raise ArgumentError(
                    "text_index: forgetting the whole workspace would empty the index",
                    hint="name the files or directories to forget",
                )
            removed = engine.forget(rels)
            status = engine.status(pending=False)
            text = [
                f"Forgot {len(removed)} files; the index now holds {status.passages} passages from {status.files} files."
            ]
            text.extend(f"  {self._show(engine, p)}" for p in removed[:40])
            if len(removed) > 40:
                text.append(f"  [and {len(removed) - 40} more]")
            return Answer(
                "\n".join(text),
                {
                    "root": str(engine.root),
                    "forgot": True,
                    "added": 0,
                    "changed": 0,
                    "removed": len(removed),
                    "unchanged": 0,
                    "skipped": [],
                    "files": status.files,
                    "passages": status.passages,
                },
            )
        report = engine.index(None, scope=rels, scope_glob=args.get("glob"), progress=progress, cancel=cancel)
        return Answer("\n".join(_index_text(report)), _index_json(report, engine))

    def index_status(self, args: dict[str, Any]) -> Answer:
        roots = []
        lines: list[str] = []
        with self._read_lock:
            statuses = [(e, e.status()) for e in self.engines]
        for _, st in statuses:
            step = _next_step(st)
            roots.append(
                {
                    "root": st.root,
                    "indexed": st.exists,
                    "model": st.model,
                    "files": st.files,
                    "passages": st.passages,
                    "embedded": st.embedded,
                    "coverage": round(st.coverage, 4),
                    "skipped": st.skipped,
                    "pending": {"added": st.added, "modified": st.modified, "deleted": st.deleted},
                    "size_bytes": st.size_bytes,
                    "last_indexed": st.last_indexed,
                    "ready": st.ready,
                    "next_step": step,
                }
            )
            lines.append(f"{st.root}: " + ("indexed" if st.exists else "not indexed"))
            if st.exists:
                lines.append(
                    f"  {st.files} files, {st.passages} passages, semantic coverage {st.coverage:.0%}; "
                    f"changed since: {st.added} added, {st.modified} modified, {st.deleted} deleted"
                )
            lines.append(f"  model {st.model} [{st.identity}]")
            lines.append(f"  next: {step}")
        first = self.engines[0].embedder
        embedder = {"name": first.name, "identity": first.identity, "dim": first.dim}
        return Answer("\n".join(lines), {"roots": roots, "embedder": embedder})

    def grep(self, args: dict[str, Any]) -> Answer:
        context = int(args.get("context", 0))
        options = grep_mod.GrepOptions(
            patterns=(args["pattern"],),
            ignore_case=bool(args.get("ignore_case")),
            fixed=bool(args.get("fixed")),
            before=context,
            after=context,
        )
        files: list[dict[str, Any]] = []
        lines: list[str] = []
        matched = 0
        truncated = False
        size = 0
        for engine, rels in self.split(args.get("paths")):
            selection = engine.manifest.selection if engine.manifest else Selection()
            targets = [engine.root / r for r in rels]
            for found in grep_mod.grep(engine.root, options, paths=targets, selection=selection):
                shown = self._show(engine, found.path)
                block = [f"{shown}:"] + [
                    f"{ln.line}{':' if ln.match else '-'}{ln.text[:500]}" for ln in found.lines
                ]
                n = sum(1 for ln in found.lines if ln.match)
                cost = sum(len(b) + 1 for b in block)
                if matched + n > schemas.MAX_GREP_LINES or size + cost > schemas.MAX_OUTPUT_CHARS:
                    truncated = True
                    break
                matched += n
                size += cost
                lines.extend(block)
                files.append(
                    {
                        "path": found.path,
                        "root": str(engine.root),
                        "lines": [
                            {"line": ln.line, "text": ln.text[:500], "match": ln.match} for ln in found.lines
                        ],
                    }
                )
            if truncated:
                break
        head = f"{matched} matching lines in {len(files)} files"
        if truncated:
            head += (
                f" (stopped at {schemas.MAX_GREP_LINES} lines or {schemas.MAX_OUTPUT_CHARS} characters: "
                "narrow the pattern or the paths to see the rest)"
            )
        if not files:
            head = "no line matches (binary, ignored and secret files are not searched)"
        return Answer(
            "\n".join([head, *lines]), {"files": files, "matched_lines": matched, "truncated": truncated}
        )

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


def _combine(
    groups: list[list[tuple[Engine, Hit]]], queries: list[str], k: int
) -> list[tuple[Engine, Hit, list[str], str]]:
    """Round-robin over the groups' ranked hits (every group's best comes first), one entry per location."""
    out: list[tuple[Engine, Hit, list[str], str]] = []
    depth = max((len(g) for g in groups), default=0)
    for rank in range(depth):
        for gi, group in enumerate(groups):
            if rank >= len(group):
                continue
            engine, hit = group[rank]
            label = f"Q{gi + 1}#{rank + 1}"
            for e2, h2, labels, _ in out:
                if (
                    e2 is engine
                    and h2.path == hit.path
                    and h2.start_line <= hit.end_line
                    and hit.start_line <= h2.end_line
                ):
                    labels.append(label)
                    break
            else:
                if len(out) < k:
                    out.append((engine, hit, [label], queries[gi]))
    return out


def _next_step(st: Status) -> str:
    if not st.exists:
        return (
            'call text_index with paths ["."] to build the index (until then text_search answers with literal '
            "matches)"
        )
    if st.pending:
        return f'call text_index with paths ["."] to catch up on {st.pending} changed files'
    if st.embedded < st.passages:
        return 'call text_index with paths ["."] to finish the semantic pass'
    return "ready: use text_search"


def _index_text(r: IndexReport) -> Iterable[str]:
    verb = "Interrupted after indexing" if r.interrupted else "Indexed"
    yield (
        f"{verb} {len(r.added) + len(r.changed)} files ({len(r.added)} new, {len(r.changed)} changed), removed "
        f"{len(r.removed)}, {r.unchanged} unchanged and not re-read; {r.passages_added} passages added, "
        f"{r.passages_removed} removed, {r.embedded} embedded."
    )
    if r.interrupted:
        yield "Finished work is kept; call text_index again to resume."
    for s in r.skipped[:SHOW_SKIPPED]:
        yield f"  skipped {s.rel}: {s.reason}"
    if len(r.skipped) > SHOW_SKIPPED:
        yield f"  [and {len(r.skipped) - SHOW_SKIPPED} more skipped]"
    yield f"The index now holds {r.passages} passages from {r.files} files (semantic coverage {r.coverage:.0%})."


def _index_json(r: IndexReport, engine: Engine) -> dict[str, Any]:
    return {
        "root": str(engine.root),
        "forgot": False,
        "added": len(r.added),
        "changed": len(r.changed),
        "removed": len(r.removed),
        "unchanged": r.unchanged,
        "skipped": [{"path": s.rel, "reason": s.reason} for s in r.skipped[:SHOW_SKIPPED]],
        "skipped_total": len(r.skipped),
        "passages_added": r.passages_added,
        "passages_removed": r.passages_removed,
        "embedded": r.embedded,
        "files": r.files,
        "passages": r.passages,
        "coverage": round(r.coverage, 4),
        "interrupted": r.interrupted,
        "elapsed_s": round(r.elapsed, 3),
    }
