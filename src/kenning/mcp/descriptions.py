"""What the MCP tools tell an agent in words: each tool's description and the server's instructions.

Kept apart from the schemas (`kenning.mcp.schemas`, which re-exports them) so the prose an agent learns from can
be read, and changed, as prose. An agent pays for this text in every session (`tests/test_mcp.py` holds the whole
listing to its size), so it says when to use each tool and what an answer cannot tell; whatever a refusal, a note
or the answer's own first and last lines say is left to them.
"""

TEXT_SEARCH_DESCRIPTION = """\
Find code or docs by what they do or mean (BM25 + embeddings): ranked passages, path:start-end with their lines. \
Use it first when you can describe what you want but not its exact text; grep is for an exact string or every \
occurrence. A name (parse_config, Cache.get) finds its definition first. Scores only order one answer. Narrow \
with paths, globs or types rather than raising budget; to read one place whole, put its file in paths with \
preview full."""

TEXT_INDEX_DESCRIPTION = """\
Index files or folders (paths ["."]: the whole workspace) so text_search finds them by meaning. Incremental: \
re-run it on what you edited. forget removes paths from the index."""

INDEX_STATUS_DESCRIPTION = """\
What the index holds, what changed since, and the next step. Call it when text_search finds nothing."""

GREP_DESCRIPTION = """\
Every line matching a regex (RE2), or a literal with fixed, grouped by file; needs no index. Use it for an \
exact identifier or message and to find all uses."""

SYMBOLS_DESCRIPTION = """\
Outline of one source file: each symbol's kind, scope, lines and signature. Use it to see a file's shape or \
find a definition's lines before reading."""

SERVER_INSTRUCTIONS = """\
kenning searches this workspace: text_search by meaning (path:start-end and text), grep for exact strings. \
Read around a hit before relying on it."""
