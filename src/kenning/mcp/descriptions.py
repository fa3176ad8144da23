"""What the MCP tools tell an agent in words: each tool's description and the server's instructions.

Kept apart from the schemas (`kenning.mcp.schemas`, which re-exports them) so the prose an agent learns from can
be read, and changed, as prose.
"""

SYMBOLS_DESCRIPTION = """\
The outline of one source file: every symbol (module, class, interface, function, value, alias) with its \
scope (Outer.Inner.method), line span and signature, nested in file order. Use it to see a file's structure \
before reading it, or to find the exact lines of a definition to open."""

TEXT_SEARCH_DESCRIPTION = """\
Search this workspace's files by meaning and by words (hybrid BM25 + embeddings) and get back ranked passages: \
each is path:start-end with its text, ready to quote or to read around.

Use it first when you know what you are looking for but not the exact words: "where do we retry failed uploads", \
"how is the config file parsed", a concept, a behaviour, a symptom. Describe it in your own words; give several \
phrasings in `queries` when one may miss. Use the `grep` tool instead when you know an exact string, identifier \
or regex and want every occurrence.

A query that spells an identifier (parse_config, RateLimiter.acquire) puts its definition first; \
`symbol_types` keeps to functions, classes and so on. Read before you rely: open the file around path:start-end. A score only orders hits within one answer; it is not \
a confidence, and the top hit may still be wrong. When no passage matches well (none holds a query word and none \
is close in meaning), the answer says so before the hits and good_match is false: rephrase, or the answer may \
not be in the workspace. Narrow with `paths`, `globs` or `types`. Files edited since \
indexing are brought into the index before the search (`refresh`, bounded to a few seconds; a note says when \
it could not finish); a hit marked stale changed since it was indexed (call text_index on it), one marked \
lexical_only was found by its words only until text_index embeds it. An empty answer may mean the workspace (or that part of \
it) was never indexed: check index_status. Without an index the answer comes from literal matching and says so \
at the top; text_index builds the index.

The answer fits `budget` tokens (2,000 unless you say): of the best 50 hits, as many as fit, each trimmed to the \
lines that hold the query's words, up to 10 lines of text (path:start-end is exactly the lines shown; \
`passage` gives the whole passage's span when part is shown), neighbouring hits of one file merged, the same text in several files shown \
once with the others in also_at. The last lines say what was cut and the tokens used. Spend a budget on the \
right place, not on more hits: narrow with `paths`, `globs` or `types` first; to see more of one location, call \
again with its file in `paths` and preview "full" (or open the file there) rather than raising the budget; \
raise it only to survey many places at once."""

TEXT_INDEX_DESCRIPTION = """\
Build or refresh the search index for files or directories of this workspace (paths ["."] is the whole \
workspace). Only new or changed files are read and only new passages are embedded, so re-running it after edits \
is cheap. Returns what was added, changed, removed, unchanged and skipped (with reasons) and the index's totals. \
With forget=true the paths are removed from the index (the files are untouched). Long runs send progress and can \
be cancelled; finished work is kept."""

INDEX_STATUS_DESCRIPTION = """\
What the search index of this workspace holds: files, passages, semantic coverage, files changed since the last \
index run, the embedding model, and the next step to take (for example: build the index, catch up on changes, or \
search). Call it when text_search returns nothing or seems out of date."""

GREP_DESCRIPTION = """\
Exhaustive search for an exact string or regular expression over the workspace's files (no index needed; the \
same files text_search sees: .gitignore'd, binary and secret files are left out). Use it when you know the exact \
text, identifier or pattern and need every occurrence; use text_search to find code or prose by what it does or \
means. Returns matching lines with their line numbers, grouped by file, within `budget` tokens (2,000 unless \
you say): a run of consecutive matching lines shows its first two and its last, and files past the budget are \
counted, not shown. Narrow the pattern or `paths` rather than raising the budget."""

SERVER_INSTRUCTIONS = """\
kenning searches this workspace. text_search finds passages by meaning and words (path:start-end plus text); \
grep finds every occurrence of an exact string; text_index builds or refreshes the index; index_status says \
what is indexed and what to do next. Scores rank within one answer and are not confidences. Answers fit a \
token budget: narrow with paths before asking for more."""
