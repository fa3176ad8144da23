"""The real `kenning` CLI in a subprocess: commands, exit codes, JSON Lines, errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import KEY_BODY, KEY_FILES, NOT_KEY_FILES, armor, git, make_tree, run_cli


def test_every_command_has_help_with_examples(tmp_path: Path) -> None:
    top = run_cli("--help", cwd=tmp_path)
    assert top.returncode == 0 and "exit codes" in top.stdout
    for command in ("index", "search", "grep", "status", "models"):
        out = run_cli(command, "--help", cwd=tmp_path)
        assert out.returncode == 0 and "examples:" in out.stdout, command


def test_regression_daemon_start_help_printed_the_generic_daemon_help(tmp_path: Path) -> None:
    seen = set()
    for action, own in (("start", "--listen"), ("stop", "--timeout"), ("status", "--json")):
        out = run_cli("daemon", action, "--help", cwd=tmp_path)
        assert out.returncode == 0 and out.stdout.startswith(f"usage: kenning daemon {action} "), out.stdout
        assert own in out.stdout
        seen.add(out.stdout)
    assert len(seen) == 3  # each its own
    assert "--listen" not in run_cli("daemon", "status", "--help", cwd=tmp_path).stdout
    # an action's options stay its own, and roots still follow options
    out = run_cli("daemon", "status", "--timeout", "3", cwd=tmp_path)
    assert out.returncode == 2 and "unrecognized arguments: --timeout 3" in out.stderr


def test_version_goes_to_stdout(tmp_path: Path) -> None:
    # it went to stderr: `v=$(kenning --version)` captured nothing
    out = run_cli("--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("kenning ") and not out.stderr


def test_unknown_flag_is_one_line_exit_2(tmp_path: Path) -> None:
    out = run_cli("search", "--frobnicate", "x", cwd=tmp_path)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "--frobnicate" in out.stderr


def test_missing_root_is_one_line_exit_2(tmp_path: Path) -> None:
    out = run_cli("index", str(tmp_path / "nope"), cwd=tmp_path)
    assert out.returncode == 2 and "does not exist" in out.stderr and "Traceback" not in out.stderr


def test_index_search_status_roundtrip(corpus: Path) -> None:
    out = run_cli("index", str(corpus), cwd=corpus.parent)
    assert out.returncode == 0, out.stderr
    assert "5 added" in out.stdout
    out = run_cli("search", "retry_count", str(corpus), cwd=corpus.parent)
    assert out.returncode == 0 and out.stdout.startswith("src/upload.py:")
    out = run_cli("search", "zzzqqqxxx", str(corpus), "--lexical", cwd=corpus.parent)
    assert out.returncode == 1
    out = run_cli("status", "--check-ready", str(corpus), cwd=corpus.parent)
    assert out.returncode == 0 and "ready" in out.stdout
    (corpus / "new.md").write_text("# New\n\ntext\n")
    out = run_cli("status", "--check-ready", "--json", str(corpus), cwd=corpus.parent)
    assert out.returncode == 1 and json.loads(out.stdout)["added"] == 1


def test_regression_a_path_filter_naming_nothing_is_an_error_not_an_empty_search(corpus: Path) -> None:
    # a typo in --path searched nothing and said only "nothing to search"
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0
    out = run_cli("search", "--path", "scr", "retry_count", str(corpus), cwd=corpus.parent)
    assert out.returncode == 2, out.stdout
    assert len(out.stderr.strip().splitlines()) == 1 and "'scr'" in out.stderr


def test_regression_path_filter_is_read_from_the_current_directory(corpus: Path) -> None:
    # from src/, `--path upload.py ..` looked for <root>/upload.py and found nothing
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0
    out = run_cli("search", "--path", "upload.py", "--lexical", "retry_count", "..", cwd=corpus / "src")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("src/upload.py:")


def test_json_lines_schema(corpus: Path) -> None:
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0
    out = run_cli("search", "-k", "2", "--json", "--trace", "rate limiting", str(corpus), cwd=corpus.parent)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    hits, summary = lines[:-1], lines[-1]
    assert summary["type"] == "summary" and summary["schema"] == 1 and summary["hits"] == len(hits) <= 2
    for h in hits:
        assert h["type"] == "hit" and set(h) >= {
            "path",
            "start_line",
            "end_line",
            "score",
            "matched_by",
            "stale",
            "text",
            "trace",
        }
        assert h["matched_by"] in ("lexical", "semantic", "both") and h["trace"]["fused_rank"] >= 1


def test_search_walks_up_to_nearest_indexed_ancestor(corpus: Path) -> None:
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0
    out = run_cli("search", "--json", "upload", str(corpus / "src"), cwd=corpus.parent)
    paths = {json.loads(line).get("path") for line in out.stdout.splitlines()} - {None}
    assert paths and all(p.startswith("src/") for p in paths)


def test_search_without_index_builds_one(corpus: Path) -> None:
    out = run_cli("search", "retry", str(corpus), cwd=corpus.parent)
    assert out.returncode == 0 and "indexing its words first" in out.stderr
    assert (corpus / ".kenning" / "kenning.json").exists()


def test_search_no_index_falls_back_to_literal_and_says_so(corpus: Path) -> None:
    out = run_cli("search", "--no-index", "exponential backoff", str(corpus), cwd=corpus.parent)
    assert out.returncode == 0 and "literal matches" in out.stderr and "README.md" in out.stdout
    assert not (corpus / ".kenning").exists()
    out = run_cli("search", "--no-index", "--json", "backoff", str(corpus), cwd=corpus.parent)
    assert json.loads(out.stdout.splitlines()[-1])["literal"] is True


def test_multiple_groups_and_preview_levels(corpus: Path) -> None:
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0
    out = run_cli("search", "-q", "rate limiting", "-q", "retry", str(corpus), cwd=corpus.parent)
    assert "Q1: rate limiting" in out.stdout and "Q2: retry" in out.stdout
    none = run_cli("search", "--preview", "none", "retry", str(corpus), cwd=corpus.parent)
    full = run_cli("search", "--preview", "full", "retry", str(corpus), cwd=corpus.parent)
    assert len(none.stdout) < len(full.stdout)


def test_selection_is_stored_and_reused(corpus: Path) -> None:
    out = run_cli("index", "-t", "py", "--json", str(corpus), cwd=corpus.parent)
    assert sorted(json.loads(out.stdout)["added"]) == ["src/limits.py", "src/upload.py"]
    out = run_cli("index", "--json", str(corpus), cwd=corpus.parent)
    assert json.loads(out.stdout)["unchanged"] == 2 and json.loads(out.stdout)["added"] == []
    out = run_cli("index", "--reset-selection", "--json", str(corpus), cwd=corpus.parent)
    assert len(json.loads(out.stdout)["added"]) == 3


def test_unknown_type_is_a_clear_error(corpus: Path) -> None:
    out = run_cli("index", "-t", "nosuchtype", str(corpus), cwd=corpus.parent)
    assert out.returncode == 2 and "nosuchtype" in out.stderr and "Traceback" not in out.stderr


def test_forget_and_drop(corpus: Path) -> None:
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0
    out = run_cli("index", "--forget", "src", "--json", str(corpus), cwd=corpus.parent)
    assert json.loads(out.stdout)["removed"] == ["src/limits.py", "src/upload.py"]
    out = run_cli("index", "--drop", str(corpus), cwd=corpus.parent, input="")
    assert out.returncode == 2 and "--yes" in out.stderr
    assert run_cli("index", "--drop", "--yes", str(corpus), cwd=corpus.parent).returncode == 0
    # only the lock a queued writer may wait on, and the .gitignore that keeps the folder out of git, remain
    assert {p.name for p in (corpus / ".kenning").iterdir()} <= {"writer.lock", "writer.json", ".gitignore"}
    again = run_cli("index", "--drop", "--yes", str(corpus), cwd=corpus.parent)
    assert again.returncode == 0 and "nothing to delete" in again.stderr


def test_models_lists_default(tmp_path: Path) -> None:
    out = run_cli("models", "--json", cwd=tmp_path, env={"KENNING_MODEL": "minilm"})
    models = [json.loads(line) for line in out.stdout.splitlines()]
    assert any(m["name"] == "minilm" and m["default"] and m["available"] for m in models)


def test_remote_embedder_refused_without_opt_in(corpus: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "xdg" / "kenning"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text(
        '[embedders.remote]\nprovider = "openai"\nurl = "http://127.0.0.1:9"\ndim = 8\n'
    )
    out = run_cli(
        "index",
        "--model",
        "remote",
        str(corpus),
        cwd=corpus.parent,
        env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")},
    )
    assert out.returncode == 2 and "--allow-remote" in out.stderr


def test_workspace_config_cannot_opt_into_remote(corpus: Path) -> None:
    (corpus / ".kenning.toml").write_text("allow_remote = true\n")
    out = run_cli("index", str(corpus), cwd=corpus.parent)
    assert out.returncode == 2 and "allow_remote" in out.stderr


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_grep_command_exit_codes(corpus: Path, engine: str) -> None:
    import shutil

    if engine == "rg" and not shutil.which("rg"):
        pytest.skip("rg not installed")
    out = run_cli("grep", "--engine", engine, "-i", "RETRY_COUNT", str(corpus), cwd=corpus.parent)
    assert out.returncode == 0 and "upload.py" in out.stdout
    out = run_cli("grep", "--engine", engine, "zzzqqq", str(corpus), cwd=corpus.parent)
    assert out.returncode == 1


def jaguar_repo(tmp_path: Path) -> Path:
    """The reviewer's repository: its top ignores logs and secret_dir/, which are down in pkg/."""
    par = make_tree(
        tmp_path / "par",
        {
            ".gitignore": "*.log\nsecret_dir/\n",
            "pkg/debug.log": "jaguar log\n",
            "pkg/mod.txt": "jaguar code\n",
            "pkg/secret_dir/notes.txt": "jaguar private\n",
            "docs/guide.md": "x marks the spot\n",
            "src/lib/a.txt": "needle lib\n",
            "src/lib/skip.txt": "needle skipped\n",
            "config/c.txt": "needle conf\n",
            "myignore": "skip.txt\n",
        },
    )
    git(par, "init", "-q")
    return par


