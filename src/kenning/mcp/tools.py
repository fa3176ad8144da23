"""What each MCP tool does, as plain synchronous methods over the Engine (no protocol code here).

A `Workspace` holds one Engine per served root, kept open between calls so the model stays loaded. Each tool
takes checked arguments and returns an `Answer`: the text block the model reads and the structured content
that matches the tool's published output schema. Paths are resolved against the served roots and anything
outside them is refused.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from kenning import walk
from kenning.commands.report import base_line, pruned_line
from kenning.engine import Engine, background
from kenning.engine.index import Progress
from kenning.engine.roots import comparable
from kenning.errors import ArgumentError, IndexBusy, IndexMissing, OutsideRoot, UsageError
from kenning.mcp import schemas
from kenning.mcp.answers import Answer, GrepPacker, index_json, index_text, next_step, search_answer
from kenning.search import Filters, SearchRequest, parse_time
from kenning.search import grep as grep_mod
from kenning.search.literal import literal_results
from kenning.search.outline import SymbolLookup, file_outline, outline_json, outline_lines
from kenning.search.request import BUDGET_POOL, parse_place
from kenning.types import Mode, Preview, Refresh, SearchResult, Selection


class McpProgress:
    """The index run's Progress, forwarded as one monotonic count over both passes (at most every 0.5 s)."""

    def __init__(self, send: Callable[[float, float, str], None]) -> None:
        self._send = send
        self._base = 0
        self._done = 0
        self._total = 0
        self._phase = ""
        self._last = 0.0

    def start(self, phase: str, total: int, work: float | None = None) -> None:
        self._base += self._done
        self._done, self._total, self._phase = 0, total, phase
        self._emit(force=True)

    def advance(self, n: int = 1, work: float | None = None) -> None:
        self._done += n
        self._emit()

    def finish(self) -> None:
        self._emit(force=True)

    def _emit(self, force: bool = False) -> None:
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


