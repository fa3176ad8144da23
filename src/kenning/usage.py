"""The prose of `kenning --help`: what the whole command is, and the examples each command's help ends with.

`kenning.cli` builds the parser from these; they are kept apart from it so that the parser reads as the arguments
each command takes.
"""

DESCRIPTION = (
    "Find the passage you meant in a folder of code and documents: hybrid BM25 + embedding "
    "search over a local index, offline on a CPU. Every hit is path:start-end with its text."
)
EPILOG = (
    "commands: index, search, grep, symbols, status, models, mcp, serve, daemon, install, uninstall, gate. "
    "`kenning COMMAND --help` shows each with examples.\n"
    "exit codes: 0 found/ok, 1 nothing found or not ready, 2 error, 130 interrupted.\n"
    "config: defaults < ~/.config/kenning/config.toml < ROOT/.kenning.toml < KENNING_* env < flags."
)

STORE_HELP = (
    "keep the index on this PostgreSQL server (postgresql://[user@]host[:port]/db; $KENNING_STORE); "
    "default: a folder beside the root"
)
STORE_NAME_HELP = "the index's name on that server (default: the root folder's name; $KENNING_STORE_NAME)"
SNAPSHOT_DESCRIPTION = "Ship a commit's index as one file (export), start from one (import), prune them."
LISTEN_HELP = (
    "loopback address for MCP over HTTP and the status page (default 127.0.0.1:7997; 0 = any free port)"
)
COMMIT_HELP = "index the files of this commit, read from git's objects, not the working tree (what CI shares)"
SNAPSHOT_SOURCE_HELP = (
    "start a root without an index from the newest snapshot of a commit in HEAD's history: a .kpack file, a "
    "folder of them, an http(s) URL with {commit}, or a team's index on postgresql:// (searched there, your "
    "edits on top) ($KENNING_SNAPSHOT_SOURCE)"
)
EXAMPLES = {
    "snapshot": """examples:
  kenning snapshot export --commit HEAD -o kenning-$(git rev-parse HEAD).kpack .   (in CI)
  kenning snapshot export --commit HEAD --base kpacks/main.kpack -o kpacks/next.kpack .   (a delta: what changed)
  kenning snapshot import /mnt/ci/kpacks .     the newest snapshot of HEAD's history, then my edits on top
  kenning snapshot import https://ci.example/kpacks/{commit}.kpack .
  kenning snapshot prune --keep 5 /mnt/ci/kpacks""",
    "index": """examples:
  kenning index ~/src/project              build or refresh the index of a folder
  kenning index -t py -t md .              only Python and Markdown (stored; later runs reuse it)
  kenning index -g '!docs/archive/**' .    exclude a subtree (globs are ordered; '!' excludes)
  kenning index --forget build/old.md .    remove a file or directory from the index
  kenning index --rebuild --model hash .   rebuild from scratch with another embedder
  kenning index --commit HEAD .            index the last commit's files, not the working tree (CI)""",
    "search": """examples:
  kenning search "where do we retry failed uploads" ~/src/project
  kenning search -k 5 --json "rate limiting" .
  kenning search --budget 2000 "retry backoff" .   (fit the answer in 2,000 tokens)
  kenning search --path src -t py "parse the config file"
  kenning search -q "token refresh" -q "session expiry" --fuse .
  kenning search --trace --preview full "backoff" .
  kenning search --symbol-type function "parse the config file" .
  kenning search --prefer-symbol "RateLimiter acquire" .""",
    "related": """examples:
  kenning related src/upload.py:42 .        code related to line 42: its tests, other implementations, docs
  kenning related src/upload.py:40-60 -t py --budget 1500 .
  kenning related --json lib/cache.rb:12 ~/src/project""",
    "grep": """examples:
  kenning grep -i "retry_count" .
  kenning grep -F -C 2 "TODO(" src docs
  kenning grep --no-symbols "retry" .     without the `@ function name` lines
  kenning grep -w -e -v .                  a pattern starting with '-' goes after -e
  kenning grep --json "retry" src          JSON Lines: one record per line, then a summary
  kenning grep -c "retry" .                path:N per matching file (-l: only the paths)""",
    "status": """examples:
  kenning status .
  kenning status --check-ready . && echo ready
  kenning status --json .""",
    "models": """examples:
  kenning models
  kenning models --json
  kenning models install                   fetch the default model's weights (pinned, 83 MB) and prepare it""",
    "symbols": """examples:
  kenning symbols src/app.py               kinds, names, spans and signatures, nested by scope
  kenning symbols --json src/*.py""",
    "mcp": """examples:
  kenning mcp                              serve the current directory to an agent over stdio
  kenning mcp --root ~/src/a --root ~/src/b
  kenning mcp --check                      say whether the server would start, and why not""",
    "install": """examples:
  kenning install                          register kenning with every supported agent (asks first)
  kenning install --target claude --gate   Claude Code only, with the search-first gate
  kenning install --dry-run                show what would change, change nothing""",
    "uninstall": """examples:
  kenning uninstall                        remove kenning's managed blocks from every agent's config
  kenning uninstall --target codex -y""",
    "serve": """examples:
  kenning serve ~/src/project              serve in the foreground (Ctrl-C stops it)
  kenning serve --listen 127.0.0.1:0 .     any free port (see `kenning daemon status`)""",
    "daemon": """examples:
  kenning daemon start ~/src/project       start the background daemon, attach a root
  kenning daemon status                    roots, coverage, queue, watcher health, memory, web address
  kenning daemon status --json             the same as one JSON object
  kenning daemon stop --timeout 60         wait up to a minute for its wind-down
  kenning daemon start --help              each action's own options""",
    "gate": """examples:
  (run by Claude Code as a PreToolUse hook; `kenning install --gate` registers it)
  echo '{"session_id":"demo","cwd":"'"$PWD"'","tool_name":"Grep","tool_input":{"pattern":"x"}}' | kenning gate""",
}