def printed_paths(out: subprocess.CompletedProcess[str]) -> list[str]:
    """The file headings of `kenning grep` output (not its numbered lines, `@ symbol` labels or blank lines)."""
    return [ln for ln in out.stdout.splitlines() if ln and not ln[0].isdigit() and not ln.startswith("@ ")]


def test_grep_path_narrows_the_search_of_the_project_instead_of_becoming_its_root(tmp_path: Path) -> None:
    """Regression: `grep PATTERN PATH` searched PATH as a root of its own: the repository's .gitignore did
    not apply, paths printed relative to PATH, globs and --ignore-file were read from PATH."""
    par = jaguar_repo(tmp_path)
    out = run_cli("grep", "jaguar", "pkg", cwd=par)
    assert (out.returncode, out.stdout) == (0, "pkg/mod.txt\n1:jaguar code\n"), out.stderr
    assert run_cli("grep", "jaguar", cwd=par / "pkg").stdout == "mod.txt\n1:jaguar code\n"
    assert run_cli("grep", "x", "docs/guide.md", cwd=par).stdout.splitlines()[0] == "docs/guide.md"
    out = run_cli("grep", "-e", "jaguar", "-e", "marks", "./pkg/", "docs", cwd=par)
    assert printed_paths(out) == ["docs/guide.md", "./pkg/mod.txt"]
    for paths in (["config", "src"], ["src"]):  # a glob means the same whatever PATHs come with it
        out = run_cli("grep", "-g", "src/lib/**", "needle", *paths, cwd=par)
        assert printed_paths(out) == ["src/lib/a.txt", "src/lib/skip.txt"], paths
    out = run_cli("grep", "--ignore-file", "myignore", "needle", "src", cwd=par)  # from here, as in rg
    assert (out.returncode, printed_paths(out)) == (0, ["src/lib/a.txt"]), out.stderr