def _stat(path: Path) -> None:
    """Raise what makes a path unusable (a name too long, a folder that cannot be entered); a path that does
    not exist is fine here, since each tool says what that means for it."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        path.stat()


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
        if not self.engines:  # a daemon hands over its resident ones
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
    def _owner(self, candidate: Path) -> tuple[Engine, str] | None:
        # the deepest served root that holds it, so nested roots resolve to the nearer one
        for engine in sorted(self.engines, key=lambda e: len(e.root.parts), reverse=True):
            if candidate == engine.root:
                return engine, ""
            if engine.root in candidate.parents:
                # as_posix() never yields "./x", so a leading dot is part of the name (".github")
                return engine, candidate.relative_to(engine.root).as_posix()
        return None

    def _places(self, path: str) -> list[tuple[Engine, str]]:
        """Where a path names something: an absolute path in the root holding it; a relative one in each served
        root where it exists (with one root, there even if it does not exist, e.g. a deleted file to forget)."""
        try:
            p = Path(path).expanduser()  # pathlib's, which refuses an unknown ~user: said below in words
        except RuntimeError:  # `~name` of a user who does not exist, or no home at all
            raise ArgumentError(
                f"{path} names a home folder that cannot be found", hint="give the path without ~"
            ) from None
        tries = [p] if p.is_absolute() else [root / p for root in self.roots]
        found: list[tuple[Engine, str]] = []
        for tried in tries:
            try:
                candidate = tried.resolve()
                _stat(candidate)
            except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
                raise ArgumentError(
                    f"{path} cannot be resolved ({exc.strerror if isinstance(exc, OSError) else exc})",
                    hint="name a real file or directory",
                ) from None
            place = self._owner(candidate)
            if place is not None and place not in found and (len(tries) == 1 or candidate.exists()):
                found.append(place)
        if found:
            return found
        served = ", ".join(str(r) for r in self.roots)
        if p.is_absolute() or len(self.roots) == 1:
            raise OutsideRoot(
                f"{path} is outside the workspace ({served})",
                hint="name a path inside it; `kenning mcp --root DIR` serves another folder",
            )
        raise ArgumentError(
            f"{path} is in none of the served folders ({served})",
            hint="name an existing path, or an absolute one",
        )

    def _locate(self, path: str) -> tuple[Engine, str]:
        """The one place a path names; a relative path found in several served roots is refused as ambiguous."""
        places = self._places(path)
        if len(places) > 1:
            where = ", ".join(str(engine.root) for engine, _ in places)
            raise ArgumentError(
                f"{path} is in several served folders ({where})", hint="give an absolute path"
            )
        return places[0]

    def split(self, paths: Sequence[str] | None) -> list[tuple[Engine, list[str]]]:
        """The engines to ask and the root-relative paths for each; every engine when no paths are given. A
        relative path counts in every served root that has it."""
        if not paths:
            return [(e, []) for e in self.engines]
        by_engine: dict[int, tuple[Engine, list[str]]] = {}
        for engine, rel in (place for path in paths for place in self._places(path)):
            entry = by_engine.setdefault(id(engine), (engine, []))
            if "" in entry[1]:
                continue  # the whole root already: a part of it adds nothing
            if rel:
                entry[1].append(rel)
            else:
                entry[1][:] = [""]
        return [(e, [r for r in rels if r]) for e, rels in by_engine.values()]

    def _show(self, engine: Engine, rel: str) -> str:
        return rel if len(self.engines) == 1 else str(engine.root / rel)

    # -- tools ------------------------------------------------------------------------------------------------
    def text_search(self, args: dict[str, Any]) -> Answer:
        queries = [args["query"]] if "query" in args else list(args.get("queries") or [])
        if sum(name in args for name in ("query", "queries", "related")) != 1:
            raise ArgumentError(
                "text_search: give exactly one of query, queries and related",
                hint='e.g. {"query": "where are uploads retried"} or {"related": "src/upload.py:42"}',
            )
        if "related" in args:
            return self._related(args)
        if any(not q.strip() for q in queries):
            raise ArgumentError("text_search: a query is empty", hint="describe what you are looking for")
        if args.get("files"):
            return self._files(args, queries)
        budget = int(args.get("budget", schemas.DEFAULT_BUDGET))
        # a budget decides how many hits fit; k, when given, caps them
        k = int(args.get("k", BUDGET_POOL))
        mode = cast(Mode, args.get("mode", "hybrid"))
        preview = cast(Preview, args.get("preview", "short"))
        after = parse_time(args["modified_after"]) if "modified_after" in args else None
        before = parse_time(args["modified_before"]) if "modified_before" in args else None
        globs, types = tuple(args.get("globs", ())), tuple(args.get("types", ()))
        selected = Filters(globs=globs, types=types)
        selected.matcher()  # a bad glob or type is refused up front, for the roots answered literally too
        request: SearchRequest | None = None  # built once, for the first root with an index
        per_root: list[tuple[Engine, list[SearchResult]]] = []
        literal: list[Path] = []  # the roots answered by literal matching
        started: list[
            Engine
        ] = []  # roots indexed by this call: their semantic pass goes on in the background
        for engine, rels in self.split(args.get("paths")):
            results = None
            if not engine.exists() and self._first_index(engine):
                started.append(engine)
            if engine.exists():
                if request is None:
                    request = SearchRequest(
                        tuple(queries),
                        mode=mode,
                        limit=k,
                        filters=replace(
                            selected,
                            modified_after=after,
                            modified_before=before,
                            symbol_types=tuple(args.get("symbol_types", ())),
                        ),
                        trace=bool(args.get("trace")),
                        prefer_symbol=bool(args.get("prefer_symbol")),
                        refresh=cast(Refresh, args.get("refresh", "wait")),
                        preview=preview,
                        budget=budget,
                    )
                try:
                    with self._read_lock:
                        # several roots: each answers with its arm scores, for the merge (engine/roots.py)
                        asked = replace(request, trace=True) if len(self.engines) > 1 else request
                        results = engine.search(asked.within(rels))
                except IndexMissing:
                    results = None  # a first index run has not committed yet: answer literally meanwhile
            if results is None:
                if mode == "semantic":
                    where = "." if len(self.engines) == 1 else str(engine.root)
                    raise IndexMissing(
                        f"{engine.root} has no index yet, so there is nothing to search by meaning",
                        hint=f'call text_index with paths ["{where}"] first, or use mode "hybrid" for '
                        "literal matches",
                    )
                literal.append(engine.root)
                unapplied = [
                    name
                    for name in ("modified_after", "modified_before", "symbol_types", "prefer_symbol")
                    if args.get(name)
                ]
                results = literal_results(
                    engine.root,
                    queries,
                    limit=k,
                    selection=Selection(globs=globs, types=types),
                    paths=[engine.root / r for r in rels],
                    unapplied=unapplied,
                )
            per_root.append((engine, results))
        several = len(self.engines) > 1
        if several and request is not None:
            ranked = [(e, r) for e, r in per_root if e.root not in literal]
            notes = comparable(ranked, dict(request.plan().weights))
            for _, results in ranked:
                for result in results:
                    result.notes += notes
                    if not request.trace:
                        result.hits = [replace(h, trace=None) for h in result.hits]
        answer = search_answer(queries, per_root, k, mode, preview, literal, self._show, several, budget)
        for engine in started:
            engine.complete_in_background()
        return answer

    def _first_index(self, engine: Engine) -> bool:
        """A folder's first search: its words indexed now (seconds), the semantic pass left to a background run
        started after the answer, so the agent is not kept waiting. Only where background runs may be started
        (the `background_index` setting); else the folder is answered literally until text_index. False when
        the words could not be indexed now (another process is writing them: answered literally meanwhile)."""
        if not background.enabled(engine):
            return False
        try:
            with self._write_lock:
                engine.index(None, semantic="later")
        except IndexBusy:
            return False
        return engine.exists()

    def _files(self, args: dict[str, Any], queries: list[str]) -> Answer:
        """text_search with `files`: the files of one root ranked (kenning.search.files), packed to the budget."""
        from kenning.mcp.answers import files_answer
        from kenning.search.files import FILE_POOL, rank_files

        parts = self.split(args.get("paths"))
        if len(parts) > 1:
            raise ArgumentError(
                "text_search: files ranks the files of one served root", hint="give paths inside one root"
            )
        engine, rels = parts[0]
        globs, types = tuple(args.get("globs", ())), tuple(args.get("types", ()))
        request = SearchRequest(
            tuple(queries),
            mode=cast(Mode, args.get("mode", "hybrid")),
            limit=args.get("k"),
            filters=Filters(
                globs=globs,
                types=types,
                modified_after=parse_time(args["modified_after"]) if "modified_after" in args else None,
                modified_before=parse_time(args["modified_before"]) if "modified_before" in args else None,
                symbol_types=tuple(args.get("symbol_types", ())),
            ),
            prefer_symbol=bool(args.get("prefer_symbol")),
            refresh=cast(Refresh, args.get("refresh", "wait")),
            preview=cast(Preview, args.get("preview", "short")),
            budget=int(args.get("budget", schemas.DEFAULT_BUDGET)),
            files=True,
        )
        results = None
        if engine.exists():
            with contextlib.suppress(IndexMissing), self._read_lock:
                results = engine.search(request.within(rels))
        literal = results is None
        if results is None:
            if request.mode == "semantic":
                raise IndexMissing(
                    f"{engine.root} has no index yet, so there is nothing to search by meaning",
                    hint='call text_index with paths ["."] first, or use mode "hybrid" for literal matches',
                )
            results = literal_results(
                engine.root,
                queries,
                limit=FILE_POOL,
                selection=Selection(globs=globs, types=types),
                paths=[engine.root / r for r in rels],
            )
            for result in results:
                result.files = rank_files(result.hits, request.plan().files)
                result.hits = [h for f in result.files for h in f.passages]
        return files_answer(results, request, literal, lambda rel: self._show(engine, rel))

    def _related(self, args: dict[str, Any]) -> Answer:
        """text_search with `related`: the place's root only, since its passages are that index's."""
        place = parse_place(args["related"])
        engine, rel = self._locate(place.path)
        if not engine.exists():
            where = "." if len(self.engines) == 1 else str(engine.root)
            raise IndexMissing(
                f"{engine.root} has no index yet, so nothing is known to be related",
                hint=f'call text_index with paths ["{where}"] first',
            )
        inside = [r for e, rels in self.split(args.get("paths")) if e is engine for r in (rels or [""]) if r]
        request = SearchRequest(
            (),
            mode=cast(Mode, args.get("mode", "hybrid")),
            limit=int(args.get("k", BUDGET_POOL)),
            filters=Filters(
                paths=tuple(inside),
                globs=tuple(args.get("globs", ())),
                types=tuple(args.get("types", ())),
                modified_after=parse_time(args["modified_after"]) if "modified_after" in args else None,
                modified_before=parse_time(args["modified_before"]) if "modified_before" in args else None,
                symbol_types=tuple(args.get("symbol_types", ())),
            ),
            trace=bool(args.get("trace")),
            refresh=cast(Refresh, args.get("refresh", "wait")),
            preview=cast(Preview, args.get("preview", "short")),
            budget=int(args.get("budget", schemas.DEFAULT_BUDGET)),
            related=replace(place, path=rel),
        )
        with self._read_lock:
            results = engine.search(request)
        budget, k = request.budget or schemas.DEFAULT_BUDGET, request.limit or BUDGET_POOL
        label = [request.queries[0]]
        return search_answer(
            label,
            [(engine, results)],
            k,
            request.mode,
            request.preview,
            [],
            self._show,
            len(self.engines) > 1,
            budget,
        )

    def text_index(
        self, args: dict[str, Any], progress: Progress | None = None, cancel: threading.Event | None = None
    ) -> Answer:
        parts = self.split(args["paths"])
        if len(parts) > 1:
            raise ArgumentError(
                "text_index: the paths lie in several served roots", hint="call text_index once per root"
            )
        engine, rels = parts[0]
        missing = [r for r in rels if not (engine.root / r).exists()]
        if missing and not args.get("forget"):
            raise ArgumentError(
                f"text_index: {missing[0]} does not exist in {engine.root}", hint="check the path's spelling"
            )
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
        # the words now; the embeddings in the background when it may run there, so the agent is not blocked
        later = background.enabled(engine)
        report = engine.index(
            None,
            scope=rels,
            scope_glob=args.get("glob"),
            progress=progress,
            cancel=cancel,
            semantic="later" if later else True,
        )
        lines = list(index_text(report))
        if later and not report.interrupted and report.coverage < 1.0:
            engine.complete_in_background()
            lines.append(
                "The other passages' embeddings are being computed in the background (index_status shows how "
                "far); text_search meanwhile ranks by words and scores its leading candidates by meaning."
            )
        return Answer("\n".join(lines), index_json(report, engine))

    def index_status(self, args: dict[str, Any]) -> Answer:
        roots = []
        lines: list[str] = []
        with self._read_lock:
            statuses = [(e, e.status()) for e in self.engines]
        for _, st in statuses:
            step = next_step(st)
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
                    "pruned": st.pruned,
                    "pending": {"added": st.added, "modified": st.modified, "deleted": st.deleted},
                    "size_bytes": st.size_bytes,
                    "last_indexed": st.last_indexed,
                    "ready": st.ready,
                    "next_step": step,
                    "base": st.base,
                }
            )
            lines.append(f"{st.root}: " + ("indexed" if st.exists else "not indexed"))
            if st.exists:
                lines.append(
                    f"  {st.files} files, {st.passages} passages, semantic coverage {st.coverage:.0%}; "
                    f"changed since: {st.added} added, {st.modified} modified, {st.deleted} deleted"
                )
            lines.append(f"  model {st.model} [{st.identity}]")
            if st.base:
                lines.append("  " + base_line(st.base))
            pruned = pruned_line(st.pruned, listed="pruned lists them")
            if pruned:
                lines.append(f"  {pruned}")
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
        budget = int(args.get("budget", schemas.DEFAULT_BUDGET))
        packer = GrepPacker(budget, several=len(self.engines) > 1)
        # one deadline for the whole call: an agent's pattern must not hold a tool thread (or the daemon)
        deadline = grep_mod.Deadline(self.engines[0].config.grep_timeout)
        try:
            for engine, rels in self.split(args.get("paths")):
                selection = engine.stored_selection()
                targets = [engine.root / r for r in rels]
                symbol_of = SymbolLookup(engine.root)
                found_files = grep_mod.grep(
                    engine.root, options, paths=targets, selection=selection, deadline=deadline
                )
                for found in found_files:
                    if packer.full:
                        packer.count(
                            found
                        )  # past the budget, a file is only counted, for the line on what was cut
                        continue
                    items = grep_mod.file_lines(found, symbol_of)
                    packer.add(self._show(engine, found.path), str(engine.root), found.path, items)
                if deadline.hit:
                    break
        except UsageError as exc:
            # grep's messages speak of its command-line flags; here the same fixes are arguments
            message = exc.message.replace("pass -F", "pass fixed: true").replace(
                "pass each line as its own -e", "search for each line in its own grep call"
            )
            raise ArgumentError(f"grep: {message}", hint=exc.hint) from None
        return packer.answer(deadline)

    def symbols(self, args: dict[str, Any]) -> Answer:
        engine, rel = self._locate(args["path"])
        path = engine.root / rel
        if not rel or not path.is_file():
            raise ArgumentError(f"symbols: {args['path']} is not a file", hint="name one source file")
        o = file_outline(path, self._show(engine, rel))
        data = outline_json(o)
        text = outline_lines(o)
        # a generated file can hold thousands of symbols: keep the answer within bounds, and say so
        keep, size = 0, 0
        for line in text:
            size += len(line) + 1
            if size > schemas.MAX_OUTPUT_CHARS - 200 or keep > schemas.MAX_SYMBOLS:
                break
            keep += 1
        data["truncated"] = keep < len(text)
        if data["truncated"]:
            shown = max(keep - 1, 0)  # the first line is the file's own
            data["symbols"] = data["symbols"][:shown]
            text = [*text[:keep], f"[{len(o.symbols) - shown} more symbols cut; read the file for the rest]"]
        return Answer("\n".join(text), data)

    def close(self) -> None:
        for engine in self.engines:
            engine.close()
