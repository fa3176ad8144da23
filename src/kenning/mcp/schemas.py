"""The MCP tool contracts: names, the input and output JSON schemas, and (from `descriptions`) the prose an agent
learns them from.

Every call is checked against its tool's input schema before it runs (`kenning.mcp.arguments`); `tools/list`
publishes the same schema without its bounds and defaults (`published`), which a refusal states when an argument
passes one. The output schemas are not published: an agent pays for every character listed in every session, the
MCP specification makes an output schema optional and lets a result carry structured content without one, and
the structured content an answer carries keeps the shape written here, which the tests check every answer
against.
"""

from __future__ import annotations

from typing import Any

from kenning.mcp.descriptions import (
    GREP_DESCRIPTION,
    INDEX_STATUS_DESCRIPTION,
    SERVER_INSTRUCTIONS,
    SYMBOLS_DESCRIPTION,
    TEXT_INDEX_DESCRIPTION,
    TEXT_SEARCH_DESCRIPTION,
)
from kenning.types import SYMBOL_KINDS

__all__ = [
    "GREP_DESCRIPTION",
    "INDEX_STATUS_DESCRIPTION",
    "SERVER_INSTRUCTIONS",
    "SYMBOLS_DESCRIPTION",
    "TEXT_INDEX_DESCRIPTION",
    "TEXT_SEARCH_DESCRIPTION",
]

MAX_QUERY_CHARS = 4000
MAX_QUERIES = 16
MAX_LIST_ITEMS = 64
MAX_ITEM_CHARS = 1024
MAX_PATTERN_CHARS = 1000
MAX_OUTPUT_CHARS = 40_000  # what one tool answer may put in front of the model
MAX_SYMBOLS = 1000
# tokens an answer of text_search or grep takes unless the call gives its own budget: chosen by measurement
# (bench/history/2026-12-04-token-budget.md)
DEFAULT_BUDGET = 2000
MIN_BUDGET = 100
MAX_BUDGET = 10_000  # about MAX_OUTPUT_CHARS of code

Schema = dict[str, Any]


def _strings(
    what: str | None = None, *, max_items: int = MAX_LIST_ITEMS, max_chars: int = MAX_ITEM_CHARS
) -> Schema:
    schema: Schema = {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": max_chars},
        "maxItems": max_items,
    }
    return {**schema, "description": what} if what else schema


def _record(**properties: Schema) -> Schema:
    """An object that always holds every one of `properties`."""
    return {"type": "object", "properties": properties, "required": list(properties)}


_COUNT: Schema = {"type": "integer"}
# what an answer says of its budget (text_search's says more)
_BUDGET_USED: dict[str, Schema] = {
    "tokens": _COUNT,
    "used": _COUNT,
    "tokenizer": {"type": "string"},
}


def _budget() -> Schema:
    return {
        "type": "integer",
        "minimum": MIN_BUDGET,
        "maximum": MAX_BUDGET,
        "default": DEFAULT_BUDGET,
        "description": f"Answer tokens ({DEFAULT_BUDGET:,})",
    }


def _enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values), "default": values[0]}


_SEARCH_PATHS = _strings("Only passages under these files or folders")
# grep reads files line by line: it has no passages
_GREP_PATHS = _strings("Only these files or directories")
_TIME: Schema = {"type": "string", "maxLength": 64, "description": "YYYY-MM-DD or ISO time"}

TEXT_SEARCH_INPUT: Schema = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "What you look for, in your own words, or a name",
        },
        "queries": {
            **_strings(
                "Several phrasings at once, each one's best first",
                max_items=MAX_QUERIES,
                max_chars=MAX_QUERY_CHARS,
            ),
            "minItems": 1,
        },
        "related": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_ITEM_CHARS,
            "description": "path:line or path:start-end instead of a query: code related to it (its tests, "
            "implementations, docs)",
        },
        "k": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Hits per query at most"},
        "budget": _budget(),
        "paths": _SEARCH_PATHS,
        "globs": _strings('e.g. ["*.py", "!tests/**"]'),
        "types": _strings('e.g. ["py", "md"]', max_items=32, max_chars=64),
        "mode": _enum("hybrid", "lexical", "semantic"),
        "preview": _enum("short", "none", "full"),
        "modified_after": _TIME,
        "modified_before": {k: v for k, v in _TIME.items() if k != "description"},
        "trace": {"type": "boolean", "default": False},
        "symbol_types": {
            "type": "array",
            "items": {"type": "string", "enum": list(SYMBOL_KINDS)},
            "maxItems": len(SYMBOL_KINDS),
        },
        "prefer_symbol": {"type": "boolean", "default": False},
        "refresh": _enum("wait", "background", "off"),
        "files": {"type": "boolean", "default": False, "description": "Rank files (a pasted bug report too)"},
    },
    "additionalProperties": False,
}