def test_grep_refuses_a_path_outside_the_project_a_symlink_leaving_it_or_one_it_ignores(
    tmp_path: Path,
) -> None:
    """Regression: a PATH symlinked to a folder elsewhere, or outside the project, became the root and was
    searched; an ignored PATH was searched as a root of its own, without the rules of the folders above."""
    par = jaguar_repo(tmp_path)
    elsewhere = make_tree(tmp_path / "elsewhere", {"e.txt": "needle elsewhere\n"})
    (par / "outlink").symlink_to(elsewhere, target_is_directory=True)
    for path, reason in (("outlink", "symlink"), ("../elsewhere", "outside the root")):
        out = run_cli("grep", "needle", path, cwd=par)
        assert out.returncode == 2 and not out.stdout, path
        assert len(out.stderr.splitlines()) == 1 and reason in out.stderr and "cd into" in out.stderr
    # A PATH the rules leave out is not searched under the project's rules (ripgrep would): kenning says so.
    out = run_cli("grep", "jaguar", "pkg/debug.log", cwd=par)
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1 and "--no-ignore" in out.stderr
    assert printed_paths(run_cli("grep", "--no-ignore", "jaguar", "pkg/debug.log", cwd=par)) == [
        "pkg/debug.log"
    ]
    # A secret named outright, by its name or by the key it holds, is refused in one line (a key under an
    # innocent name gave a silent "no match")
    make_tree(par, {"id_rsa": "jaguar\n", "deploy.yaml": "jaguar: |\n" + armor("RSA PRIVATE KEY")})
    for secret in ("id_rsa", "deploy.yaml"):
        out = run_cli("grep", "jaguar", secret, cwd=par)
        assert out.returncode == 2 and not out.stdout, secret
        assert len(out.stderr.splitlines()) == 1 and "secret file" in out.stderr, secret


def test_grep_in_a_subfolder_of_an_index_searches_there_and_reads_globs_from_the_root(tmp_path: Path) -> None:
    par = jaguar_repo(tmp_path)
    assert run_cli("index", ".", cwd=par).returncode == 0
    here = par / "src"
    assert printed_paths(run_cli("grep", "needle", cwd=here)) == ["lib/a.txt", "lib/skip.txt"]
    assert run_cli("grep", "needle", "../config", cwd=here).stdout.splitlines()[0] == "../config/c.txt"
    out = run_cli("grep", "-g", "src/lib/a*", "needle", cwd=here)  # globs are matched from the root
    assert printed_paths(out) == ["lib/a.txt"]


def test_regression_grep_from_a_folder_the_indexed_project_leaves_out_searches_it(tmp_path: Path) -> None:
    # from pkg/secret_dir (ignored by the repository) in an indexed project, grep refused: "the current
    # directory is left out", where ripgrep, and kenning without an index, search it
    par = jaguar_repo(tmp_path)
    assert run_cli("index", ".", cwd=par).returncode == 0
    out = run_cli("grep", "jaguar", cwd=par / "pkg" / "secret_dir")
    assert out.returncode == 0, out.stderr
    assert printed_paths(out) == ["notes.txt"]


def test_a_subfolder_of_a_git_repo_is_indexed_and_searched_with_the_repo_ignore_files(tmp_path: Path) -> None:
    """Regression: indexing (or searching without an index) a folder inside a git repository took in the
    files the repository's .gitignore above it excludes."""
    par = jaguar_repo(tmp_path)
    pkg = par / "pkg"
    out = run_cli("search", "--no-index", "--json", "jaguar", "pkg", cwd=par)
    assert [json.loads(ln)["path"] for ln in out.stdout.splitlines()[:-1]] == ["mod.txt"]
    out = run_cli("index", "--json", ".", cwd=pkg)
    assert json.loads(out.stdout)["added"] == ["mod.txt"], out.stderr
    (par / ".gitignore").write_text("secret_dir/\n")  # logs are no longer ignored: one file to add
    out = run_cli("status", "--json", ".", cwd=pkg)
    assert json.loads(out.stdout)["added"] == 1


def test_no_index_search_applies_path_and_type_filters(tmp_path: Path) -> None:
    """Regression: the literal fallback ignored --path, --glob and --type without saying so."""
    root = make_tree(tmp_path / "lw", {"src/a.py": "retry upload here\n", "docs/b.md": "retry upload docs\n"})
    out = run_cli("search", "--no-index", "--path", "src", "-t", "py", "--json", "retry upload", str(root))
    hits = [json.loads(line) for line in out.stdout.splitlines() if '"type": "hit"' in line]
    assert [h["path"] for h in hits] == ["src/a.py"]
    out = run_cli("search", "--no-index", "-g", "*.md", "--json", "retry upload", str(root))
    assert [json.loads(ln)["path"] for ln in out.stdout.splitlines() if '"type": "hit"' in ln] == [
        "docs/b.md"
    ]