_TRACE_ARM = _record(rank={"type": ["integer", "null"]}, score={"type": ["number", "null"]})

_HIT: Schema = {
    "type": "object",
    "description": "What is shown of one passage, or of several overlapping or adjacent ones of one file. Fields "
    "that would be empty, null or false are left out.",
    "properties": {
        "path": {"type": "string", "description": "Relative to the root it was found in."},
        "root": {
            "type": "string",
            "description": "The served root holding it (only when several are served).",
        },
        "start_line": {"type": "integer", "minimum": 1, "description": "First line shown."},
        "end_line": {"type": "integer", "minimum": 1, "description": "Last line shown."},
        "score": {
            "type": "number",
            "description": "Ranks hits within one group of one answer (the best is near 1 whatever it is); not a "
            "confidence: see the group's match.",
        },
        "matched_by": {"type": "string", "enum": ["lexical", "semantic", "both"]},
        "text": {
            "type": ["string", "null"],
            "description": "Lines start_line to end_line (null: preview none).",
        },
        "passage": {"type": "string", "description": "start-end of the whole passage, when part is shown."},
        "symbol": {"type": "string", "description": "The code symbol it belongs to: kind and scope."},
        "signature": {
            "type": "string",
            "description": "That symbol's signature, when the text does not show it.",
        },
        "defines": {"type": "array", "items": {"type": "string"}, "description": "Symbols defined in it."},
        "heading": {"type": "string", "description": "The document section it is in."},
        "stale": {"type": "boolean", "description": "The file changed since it was indexed."},
        "lexical_only": {"type": "boolean", "description": "No embedding yet: only its words could find it."},
        "groups": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Which query groups found it, with the rank in each, e.g. Q1#1 (several queries).",
        },
        "also_at": {"type": "array", "items": {"type": "string"}, "description": "path:start-end of copies."},
        "trace": {
            "type": "object",
            "properties": {"lexical": _TRACE_ARM, "semantic": _TRACE_ARM, "fused_rank": {"type": "integer"}},
        },
    },
    "required": ["path", "start_line", "end_line", "score", "matched_by", "text"],
}

_MATCH: Schema = {
    "type": ["object", "null"],
    "description": "How well the group's best passage matches, on an absolute scale (unlike score).",
    "properties": {
        "good": {
            "type": "boolean",
            "description": "A passage holds a query word that is not a stop word, or its similarity reaches level.",
        },
        "lexical": {
            "type": "boolean",
            "description": "Some passage holds a query word that is not a stop word.",
        },
        "similarity": {
            "type": ["number", "null"],
            "description": "The best passage's raw cosine similarity to the query (null without embeddings).",
        },
        "level": {
            "type": ["number", "null"],
            "description": "The similarity that counts as a good match for this model (calibrated).",
        },
    },
    "required": ["good", "lexical", "similarity", "level"],
}

_BASE: Schema = {
    "type": ["object", "null"],
    "description": "The commit the index is based on (a snapshot built by CI, or a team's index), and how far "
    "the working tree has moved from it; null for an index of the working tree alone.",
    "properties": {
        "commit": {"type": "string"},
        "committed": {"type": "number", "description": "The commit's time, seconds since the epoch."},
        "age_seconds": {"type": "integer"},
        "subject": {"type": "string"},
        "source": {"type": "string", "description": '"git" (indexed here), or the snapshot it came from.'},
        "overlaid": {
            "type": ["integer", "null"],
            "description": "Files of the working tree that differ from the commit and are searched from "
            "this machine's own index instead.",
        },
        "remote": {"type": "boolean", "description": "Its vectors were made by a remote embedder."},
    },
    "required": ["commit", "committed", "age_seconds", "source", "overlaid"],
}