def test_regression_private_keys_under_other_names_are_skipped_as_secrets(tmp_path: Path) -> None:
    """Secrets were judged by name only: ``deploy_key``, a key in ``server.crt`` or a service-account JSON were
    indexed and served. By content they are skipped like secrets by name, and a file that turns into one loses
    its passages."""
    notes = "# Notes\n\nRotate the staging credentials every quarter.\n"
    root = make_tree(tmp_path / "ws", KEY_FILES | NOT_KEY_FILES | {"notes.md": notes})
    out = run_cli("index", "--json", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    secret = {s["path"]: s["reason"] for s in report["skipped"] if s["reason"].startswith("secret")}
    assert secret == dict.fromkeys(KEY_FILES, "secret file (contains a private key)")
    # a certificate or public key is not secret (its base64 alone is left out as encoded, as before)
    assert {"authorized_keys", "notes.md", "pem.py"} <= set(report["added"])
    out = run_cli("index", str(root), cwd=tmp_path)  # the summary counts them with the secrets by name
    assert f"skipped: {len(KEY_FILES)} secret file" in out.stdout
    for query in ("service_account gserviceaccount", "OPENSSH PGP"):
        out = run_cli("search", "--lexical", "--json", query, str(root), cwd=tmp_path)
        assert not [ln for ln in out.stdout.splitlines() if '"type": "hit"' in ln], query
    out = run_cli("grep", "-F", KEY_BODY[64:96], str(root), cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == "", out.stdout

    (root / "notes.md").write_text(notes + "\n" + armor("EC PRIVATE KEY"))
    out = run_cli("index", "--json", str(root), cwd=tmp_path)
    report = json.loads(out.stdout)
    assert report["removed"] == ["notes.md"] and report["passages_removed"] > 0
    assert {"path": "notes.md", "reason": "secret file (contains a private key)"} in report["skipped"]
    out = run_cli("search", "--lexical", "staging credentials", str(root), cwd=tmp_path)
    assert out.returncode == 1 and "notes.md" not in out.stdout


def test_regression_brace_globs_select_every_alternative(tmp_path: Path) -> None:
    """``-g '*.{py,rs}'`` matched nothing in grep, search and index: braces were taken literally."""
    root = make_tree(
        tmp_path / "ws", {"a.py": "needle one\n", "b.rs": "needle two\n", "c.md": "needle three\n"}
    )
    out = run_cli("grep", "-g", "*.{py,rs}", "needle", cwd=root)  # paths print relative to the cwd
    assert out.returncode == 0 and [ln for ln in out.stdout.splitlines() if ln.endswith((".py", ".rs"))] == [
        "a.py",
        "b.rs",
    ]
    assert "c.md" not in out.stdout
    out = run_cli("search", "--no-index", "--json", "-g", "*.{md,rs}", "needle", str(root), cwd=tmp_path)
    hits = [json.loads(ln)["path"] for ln in out.stdout.splitlines() if '"type": "hit"' in ln]
    assert sorted(hits) == ["b.rs", "c.md"]
    out = run_cli("index", "--json", "-g", "!*.{py,rs}", str(root), cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["added"] == ["c.md"]


@pytest.mark.parametrize(
    "command",
    [
        ("grep", "-g", "[", "needle"),
        ("grep", "--iglob", "*.[ch", "needle"),
        ("search", "-g", "*.{py,rs", "needle"),
        ("search", "--no-index", "-g", "[z-a]", "needle"),
        ("index", "-g", "{src,lib/**"),
    ],
)
def test_regression_an_invalid_glob_is_one_line_exit_2(tmp_path: Path, command: tuple[str, ...]) -> None:
    """``-g '['`` silently matched every file (an unclosed "[" was dropped); "[z-a]" was a traceback."""
    root = make_tree(tmp_path / "ws", {"a.py": "needle\n"})
    out = run_cli(*command, str(root), cwd=tmp_path)
    glob = command[command.index("needle") - 1] if "needle" in command else command[-1]
    assert out.returncode == 2 and out.stdout == "", out.stdout
    assert (
        out.stderr.count("\n") == 1 and f"invalid glob {glob!r}" in out.stderr and "fix or drop" in out.stderr
    )
    assert not (root / ".kenning").exists()  # refused before any index was built


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_regression_grep_had_no_json_output_for_programs(tmp_path: Path, engine: str) -> None:
    """`kenning grep` had no --json while `search` had one: a program had to parse the rg-like text."""
    import shutil

    if engine == "rg" and not shutil.which("rg"):
        pytest.skip("rg not installed")
    root = make_tree(
        tmp_path / "ws",
        {
            "src/app.py": "import os\n\n\nclass Loader:\n    def load(self):\n        return os.retry(retry=1)\n",
            "docs/café.md": "# Notes\n\nnaïve café retry here\n",
        },
    )
    out = run_cli("grep", "--engine", engine, "--json", "-C", "1", "retry", "./src", "docs", cwd=root)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["type"], r.get("path"), r.get("line")) for r in records] == [
        ("context", "docs/café.md", 2),
        ("match", "docs/café.md", 3),
        ("context", "./src/app.py", 5),
        ("match", "./src/app.py", 6),
        ("summary", None, None),
    ]
    assert all(r["schema"] == 1 for r in records)
    doc, code = records[1], records[3]
    # character offsets, not bytes: "naïve café " is 11 characters but 13 UTF-8 bytes
    assert (doc["column"], doc["submatches"], doc["symbol"]) == (12, [{"start": 11, "end": 16}], None)
    assert doc["text"] == "naïve café retry here"
    assert code["text"] == "        return os.retry(retry=1)"
    assert code["submatches"] == [{"start": 18, "end": 23}, {"start": 24, "end": 29}] and code["column"] == 19
    assert code["symbol"] == {
        "kind": "function",
        "name": "load",
        "scope": "Loader.load",
        "signature": "def load(self)",
        "doc": "",
    }
    assert records[0] == {"type": "context", "schema": 1, "path": "docs/café.md", "line": 2, "text": ""}
    summary = records[-1]
    assert (summary["root"], summary["files"], summary["matches"]) == (str(root.resolve()), 2, 2)
    assert isinstance(summary["elapsed_ms"], float)
    # --no-symbols leaves the symbol out; no match is exit 1 with a summary alone; an error prints no JSON
    out = run_cli("grep", "--json", "--no-symbols", "retry", "src", cwd=root)
    assert json.loads(out.stdout.splitlines()[0])["symbol"] is None
    out = run_cli("grep", "--engine", engine, "--json", "zzqq", cwd=root)
    kinds = [json.loads(line)["type"] for line in out.stdout.splitlines()]
    assert out.returncode == 1 and kinds == ["summary"]
    out = run_cli("grep", "--engine", engine, "--json", "a(b", cwd=root)
    assert (out.returncode, out.stdout, out.stderr.count("\n")) == (2, "", 1)


def test_regression_grep_from_the_filesystem_root_refused_even_with_paths(tmp_path: Path) -> None:
    """From `/`, grep said "root / is the filesystem root; pass a project directory instead" even when PATHs
    named the project, and grep takes no root to pass. Now the PATHs say where the project is; without
    them it refuses in one line instead of walking the whole machine. Every run has PATHs under tmp_path or
    is refused before any walk, and the timeout stops a run that would walk the disk anyway."""
    par = jaguar_repo(tmp_path)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}

    def from_top(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("grep", *args, cwd=Path("/"), env=env, timeout=60)

    # the repository's .gitignore above pkg/ still applies: debug.log and secret_dir/ stay out
    out = from_top("jaguar", str(par / "pkg"))
    assert (out.returncode, out.stdout) == (0, f"{par}/pkg/mod.txt\n1:jaguar code\n"), out.stderr
    relative = str(par / "pkg").lstrip("/")  # typed from / without the leading slash: printed as typed
    out = from_top("jaguar", relative, str(par / "docs" / "guide.md"))
    assert (out.returncode, printed_paths(out)) == (0, [f"{relative}/mod.txt"]), out.stderr
    out = from_top("--json", "needle", str(par / "src"), str(par / "config"))
    assert [json.loads(ln).get("path") for ln in out.stdout.splitlines()] == [
        f"{par}/config/c.txt",
        f"{par}/src/lib/a.txt",
        f"{par}/src/lib/skip.txt",
        None,
    ]
    assert json.loads(out.stdout.splitlines()[-1])["root"] == str(par.resolve())
    for args, words in (
        (("jaguar",), ("filesystem root", "cd into a project", "kenning grep PATTERN /path")),
        (("jaguar", "/"), ("PATH / is the filesystem root",)),
        (("jaguar", str(par), "/proc"), ("no folder in common",)),
        (("jaguar", str(par / "nothere")), ("does not exist",)),
    ):
        out = from_top(*args)
        assert out.returncode == 2 and out.stdout == "", args
        assert out.stderr.count("\n") == 1 and all(w in out.stderr for w in words), out.stderr


@pytest.mark.parametrize("engine", ["python", "rg"])
@pytest.mark.parametrize("as_json", [False, True])
def test_regression_grep_exit_codes_follow_the_readme_a_dangling_symlink_path_included(
    tmp_path: Path, engine: str, as_json: bool
) -> None:
    """README: 0 a match, 1 none, 2 an error. A PATH that is a dangling symlink (a file that does not exist)
    answered 1, a silent "no match", where ripgrep and every other missing PATH give 2."""
    import shutil

    if engine == "rg" and not shutil.which("rg"):
        pytest.skip("rg not installed")
    par = jaguar_repo(tmp_path)
    (par / "gone.txt").symlink_to("removed.txt")
    flags = ("--engine", engine, *(["--json"] if as_json else []))
    cases = [
        (("jaguar", "pkg"), 0, None),
        (("zzqq",), 1, None),
        (("a(b",), 2, "invalid regex"),
        (("(?<=a+)b",), 2, "look-behind"),
        (("jaguar", "nothere"), 2, "does not exist"),
        (("jaguar", "gone.txt"), 2, "does not exist; fix or remove the link"),
        (("jaguar", "pkg", "nothere"), 2, "does not exist"),
        (("jaguar", str(tmp_path)), 2, "outside the root"),
        (("jaguar", "../.."), 2, "outside the root"),
    ]
    for args, code, message in cases:
        out = run_cli("grep", *flags, *args, cwd=par)
        assert out.returncode == code, (args, out.stderr)
        if message is not None:
            assert out.stdout == "" and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr


def test_regression_index_summary_names_the_folders_the_default_ignore_list_pruned(tmp_path: Path) -> None:
    """Regression: the default ignore list pruned ``src/generated`` and ``docs/build`` at any depth and the
    summary never said so; it names them in one line (not what the user's .gitignore prunes) and says how
    to bring one back, which then works."""
    root = make_tree(
        tmp_path / "gen",
        {
            ".gitignore": "dist/\n",
            "README.md": "# Project\n",
            "src/generated/api.md": "# Generated API reference\n",
            "docs/build/index.md": "# Built docs\n",
            "pkg/dist/bundle.md": "# gitignored\n",
        },
    )
    git(root, "init", "-q")
    out = run_cli("index", str(root))
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if "default ignore list" in ln]
    assert lines == [
        "pruned by the default ignore list: docs/build, src/generated; "
        "a line !FOLDER/ in the root's .ignore indexes one"
    ]
    (root / ".ignore").write_text("!src/generated/\n")
    out = run_cli("index", "--json", str(root))
    report = json.loads(out.stdout)
    assert report["added"] == ["src/generated/api.md"] and report["pruned"] == ["docs/build"]