TEXT_SEARCH_OUTPUT: Schema = {
    "type": "object",
    "properties": {
        "literal": {
            "type": "boolean",
            "description": "True when there is no index and these are literal matches of the query's words "
            "(absent otherwise).",
        },
        "mode": {"type": "string"},
        "searched": {"type": "integer", "description": "Passages (or files, when literal) searched."},
        "coverage": {
            "type": "number",
            "description": "Share of passages that have an embedding (0-1), when some have none.",
        },
        "groups": {
            "type": "array",
            "description": "Each query group's summary, when there are several.",
            "items": _record(
                group={"type": "string"},
                query={"type": "string"},
                searched=_COUNT,
                hits=_COUNT,
                notes={"type": "array", "items": {"type": "string"}},
                match=_MATCH,
            ),
        },
        "hits": {"type": "array", "items": _HIT},
        "files": {
            "type": "array",
            "description": "With files: the files ranked (hits is then empty), each with its best passages.",
            "items": _record(
                path={"type": "string"},
                score={"type": "number", "description": "Ranks files within one answer."},
                matched={"type": "integer", "description": "Its passages among those weighed."},
                passages={
                    "type": "array",
                    "items": _record(
                        start_line={"type": "integer", "minimum": 1},
                        end_line={"type": "integer", "minimum": 1},
                        score={"type": "number"},
                        text={"type": ["string", "null"]},
                    ),
                },
            ),
        },
        "notes": {"type": "array", "items": {"type": "string"}},
        "match": {
            **_MATCH,
            "description": "How far the best passage is from a good match, when it is not one "
            "(one query group).",
        },
        "budget": {
            "type": "object",
            "description": "The tokens the answer could take and took (at most, in either its text or this "
            "structured form), the tokenizer that counted them, and what was cut.",
            "properties": {
                **_BUDGET_USED,
                "left_out": {"type": "integer", "description": "Hits not shown."},
                "trimmed": {"type": "integer", "description": "Hits shown in part."},
            },
            "required": [*_BUDGET_USED, "left_out", "trimmed"],
        },
        "good_match": {
            "type": "boolean",
            "description": "Some group has a passage that matches well. False: the hits are only the closest "
            "there are; rephrase, or the workspace may not hold the answer.",
        },
        "base": {"oneOf": [_BASE, {"type": "array", "items": _BASE}]},
    },
    "required": ["mode", "searched", "hits", "notes", "good_match", "budget"],
}

TEXT_INDEX_INPUT: Schema = {
    "type": "object",
    "properties": {
        "paths": {**_strings(), "minItems": 1},
        "glob": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_ITEM_CHARS,
            "description": 'Only matching files, e.g. "**/*.md"',
        },
        "forget": {"type": "boolean", "default": False},
    },
    "required": ["paths"],
    "additionalProperties": False,
}

_SKIPPED: Schema = {"type": "array", "items": _record(path={"type": "string"}, reason={"type": "string"})}

TEXT_INDEX_OUTPUT: Schema = {
    "type": "object",
    "properties": {
        "root": {"type": "string"},
        "forgot": {"type": "boolean"},
        "added": {"type": "integer"},
        "changed": {"type": "integer"},
        "removed": {"type": "integer"},
        "unchanged": {"type": "integer"},
        "skipped": _SKIPPED,
        "skipped_total": {"type": "integer"},
        "pruned": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Folders the default ignore list pruned (a line !FOLDER/ in the root's .ignore "
            "indexes one).",
        },
        "passages_added": {"type": "integer"},
        "passages_removed": {"type": "integer"},
        "embedded": {"type": "integer"},
        "files": {"type": "integer", "description": "Files the index now holds."},
        "passages": {"type": "integer", "description": "Passages the index now holds."},
        "coverage": {"type": "number"},
        "interrupted": {"type": "boolean"},
        "base": _BASE,
        "snapshot": {
            "type": ["string", "null"],
            "description": "The snapshot this run started the index from, when it did.",
        },
        "notes": {"type": "array", "items": {"type": "string"}},
        "elapsed_s": {"type": "number"},
    },
    "required": [
        "root",
        "forgot",
        "added",
        "changed",
        "removed",
        "unchanged",
        "skipped",
        "files",
        "passages",
    ],
}

INDEX_STATUS_INPUT: Schema = {"type": "object", "properties": {}, "additionalProperties": False}