def test_regression_index_summary_caps_the_pruned_folders_it_names(tmp_path: Path) -> None:
    """Regression (with the one above): many pruned folders stay one line, the rest counted."""
    root = make_tree(tmp_path / "many", {f"p{i}/build/x.md": "# x\n" for i in range(7)} | {"a.md": "# a\n"})
    out = run_cli("index", str(root))
    [line] = [ln for ln in out.stdout.splitlines() if "default ignore list" in ln]
    assert line.startswith(
        "pruned by the default ignore list: p0/build, p1/build, p2/build, p3/build, p4/build"
    )
    assert " and 2 more (--json lists them);" in line


def test_regression_a_hit_on_a_piece_of_an_over_long_line_previews_the_query_word(tmp_path: Path) -> None:
    """Regression: the pieces of a line longer than max_chars each claim that line, and a short preview
    clipped the hit's piece to its first 160 characters, so a word found 700 characters into it never
    showed. The preview now shows the line around the word, marked as cut; one hit stands for the line."""
    words = [f"filler{i}" for i in range(500)]
    words[300] = "zebrafinch"  # far into a piece: pieces are up to 1000 characters
    root = make_tree(
        tmp_path / "long", {"notes.txt": "A short first paragraph.\n\n" + " ".join(words) + "\n"}
    )
    out = run_cli("search", "--json", "-k", "5", "zebrafinch", str(root))
    hits = [json.loads(ln) for ln in out.stdout.splitlines() if '"type": "hit"' in ln]
    on_line = [h for h in hits if (h["start_line"], h["end_line"]) == (3, 3)]
    assert len(on_line) == 1, out.stdout
    assert on_line[0]["matched_by"] == "both"  # one piece is a lexical find, another the semantic best
    assert "zebrafinch" in on_line[0]["text"] and on_line[0]["text"].startswith("…filler")
    assert len(on_line[0]["text"]) <= 160
    out = run_cli("search", "zebrafinch", str(root))
    assert any("zebrafinch" in ln for ln in out.stdout.splitlines() if ln.lstrip().startswith("3  ")), (
        out.stdout
    )


def test_regression_status_says_what_the_default_list_pruned(tmp_path: Path) -> None:
    """Issue 18, item 5: `kenning status` now names the folders the last index run's default list pruned."""
    root = make_tree(tmp_path / "st", {"README.md": "# Project\n", "src/generated/api.md": "# api\n"})
    assert run_cli("index", str(root)).returncode == 0
    out = run_cli("status", str(root))
    assert out.returncode == 0, out.stderr
    [line] = [ln for ln in out.stdout.splitlines() if ln.startswith("pruned")]
    assert (
        line.startswith("pruned    by the default ignore list: src/generated;") and "last index run" in line
    )
    data = json.loads(run_cli("status", "--json", str(root)).stdout)
    assert data["pruned"] == ["src/generated"]


def test_regression_an_option_between_positionals_was_an_unrecognized_argument(tmp_path: Path) -> None:
    """`kenning search "query" -k 3 .` and `kenning grep PATTERN -i .` exited 2 with "unrecognized arguments: .":
    argparse had filled QUERY and ROOT (empty) before the option. Options go anywhere among the positionals now,
    as in ripgrep and git, and every order gives the options-first output."""
    root = make_tree(
        tmp_path / "ws", {"a.py": 'def alpha():\n    return "Beta"\n', "b.md": "# Beta notes\n\nalpha beta\n"}
    )
    assert run_cli("index", ".", cwd=root).returncode == 0
    orders = {
        "search": [
            ["search", "-k", "3", "--json", "alpha beta", "."],
            ["search", "alpha beta", "-k", "3", ".", "--json"],
            ["search", "alpha beta", ".", "-k", "3", "--json"],
            ["search", "--json", "alpha beta", "-k", "3", "."],
        ],
        "grep": [
            ["grep", "-i", "-C", "1", "beta", "a.py", "b.md"],
            ["grep", "beta", "-i", "a.py", "-C", "1", "b.md"],
            ["grep", "beta", "a.py", "b.md", "-i", "-C", "1"],
            ["grep", "-C", "1", "beta", "a.py", "-i", "b.md"],
        ],
    }
    for command, variants in orders.items():
        first = run_cli(*variants[0], cwd=root)
        assert first.returncode == 0, first.stderr
        for args in variants[1:]:
            out = run_cli(*args, cwd=root)
            assert out.returncode == 0 and "unrecognized" not in out.stderr, (args, out.stderr)
            if command == "grep":
                assert out.stdout == first.stdout, args
            else:  # the same hits; timings differ
                hits = [ln for ln in out.stdout.splitlines() if '"type": "hit"' in ln]
                assert hits == [ln for ln in first.stdout.splitlines() if '"type": "hit"' in ln], args
    # `--` still ends the options: what follows is a pattern or a path, whatever it starts with
    (root / "c.txt").write_text("-x marks it\n")
    assert run_cli("grep", "-i", "--", "-X", "c.txt", cwd=root).stdout == "c.txt\n1:-x marks it\n"
    bad = run_cli("grep", "beta", "--no-such-flag", ".", cwd=root)
    assert bad.returncode == 2 and "unrecognized arguments: --no-such-flag" in bad.stderr


def test_regression_status_of_a_root_with_no_index_exited_0(tmp_path: Path) -> None:
    """`kenning status` of a folder never indexed exited 0, though the exit codes say 1 means not ready."""
    root = make_tree(tmp_path / "ws", {"a.py": "def f():\n    return 1\n"})
    out = run_cli("status", ".", cwd=root)
    assert out.returncode == 1 and "none yet" in out.stdout, (out.returncode, out.stdout, out.stderr)
    assert run_cli("status", "--json", ".", cwd=root).returncode == 1
    assert run_cli("index", ".", cwd=root).returncode == 0
    assert run_cli("status", ".", cwd=root).returncode == 0


def test_regression_svg_drawings_were_indexed_as_text(tmp_path: Path) -> None:
    """An SVG's path data and coordinates were indexed as XML text and crowded search results."""
    from kenning.walk import kind_of

    assert kind_of("assets/logo.svg") is None and kind_of("icons/a.SVGZ") is None
    root = make_tree(
        tmp_path / "ws",
        {"logo.svg": '<svg><path d="M10 10 L20 20 Z"/></svg>\n', "a.py": 'PATH = "M10 10"\n'},
    )
    assert run_cli("grep", "-l", "M10", cwd=root).stdout == "a.py\n"