_ROOT_STATUS: Schema = {
    "type": "object",
    "properties": {
        "root": {"type": "string"},
        "indexed": {"type": "boolean"},
        "model": {"type": "string"},
        "files": {"type": "integer"},
        "passages": {"type": "integer"},
        "embedded": {"type": "integer"},
        "coverage": {"type": "number"},
        "skipped": {"type": "integer"},
        "pruned": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Folders the default ignore list pruned, as of the last index run.",
        },
        "pending": _record(added=_COUNT, modified=_COUNT, deleted=_COUNT),
        "size_bytes": {"type": "integer"},
        "last_indexed": {"type": ["number", "null"]},
        "ready": {"type": "boolean"},
        "next_step": {"type": "string"},
        "base": _BASE,
    },
    "required": [
        "root",
        "indexed",
        "model",
        "files",
        "passages",
        "coverage",
        "pending",
        "ready",
        "next_step",
    ],
}

INDEX_STATUS_OUTPUT: Schema = {
    "type": "object",
    "properties": {
        "roots": {"type": "array", "items": _ROOT_STATUS},
        "embedder": _record(name={"type": "string"}, identity={"type": "string"}, dim=_COUNT),
    },
    "required": ["roots", "embedder"],
}

GREP_INPUT: Schema = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_CHARS},
        "paths": _GREP_PATHS,
        "fixed": {"type": "boolean", "default": False},
        "ignore_case": {"type": "boolean", "default": False},
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": 10,
            "default": 0,
            "description": "Lines around each match",
        },
        "budget": _budget(),
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

GREP_OUTPUT: Schema = {
    "type": "object",
    "properties": {
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "root": {"type": "string", "description": "Only when several roots are served."},
                    "lines": {
                        "type": "array",
                        "description": "Matching lines (and context lines, with match false), or a run of "
                        "matching lines collapsed to its span and count.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "line": {"type": "integer"},
                                "text": {"type": "string"},
                                "match": {"type": "boolean", "description": "false: a context line."},
                                "symbol": {
                                    "type": "string",
                                    "description": "The enclosing code symbol, e.g. 'function Outer.method', "
                                    "on the first match inside it.",
                                },
                                "collapsed": {"type": "string", "description": "start-end not shown."},
                                "matches": {"type": "integer"},
                            },
                        },
                    },
                },
                "required": ["path", "lines"],
            },
        },
        "matched_lines": {"type": "integer", "description": "Matching lines found, shown or not."},
        "truncated": {"type": "boolean", "description": "Some matching lines are not shown (the budget)."},
        "partial": {
            "type": "boolean",
            "description": "The search stopped at its time limit (grep_timeout) before every file was searched.",
        },
        "budget": _record(**_BUDGET_USED),
    },
    "required": ["files", "matched_lines", "truncated", "partial", "budget"],
}

SYMBOLS_INPUT: Schema = {
    "type": "object",
    "properties": {"path": {"type": "string", "minLength": 1, "maxLength": MAX_ITEM_CHARS}},
    "required": ["path"],
    "additionalProperties": False,
}

SYMBOLS_OUTPUT: Schema = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "lang": {"type": ["string", "null"]},
        "supported": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "truncated": {"type": "boolean", "description": "Symbols were left out to bound the answer's size."},
        "symbols": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": list(SYMBOL_KINDS)},
                    "name": {"type": "string"},
                    "scope": {"type": "string"},
                    "start_line": {"type": "integer"},
                    "end_line": {"type": "integer"},
                    "signature": {"type": "string"},
                    "doc": {"type": "string"},
                },
                "required": ["kind", "name", "scope", "start_line", "end_line", "signature"],
            },
        },
    },
    "required": ["path", "lang", "supported", "symbols"],
}


# what a published schema leaves to the checks: an argument past a bound is refused with the bound in words
_CHECKED_ONLY = frozenset({"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "default"})


def published(schema: Schema) -> Schema:
    """An input schema as `tools/list` shows it: its types, names, enums and words, without the bounds and
    defaults that the checks (`kenning.mcp.arguments`) apply and a refusal states."""
    out: Schema = {}
    for key, value in schema.items():
        if key in _CHECKED_ONLY:
            continue
        if key == "properties":
            out[key] = {name: published(prop) for name, prop in value.items()}
        elif isinstance(value, dict):
            out[key] = published(value)
        else:
            out[key] = value
    return out
