"""The walk and its rules, on real files in tmp dirs: ignore files, defaults, hidden, secrets, globs, types,
sizes, symlinks, permissions, root checks, determinism and speed; plus kind_of and read_text."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import KEY_BODY, KEY_FILES, NOT_KEY_FILES, armor, git, make_tree
from kenning.engine.scope import Scope
from kenning.errors import RootError, UsageError
from kenning.types import FileEntry, Selection, Skip
from kenning.walk import (
    INDEX_DIR_NAME,
    TYPES,
    NotText,
    PathFilter,
    check_root,
    compile_selection,
    decode,
    expand_braces,
    holds_private_key,
    is_secret,
    is_test_path,
    kind_of,
    read_text,
    walk,
)

tree = make_tree


def run(root: Path, **sel: object) -> tuple[list[str], dict[str, str]]:
    """The rels walked, and the Skips as rel -> reason."""
    files: list[str] = []
    skips: dict[str, str] = {}
    for item in walk(root, Selection(**sel)):  # type: ignore[arg-type]
        if isinstance(item, FileEntry):
            files.append(item.rel)
        else:
            skips[item.rel] = item.reason
    return files, skips


def spy_on_scandir(monkeypatch: pytest.MonkeyPatch, scanned: list[str]) -> None:
    """Record every directory the walk lists, to prove pruned ones are never entered."""
    real_scandir = os.scandir

    def spy(path: str | os.PathLike[str]) -> object:
        scanned.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)


def files_of(root: Path, **sel: object) -> list[str]:
    return run(root, **sel)[0]


# --- order, shape, determinism ---------------------------------------------------------------------------


def test_sorted_posix_relative_and_entry_fields(tmp_path: Path) -> None:
    tree(tmp_path, {"b.py": "x=1\n", "a/z.md": "# z\n", "a.txt": "t\n", "a-b.txt": "t\n", "A/c.rst": "c\n"})
    entries = [e for e in walk(tmp_path, Selection()) if isinstance(e, FileEntry)]
    rels = [e.rel for e in entries]
    assert rels == sorted(rels) == ["A/c.rst", "a-b.txt", "a.txt", "a/z.md", "b.py"]
    b = entries[-1]
    assert (b.kind, b.lang, b.size) == ("code", "python", 4)
    assert b.path == tmp_path.resolve() / "b.py" and b.mtime_ns == os.stat(b.path).st_mtime_ns
    assert [(e.kind, e.lang) for e in entries[:4]] == [
        ("rst", None),
        ("text", None),
        ("text", None),
        ("markdown", None),
    ]


def test_deterministic(tmp_path: Path) -> None:
    tree(tmp_path, {f"d{i % 7}/f{i}.py": "x\n" for i in range(200)})
    assert files_of(tmp_path) == files_of(tmp_path) == sorted(files_of(tmp_path))


def test_accepts_str_root_and_on_skip(tmp_path: Path) -> None:
    tree(tmp_path, {"a.py": "x\n", "empty.txt": ""})
    seen: list[Skip] = []
    items = list(walk(str(tmp_path), Selection(), on_skip=seen.append))
    assert [i.rel for i in items] == ["a.py"] and all(isinstance(i, FileEntry) for i in items)
    assert seen == [Skip("empty.txt", "empty")]


# --- ignore files -------------------------------------------------------------------------------------------


def test_nested_gitignore_negation_anchor_dironly_doublestar(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".gitignore": "*.log\n/only_root.txt\ncache/\na/**/gen.txt\n",
            "x.log": "l\n",
            "keep.log": "l\n",
            "only_root.txt": "r\n",
            "cache/c.txt": "c\n",
            "sub/cache": "a file named cache, not a dir\n",
            "a/b/c/gen.txt": "g\n",
            "a/gen2.txt": "g\n",
            "sub/.gitignore": "!keep.log\n/local.txt\n",
            "sub/keep.log": "l\n",
            "sub/other.log": "l\n",
            "sub/only_root.txt": "r\n",
            "sub/local.txt": "l\n",
            "sub/deeper/local.txt": "l\n",
            "sib/keep.log": "l\n",
        },
    )
    assert files_of(tmp_path) == [
        "a/gen2.txt",
        "sub/cache",
        "sub/deeper/local.txt",
        "sub/keep.log",
        "sub/only_root.txt",
    ]


def test_malformed_ignore_lines_are_skipped_and_bad_globs_refused(tmp_path: Path) -> None:
    tree(tmp_path, {".gitignore": "!\n\\\n*.log\n", "a.log": "l\n", "a.md": "a\n"})
    assert files_of(tmp_path) == ["a.md"]
    with pytest.raises(UsageError, match="invalid glob"):
        compile_selection(Selection(globs=("!",)))


def test_dot_ignore_overrides_gitignore_in_same_dir(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".gitignore": "*.txt\n",
            ".ignore": "!keep.txt\n*.md\n",
            "keep.txt": "k\n",
            "x.txt": "x\n",
            "r.md": "r\n",
            "s.py": "s\n",
        },
    )
    assert files_of(tmp_path) == ["keep.txt", "s.py"]


def test_git_info_exclude(tmp_path: Path) -> None:
    tree(tmp_path, {".git/info/exclude": "secret_notes.txt\n", "secret_notes.txt": "s\n", "a.txt": "a\n"})
    assert files_of(tmp_path) == ["a.txt"]


MONOREPO = {
    # Anchored rules match from the top: "/mod.txt" and "/other/" are not pkg's, "/services/pkg/artifacts/" is
    ".gitignore": "*.log\nsecret_dir/\n/services/pkg/artifacts/\n/mod.txt\nservices/pkg/gen.txt\n/other/\n",
    ".git/info/exclude": "excluded.txt\n",
    "services/.gitignore": "*.tmp\n",
    "services/.ignore": "draft.md\n",  # git does not read .ignore files; ripgrep and kenning do
    "services/pkg/.gitignore": "!keep.log\n",
    "services/pkg/mod.txt": "m\n",
    "services/pkg/debug.log": "l\n",
    "services/pkg/keep.log": "k\n",
    "services/pkg/gen.txt": "g\n",
    "services/pkg/artifacts/out.txt": "o\n",
    "services/pkg/secret_dir/notes.txt": "n\n",
    "services/pkg/excluded.txt": "e\n",
    "services/pkg/x.tmp": "t\n",
    "services/pkg/draft.md": "d\n",
    "services/pkg/sub/deep.log": "l\n",
    "services/pkg/sub/ok.md": "o\n",
    "services/pkg/other/o.md": "kept: /other/ is the top's other/, not this one\n",
}


def test_a_subfolder_of_a_git_repo_obeys_the_ignore_files_above_it(tmp_path: Path) -> None:
    """Regression: a root inside a git work tree ignored the .gitignore files of its parents and the repo's
    info/exclude, so indexing one service of a monorepo took in the logs and builds the repo ignores."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    tree(repo, MONOREPO)
    root = repo / "services" / "pkg"
    untracked = git(root, "ls-files", "--others", "--exclude-standard").split()  # relative to root, as ours
    expected = sorted(r for r in untracked if not r.rsplit("/", 1)[-1].startswith(".") and r != "draft.md")
    assert files_of(root) == expected == ["keep.log", "mod.txt", "other/o.md", "sub/ok.md"]
    assert files_of(root, no_ignore=True) == sorted(
        r.removeprefix("services/pkg/") for r in MONOREPO if r.startswith("services/pkg/") and "/." not in r
    )


def test_no_ignore_file_above_a_repository_top_or_outside_a_repository_is_read(tmp_path: Path) -> None:
    outer = tree(
        tmp_path, {".gitignore": "*.txt\n", ".ignore": "*.md\n", "plain/a.txt": "a\n", "plain/b.md": "b\n"}
    )
    assert files_of(outer / "plain") == ["a.txt", "b.md"], "not in a repository: no parent is read"
    repo = tree(
        outer / "repo", {".gitignore": "*.log\n", "pkg/a.txt": "a\n", "pkg/b.md": "b\n", "pkg/c.log": "c\n"}
    )
    git(repo, "init", "-q")
    assert files_of(repo / "pkg") == ["a.txt", "b.md"], "nothing above the repository's top is read"
    inner = tree(repo / "pkg" / "inner", {"d.log": "d\n"})
    git(inner, "init", "-q")  # a nested repository (a submodule, a vendored checkout) has its own rules
    assert files_of(inner) == ["d.log"]


def test_a_root_the_repository_ignores_is_walked_with_its_other_rules(tmp_path: Path) -> None:
    # As in ripgrep (`cd generated && rg x`): the folder the user named is never judged itself.
    repo = tree(
        tmp_path / "repo", {".gitignore": "gen/\n*.log\n", "gen/a.txt": "a\n", "gen/sub/b.txt": "b\n"}
    )
    tree(repo, {"gen/c.log": "c\n"})
    git(repo, "init", "-q")
    assert files_of(repo / "gen") == ["a.txt", "sub/b.txt"]
    assert files_of(repo / "gen" / "sub") == ["b.txt"]


def test_a_linked_worktree_reads_the_main_repository_info_exclude(tmp_path: Path) -> None:
    main = tree(tmp_path / "main", {"README.md": "r\n"})
    git(main, "init", "-q")
    git(main, "add", ".")
    git(main, "commit", "-q", "-m", "first")
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"))
    (main / ".git" / "info" / "exclude").write_text("local.txt\n")
    wt = tree(tmp_path / "wt", {"sub/local.txt": "l\n", "sub/a.txt": "a\n"})
    assert files_of(wt / "sub") == ["a.txt"]
    assert files_of(wt) == ["README.md", "sub/a.txt"]


def test_under_lists_only_the_way_to_its_paths_and_keeps_their_parents_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree(tmp_path, {"a/.gitignore": "*.tmp\n", "a/b/x.md": "x\n", "a/b/t.tmp": "t\n", "a/c/y.md": "y\n",
                    "a/c/z.md": "z\n", "q/w.md": "w\n", "q.md": "q\n"})  # fmt: skip
    scanned: list[str] = []
    spy_on_scandir(monkeypatch, scanned)
    assert [e.rel for e in walk(tmp_path, Selection(), under=["a/b"])] == ["a/b/x.md"]
    assert sorted(os.path.relpath(p, tmp_path) for p in scanned) == [".", "a", "a/b"]
    assert [e.rel for e in walk(tmp_path, Selection(), under=["q", "a/c/y.md"])] == ["a/c/y.md", "q/w.md"]
    assert len([e for e in walk(tmp_path, Selection(), under=["", "q"])]) == 5


def test_ignore_files_relative_and_absolute_and_missing(tmp_path: Path) -> None:
    root = tree(tmp_path / "ws", {"a.txt": "a\n", "b.txt": "b\n", "c.md": "c\n", "rules/extra": "b.txt\n"})
    outside = tree(tmp_path, {"abs.ignore": "*.md\n"}) / "abs.ignore"
    assert files_of(root, ignore_files=("rules/extra",)) == ["a.txt", "c.md", "rules/extra"]
    assert files_of(root, ignore_files=("rules/extra", str(outside))) == ["a.txt", "rules/extra"]
    with pytest.raises(UsageError, match=r"ignore file .*nope.* not found"):
        files_of(root, ignore_files=("nope",))


def test_gitignore_can_bring_back_a_default_ignored_dir(tmp_path: Path) -> None:
    tree(
        tmp_path, {".gitignore": "!vendor/\n", "vendor/lib.go": "package lib\n", "build/x.go": "package x\n"}
    )
    assert files_of(tmp_path) == ["vendor/lib.go"]


def test_no_ignore_drops_ignore_files_and_defaults_but_not_always_rules(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".gitignore": "*.txt\n",
            ".git/info/exclude": "ex.md\n",
            "a.txt": "a\n",
            "ex.md": "e\n",
            "node_modules/m/index.js": "m\n",
            "package-lock.json": "{}\n",
            ".git/config": "[core]\n",
            ".kenning/index.db": "db\n",
            "id_rsa": "-----BEGIN\n",
            "extra.ignore": "ex.md\n",
        },
    )
    files, skips = run(tmp_path, no_ignore=True, hidden=True)
    assert files == [
        ".gitignore",
        "a.txt",
        "ex.md",
        "extra.ignore",
        "node_modules/m/index.js",
        "package-lock.json",
    ]
    assert skips == {"id_rsa": "secret file (excluded by default)"}
    # Explicit --ignore-file rules stay on under no_ignore, as in ripgrep.
    assert "ex.md" not in files_of(tmp_path, no_ignore=True, ignore_files=("extra.ignore",))


# --- defaults -----------------------------------------------------------------------------------------------


def test_default_dirs_pruned_before_descending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = [
        "node_modules",
        "vendor",
        "dist",
        "build",
        "target",
        "__pycache__",
        "venv",
        "env",
        "tmp",
        "logs",
        "third_party",
        "Pods",
        "coverage",
        "generated",
        "src/node_modules",
    ]
    tree(tmp_path, {f"{d}/x.js": "x\n" for d in dirs} | {"src/a.js": "a\n", "locale/fr.md": "# fr\n"})
    scanned: list[str] = []
    spy_on_scandir(monkeypatch, scanned)
    assert files_of(tmp_path) == ["locale/fr.md", "src/a.js"]
    assert any(p.endswith("/src") for p in scanned)
    assert not [p for p in scanned if "node_modules" in p or "vendor" in p]


def test_regression_folders_the_default_ignore_list_prunes_at_any_depth_are_reported(tmp_path: Path) -> None:
    """Regression: the default list pruned ``src/generated`` and ``docs/build`` silently; the walk now tells
    on_prune, and only about the list's prunes (not the user's .gitignore, hidden folders or filters)."""
    tree(
        tmp_path,
        {
            ".gitignore": "dist/\n",
            "src/generated/api.md": "# api\n",
            "docs/build/index.md": "# built\n",
            "pkg/dist/x.md": "# gitignored: the user's choice\n",
            ".hidden/build/x.md": "# hidden: never entered\n",
            "vendor/lib/generated/y.md": "# below a pruned folder: never reached\n",
            "notes/tmp.md": "# a file named like a default folder\n",
        },
    )
    git(tmp_path, "init", "-q")
    pruned: list[str] = []
    files = [i.rel for i in walk(tmp_path, Selection(), on_prune=pruned.append) if isinstance(i, FileEntry)]
    assert files == ["notes/tmp.md"]
    assert pruned == ["docs/build", "src/generated", "vendor"]
    pruned.clear()
    list(walk(tmp_path, Selection(globs=("!docs/*",)), on_prune=pruned.append))
    assert pruned == ["src/generated", "vendor"], (
        "a folder the user's glob leaves out is not the list's doing"
    )
    pruned.clear()
    list(walk(tmp_path, Selection(no_ignore=True), on_prune=pruned.append))
    assert pruned == []


def test_default_files_ignored_and_images_unsupported_with_no_ignore(tmp_path: Path) -> None:
    names = [
        "yarn.lock",
        "package-lock.json",
        "pnpm-lock.yaml",
        "npm-shrinkwrap.json",
        "go.sum",
        "app.min.js",
        "app.js.map",
        "x.bundle.js",
        "api.generated.ts",
        "m.pb.go",
        "m_pb2.py",
        "w.g.dart",
        "Form.designer.cs",
        "Package.resolved",
        "logo.png",
        "photo.JPG",
    ]
    tree(tmp_path, dict.fromkeys(names, "x\n") | {"app.js": "x\n"})
    assert run(tmp_path) == (["app.js"], {})
    files, skips = run(tmp_path, no_ignore=True)
    assert "yarn.lock" in files and "app.min.js" in files
    assert skips == {"logo.png": "unsupported format (.png)", "photo.JPG": "unsupported format (.jpg)"}


# --- hidden, .git, index dir ------------------------------------------------------------------------------


def test_hidden_skipped_unless_asked(tmp_path: Path) -> None:
    tree(tmp_path, {".hidden.md": "h\n", ".github/ci.yml": "on: push\n", "a.md": "a\n"})
    assert files_of(tmp_path) == ["a.md"]
    assert files_of(tmp_path, hidden=True) == [".github/ci.yml", ".hidden.md", "a.md"]


def test_git_and_index_dir_always_skipped(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            ".git/HEAD": "ref\n",
            f"{INDEX_DIR_NAME}/meta.json": "{}\n",
            "sub/.git": "gitdir: x\n",
            "sub/.kenning/x.txt": "x\n",
            ".idx/y.txt": "y\n",
            "a.md": "a\n",
        },
    )
    assert files_of(tmp_path, hidden=True, no_ignore=True) == [".idx/y.txt", "a.md"]
    assert files_of(tmp_path, hidden=True, no_ignore=True, globs=("*",)) == [".idx/y.txt", "a.md"]
    got = [e.rel for e in walk(tmp_path, Selection(hidden=True, no_ignore=True), index_dir_name=".idx")]
    assert got == [".kenning/meta.json", "a.md", "sub/.kenning/x.txt"]


# --- secrets ------------------------------------------------------------------------------------------------

SECRETS = [
    "server.pem",
    "tls.key",
    "cert.p12",
    "store.pfx",
    "app.keystore",
    "app.jks",
    "id_rsa",
    "id_rsa.pub",
    "id_ed25519",
    ".env",
    ".env.production",
    "vault.kdbx",
    ".netrc",
    ".pgpass",
    "credentials.json",
    "secrets.yaml",
    "conf/deep/prod.PEM",
    ".ssh/config",
    "infra/terraform.tfstate",
]


@pytest.mark.parametrize("globs", [(), ("*",), ("**/*.pem", "*"), ("!*.md", "*")])
def test_secrets_never_selected_even_by_broad_globs(tmp_path: Path, globs: tuple[str, ...]) -> None:
    tree(tmp_path, dict.fromkeys(SECRETS, "s3cr3t\n") | {"ok.md": "ok\n", ".env.example": "KEY=\n"})
    files, skips = run(tmp_path, hidden=True, no_ignore=True, globs=globs, iglobs=globs)
    assert not set(files) & set(SECRETS)
    assert ".env.example" in files  # a committed template without values: decided not secret
    assert all(skips[s] == "secret file (excluded by default)" for s in SECRETS if s in skips)
    assert "server.pem" in skips


def test_is_secret() -> None:
    assert all(is_secret(s) for s in SECRETS)
    assert not any(
        is_secret(s) for s in ["keys.py", "env.md", ".env.example", ".env.sample", "pem.txt", "a/b.md"]
    )


def test_regression_private_keys_are_found_by_content_whatever_the_name() -> None:
    """Secrets were judged by name only: a ``deploy_key`` or a key inside a ``.crt`` was indexed."""
    assert [name for name, text in KEY_FILES.items() if not holds_private_key(text.encode())] == []
    body = KEY_BODY[:64]
    variants = [
        armor("RSA PRIVATE KEY", nl="\r\n"),
        armor(
            "RSA PRIVATE KEY", headers="Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n"
        ),
        armor("ENCRYPTED PRIVATE KEY"),
        armor("EC PRIVATE KEY", nl=" "),  # flattened into one line, as in an environment variable
        "tls:\n  key: |\n    " + armor("PRIVATE KEY", nl="\n    "),  # indented in YAML
        f'---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "rsa-key"\n{body}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----\n',
        f'KEY = "-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----"',  # escaped in a string
    ]
    assert [v for v in variants if not holds_private_key(v.encode())] == []
    # Public material and mere mentions of the header are not secrets.
    assert [name for name, text in NOT_KEY_FILES.items() if holds_private_key(text.encode())] == []
    mentions = [
        "A key file starts with -----BEGIN RSA PRIVATE KEY----- and then base64, e.g. MIIEpAIBAAKCAQEA...\n",
        "```\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA...\n-----END OPENSSH PRIVATE KEY-----\n```\n",
        'MARK = b"-----BEGIN OPENSSH PRIVATE KEY-----\\n"\nif data.startswith(MARK):\n    load(data)\n',
        "private key handling: see PRIVATE KEY BLOCK in RFC 4880\n",
        # a README showing a key's first (long) line and "...": no END line, so no key (the file was dropped)
        f"Your key looks like:\n\n    -----BEGIN OPENSSH PRIVATE KEY-----\n    {body}\n    ...\n",
    ]
    assert [m for m in mentions if holds_private_key(m.encode())] == []


TEST_FILES = [
    "tests/test_upload.py",
    "t/unit/worker/test_request.py",
    "t/smoke/operations/worker_kill.py",
    "src/conftest.py",
    "pkg/upload_test.go",
    "web/upload.test.tsx",
    "web/upload.spec.ts",
    "spec/models/user_spec.rb",
    "src/test/java/UploadTest.java",
    "Uploader.Tests/UploadTests.cs",
    "pkg/testdata/sample.txt",
    "app/__tests__/upload.js",
    "web/upload-spec.js",
    "cypress/e2e/login.cy.ts",
    "src/__mocks__/fs.js",
    "app/src/androidTest/java/Helper.java",
]
NOT_TEST_FILES = [
    "src/upload.py",
    "src/latest.py",
    "src/contest.py",
    "lib/Protest.java",
    "docs/testing.rst",  # a page about testing is documentation
    "src/attestation/verify.py",
    "src/specific.py",
    "README.md",
    "docs/spec/protocol.md",  # a specification
    "numpy/testing/utils.py",  # library code for testing
    "src/testing/fstest.go",
]


def test_is_test_path() -> None:
    assert [p for p in TEST_FILES if not is_test_path(p)] == []
    assert [p for p in NOT_TEST_FILES if is_test_path(p)] == []


# --- globs and types ----------------------------------------------------------------------------------------

GLOB_TREE = {
    "README.md": "r\n",
    "docs/a.md": "a\n",
    "docs/sub/b.md": "b\n",
    "src/x.py": "x\n",
    "src/docs/c.md": "c\n",
    "lib/src/y.py": "y\n",
    "src/Z.MD": "z\n",
}


def test_ordered_globs_later_wins(tmp_path: Path) -> None:
    tree(tmp_path, GLOB_TREE)
    assert files_of(tmp_path, globs=("*.md", "!docs/*")) == ["README.md", "src/docs/c.md"]
    assert files_of(tmp_path, globs=("!docs/*", "*.md")) == ["README.md", "docs/a.md", "src/docs/c.md"]
    # "docs/*" also matches the directory docs/sub, which is then pruned (as in git and ripgrep).
    assert files_of(tmp_path, globs=("!docs/*/", "*.md", "!docs/a.md")) == ["README.md", "src/docs/c.md"]


def test_glob_without_slash_matches_basename_anywhere_and_with_slash_is_anchored(tmp_path: Path) -> None:
    tree(tmp_path, GLOB_TREE)
    assert files_of(tmp_path, globs=("*.py",)) == ["lib/src/y.py", "src/x.py"]
    assert files_of(tmp_path, globs=("src/*.py",)) == ["src/x.py"]
    assert files_of(tmp_path, globs=("**/src/*.py",)) == ["lib/src/y.py", "src/x.py"]


def test_exclude_only_globs_keep_the_rest(tmp_path: Path) -> None:
    tree(tmp_path, GLOB_TREE)
    assert files_of(tmp_path, globs=("!*.md", "!*.MD")) == ["lib/src/y.py", "src/x.py"]
    assert files_of(tmp_path, globs=("!src",)) == ["README.md", "docs/a.md", "docs/sub/b.md"]


def test_exclude_glob_prunes_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree(tmp_path, GLOB_TREE)
    scanned: list[str] = []
    spy_on_scandir(monkeypatch, scanned)
    assert files_of(tmp_path, globs=("!/docs/",)) == [
        "README.md",
        "lib/src/y.py",
        "src/Z.MD",
        "src/docs/c.md",
        "src/x.py",
    ]
    assert any(p.endswith("/src/docs") for p in scanned)
    assert not [p for p in scanned if p.endswith(f"{tmp_path.name}/docs")]


def test_iglobs_case_insensitive(tmp_path: Path) -> None:
    tree(tmp_path, GLOB_TREE)
    assert files_of(tmp_path, globs=("*.MD",)) == ["src/Z.MD"]
    assert files_of(tmp_path, iglobs=("*.MD", "!DOCS/")) == ["README.md", "src/Z.MD"]
    assert files_of(tmp_path, iglobs=("*.MD", "!/DOCS/")) == ["README.md", "src/Z.MD", "src/docs/c.md"]
    assert files_of(tmp_path, globs=("*.md",), iglobs=("!readme.MD",)) == [
        "docs/a.md",
        "docs/sub/b.md",
        "src/docs/c.md",
    ]


def test_regression_brace_alternatives_select_each_alternative(tmp_path: Path) -> None:
    """``-g '*.{py,rs}'`` was read as a literal name with braces and matched nothing."""
    tree(tmp_path, GLOB_TREE | {"src/m.rs": "m\n", "docs/r.rst": "r\n", "{x}.md": "x\n"})
    assert files_of(tmp_path, globs=("*.{py,rs}",)) == ["lib/src/y.py", "src/m.rs", "src/x.py"]
    assert files_of(tmp_path, globs=("*.{py,{rs,rst}}",)) == [
        "docs/r.rst",
        "lib/src/y.py",
        "src/m.rs",
        "src/x.py",
    ]
    # "!" applies to every alternative, and later globs still override earlier ones.
    assert files_of(tmp_path, globs=("*.{py,rs}", "!src/*.{py,rs}")) == ["lib/src/y.py"]
    assert files_of(tmp_path, globs=("!src/*.{py,rs}", "*.{py,rs}")) == [
        "lib/src/y.py",
        "src/m.rs",
        "src/x.py",
    ]
    assert files_of(tmp_path, globs=("*.{py,rs}", "!src/*.{py,rs}", "src/x.py")) == [
        "lib/src/y.py",
        "src/x.py",
    ]
    assert files_of(tmp_path, iglobs=("{docs,src}/*.{MD,RST}",)) == ["docs/a.md", "docs/r.rst", "src/Z.MD"]
    # An escaped brace, or one inside [...], is literal.
    assert files_of(tmp_path, globs=("\\{x}.md",)) == files_of(tmp_path, globs=("[{]x}.md",)) == ["{x}.md"]
    assert expand_braces("!{a,b}/*.{c,d}") == ["!a/*.c", "!a/*.d", "!b/*.c", "!b/*.d"]
    assert expand_braces("{!a,#b}") == ["\\!a", "\\#b"]  # an alternative never becomes a negation or comment
    assert expand_braces("a,b}") == ["a,b}"] and expand_braces("[{,]x") == ["[{,]x"]


@pytest.mark.parametrize(
    ("glob", "why"),
    [
        ("[", r"unclosed '\['"),
        ("src/*.[ch", r"unclosed '\['"),
        ("*.{py,rs", "unclosed '{'"),
        ("{a,[b}", r"unclosed '\['"),
        ("[z-a]", "bad character range z-a\\)"),
        ("[/]", "it can match no path"),
        ("{a,b}" * 9, "expands to more than"),
        ("{}", "empty"),  # it and "{,}" selected every file
        ("{,}", "empty"),
        ("{" * 17 + "a" + "}" * 17, "nested too deep"),  # a thousand of them ended in a RecursionError
    ],
)
def test_regression_an_invalid_glob_is_a_usage_error_not_a_match_for_everything(
    tmp_path: Path, glob: str, why: str
) -> None:
    """An unclosed "[" was dropped by pathspec, so ``-g '['`` selected every file; "[z-a]" was a traceback."""
    tree(tmp_path, {"a.md": "a\n"})
    for given, selection in (
        (glob, Selection(globs=(glob,))),
        (f"!{glob}", Selection(iglobs=("*.md", f"!{glob}"))),
    ):
        with pytest.raises(UsageError, match=f"glob {re.escape(repr(given))}.*{why}"):
            compile_selection(selection)
        with pytest.raises(UsageError):
            list(walk(tmp_path, selection))
        with pytest.raises(UsageError):
            PathFilter(tmp_path, selection)
    with pytest.raises(UsageError):
        Scope(glob=glob)


def test_types_and_types_not(tmp_path: Path) -> None:
    tree(tmp_path, GLOB_TREE | {"Makefile": "all:\n", "s.pyi": "x: int\n", "n.rst": "n\n"})
    assert files_of(tmp_path, types=("py",)) == ["lib/src/y.py", "s.pyi", "src/x.py"]
    assert files_of(tmp_path, types=("make", "rst")) == ["Makefile", "n.rst"]
    assert files_of(tmp_path, types_not=("md", "py")) == ["Makefile", "n.rst", "src/Z.MD"]
    # Globs and types both have to pass.
    assert files_of(tmp_path, types=("py",), globs=("src/**",)) == ["src/x.py"]


def test_unknown_type_is_a_usage_error() -> None:
    # the hint named `kenning index --type-list`, which does not exist: the error lists the types itself
    with pytest.raises(
        UsageError, match=r"unknown file type 'pyhton'; did you mean 'py'\?.*valid types: .*\bpy\b.*\bzig\b"
    ):
        compile_selection(Selection(types=("pyhton",)))
    with pytest.raises(UsageError, match="unknown file type 'nope'"):
        compile_selection(Selection(types_not=("nope",)))


def test_types_table_has_ripgrep_names() -> None:
    names = (
        "py rust go js ts java c cpp cs rb ruby php swift kotlin scala sh sql css html md markdown rst txt"
    )
    for name in [*names.split(" "), "json", "yaml", "toml"]:
        assert TYPES[name], name
    assert "*.rs" in TYPES["rust"] and "*.md" in TYPES["md"]


def test_matcher_matches_indexed_paths_like_the_walk() -> None:
    m = compile_selection(Selection(globs=("*.md", "!docs/*"), types_not=("rst",)))
    assert m.matches("README.md") and m.matches("src/docs/c.md")
    assert not m.matches("docs/a.md") and not m.matches("docs/sub/b.md") and not m.matches("a.py")
    assert compile_selection(Selection()).matches("anything/at/all.bin")
    m = compile_selection(Selection(globs=("!docs/", "docs/keep/*")))
    assert not m.matches("docs/keep/a.md")  # an excluded directory is never walked, so never indexed


# --- sizes, empty, unsupported ------------------------------------------------------------------------------


def test_size_limits(tmp_path: Path) -> None:
    big = "x" * (1024 * 1024) + "\n"  # 1 MiB + 1: past the code limit, well inside the prose limit
    tree(tmp_path, {"big.py": big, "big.txt": big, "small.md": "0123456789abc\n"})
    files, skips = run(tmp_path)
    assert files == ["big.txt", "small.md"]
    assert skips == {"big.py": "1048577 bytes, past the 1048576-byte limit (--max-filesize)"}
    files, skips = run(tmp_path, max_filesize=10)
    assert files == [] and skips["small.md"] == "14 bytes, past the 10-byte limit (--max-filesize)"
    assert files_of(tmp_path, max_filesize=2 * 1024 * 1024) == ["big.py", "big.txt", "small.md"]


def test_empty_file(tmp_path: Path) -> None:
    tree(tmp_path, {"e.md": "", "a.md": "a\n"})
    assert run(tmp_path) == (["a.md"], {"e.md": "empty"})


def test_unsupported_only_reported_when_it_would_be_selected(tmp_path: Path) -> None:
    tree(tmp_path, {"report.pdf": b"%PDF-1.4", "a.zip": b"PK", "notes.md": "n\n"})
    assert run(tmp_path) == (
        ["notes.md"],
        {"a.zip": "unsupported format (.zip)", "report.pdf": "unsupported format (.pdf)"},
    )
    assert run(tmp_path, globs=("*.md",)) == (["notes.md"], {})


def test_kind_of() -> None:
    assert kind_of("src/a.py") == ("code", "python") and kind_of("A.PY") == ("code", "python")
    assert kind_of("x.rs") == ("code", "rust") and kind_of("x.tsx") == ("code", "tsx")
    assert kind_of("docs/a.md") == ("markdown", None) and kind_of("a.rst") == ("rst", None)
    assert kind_of("notes.txt") == ("text", None) and kind_of("data.weird") == ("text", None)
    assert kind_of("Makefile") == ("code", "make") and kind_of("Dockerfile") == ("code", "dockerfile")
    assert kind_of("Dockerfile.dev") == ("code", "dockerfile") and kind_of("CMakeLists.txt") == (
        "code",
        "cmake",
    )
    assert kind_of("README") == ("text", None) and kind_of("LICENSE") == ("text", None)
    assert kind_of(".bashrc") == ("code", "shell") and kind_of(".editorconfig") == ("text", None)
    for name in [
        "a.pdf",
        "a.docx",
        "a.xlsx",
        "a.zip",
        "a.tar.gz",
        "a.exe",
        "a.so",
        "a.png",
        "a.mp4",
        "a.sqlite",
        "a.woff2",
        "a.pyc",
        "a.class",
        "a.jar",
        "a.wasm",
    ]:
        assert kind_of(name) is None, name


# --- text decoding ------------------------------------------------------------------------------------------


def test_read_text_binary_sniff(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {"nul.dat": b"abc\x00def", "ctl.dat": bytes(range(1, 9)) * 50 + b"text", "ok.txt": b"a\tb\n"},
    )
    assert read_text(tmp_path / "nul.dat") == NotText("binary")
    assert read_text(tmp_path / "ctl.dat") == NotText("binary")
    assert read_text(tmp_path / "ok.txt") == "a\tb\n"


def test_read_text_encodings(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            "latin1.txt": "café naïve Ærø\n".encode("latin-1"),
            "cp1252.txt": "“quoted” – dash €\n".encode("cp1252"),
            "bom.txt": b"\xef\xbb\xbfhello\n",
            "crlf.txt": b"one\r\ntwo\rthree\n",
            "u16.txt": "héllo\nwörld\n".encode("utf-16"),
            "fffd.txt": ("\ufffd" * 5 + "abc\n").encode("utf-8"),
        },
    )
    assert read_text(tmp_path / "latin1.txt") == "café naïve Ærø\n"
    assert read_text(tmp_path / "cp1252.txt") == "“quoted” – dash €\n"
    assert read_text(tmp_path / "bom.txt") == "hello\n"
    assert read_text(tmp_path / "crlf.txt") == "one\ntwo\nthree\n"
    assert read_text(tmp_path / "u16.txt") == "héllo\nwörld\n"
    assert read_text(tmp_path / "fffd.txt") == NotText("not text")


def test_decode_bytes_directly() -> None:
    assert decode(b"caf\xe9\r\n") == "café\n"
    assert decode(b"") == NotText("empty")
    assert decode(b"\x00\x01") == NotText("binary")


def test_read_text_limits_and_errors(tmp_path: Path) -> None:
    tree(tmp_path, {"a.txt": "0123456789\n", "e.txt": ""})
    assert read_text(tmp_path / "a.txt", max_bytes=11) == "0123456789\n"
    assert read_text(tmp_path / "a.txt", max_bytes=5) == NotText("past the 5-byte limit (--max-filesize)")
    assert read_text(tmp_path / "e.txt") == NotText("empty")
    missing = read_text(tmp_path / "gone.txt")
    assert isinstance(missing, NotText) and missing.reason.startswith("cannot read")


def test_non_ascii_names_and_content(tmp_path: Path) -> None:
    tree(tmp_path, {"données/résumé.md": "# Résumé\nnaïve 日本語 ✓\n", "日本/読む.txt": "テキスト\n"})
    entries = [e for e in walk(tmp_path, Selection()) if isinstance(e, FileEntry)]
    assert [e.rel for e in entries] == ["données/résumé.md", "日本/読む.txt"]
    assert read_text(entries[0].path) == "# Résumé\nnaïve 日本語 ✓\n"
    assert entries[0].size == len("# Résumé\nnaïve 日本語 ✓\n".encode())


# --- symlinks -----------------------------------------------------------------------------------------------


def test_broken_symlink(tmp_path: Path) -> None:
    tree(tmp_path, {"a.md": "a\n"})
    (tmp_path / "dangling.md").symlink_to(tmp_path / "missing.md")
    assert run(tmp_path) == (["a.md"], {"dangling.md": "broken symlink"})
    assert run(tmp_path, follow=True) == (["a.md"], {"dangling.md": "broken symlink"})


def test_symlink_outside_root_never_followed(tmp_path: Path) -> None:
    outside = tree(tmp_path / "outside", {"o.md": "o\n", "dir/p.md": "p\n"})
    root = tree(tmp_path / "ws", {"a.md": "a\n"})
    (root / "out.md").symlink_to(outside / "o.md")
    (root / "outdir").symlink_to(outside / "dir", target_is_directory=True)
    (root / "rel_out").symlink_to(Path("..") / "outside", target_is_directory=True)
    want = {r: "symlink points outside the root" for r in ("out.md", "outdir", "rel_out")}
    assert run(root) == (["a.md"], want)
    assert run(root, follow=True) == (["a.md"], want)


def test_follow_inside_root(tmp_path: Path) -> None:
    tree(tmp_path, {"real/r.md": "r\n", "real/s.py": "s\n"})
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "alias.md").symlink_to(Path("real") / "r.md")
    assert run(tmp_path) == (["real/r.md", "real/s.py"], {})  # not followed, not reported
    files, skips = run(tmp_path, follow=True)
    assert files == ["alias.md", "link/r.md", "link/s.py", "real/r.md", "real/s.py"] and skips == {}
    entry = next(e for e in walk(tmp_path, Selection(follow=True)) if e.rel == "alias.md")
    assert isinstance(entry, FileEntry) and entry.size == 2 and entry.path == tmp_path.resolve() / "alias.md"


def test_symlink_loop_terminates(tmp_path: Path) -> None:
    tree(tmp_path, {"a/b/f.md": "f\n", "x/g.md": "g\n"})
    (tmp_path / "a" / "b" / "up").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "a" / "self").symlink_to(Path("."), target_is_directory=True)
    (tmp_path / "x" / "toy").symlink_to(tmp_path / "y", target_is_directory=True)
    (tmp_path / "y").symlink_to(tmp_path / "x", target_is_directory=True)
    (tmp_path / "root").symlink_to(tmp_path, target_is_directory=True)
    assert run(tmp_path) == (["a/b/f.md", "x/g.md"], {})
    files, skips = run(tmp_path, follow=True)
    assert files == ["a/b/f.md", "x/g.md", "y/g.md"]
    assert skips == {
        "a/b/up": "symlink loop",
        "a/self": "symlink loop",
        "root": "symlink loop",
        "x/toy": "symlink loop",
        "y/toy": "symlink loop",
    }


def test_followed_link_cannot_smuggle_secrets_or_git(tmp_path: Path) -> None:
    tree(tmp_path, {".env": "TOKEN=x\n", ".git/config": "[core]\n", "a.md": "a\n"})
    (tmp_path / "notes.txt").symlink_to(tmp_path / ".env")
    (tmp_path / "gitdir").symlink_to(tmp_path / ".git", target_is_directory=True)
    assert run(tmp_path, follow=True) == (["a.md"], {"notes.txt": "secret file (excluded by default)"})


# --- permissions and root ----------------------------------------------------------------------------------


def test_unreadable_file_and_dir_are_skipped(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.write_text("p")
    probe.chmod(0)
    try:
        probe.read_text()
        pytest.skip("this user reads files whatever their mode (root with CAP_DAC_OVERRIDE)")
    except PermissionError:
        probe.unlink()
    tree(tmp_path, {"a.md": "a\n", "locked.md": "l\n", "closed/c.md": "c\n", "z.md": "z\n"})
    (tmp_path / "locked.md").chmod(0)
    (tmp_path / "closed").chmod(0)
    try:
        files, skips = run(tmp_path)
    finally:
        (tmp_path / "locked.md").chmod(0o644)
        (tmp_path / "closed").chmod(0o755)
    assert files == ["a.md", "z.md"]
    assert skips["locked.md"] == "permission denied"
    assert skips["closed"].startswith("directory not readable")


def test_root_errors(tmp_path: Path) -> None:
    with pytest.raises(RootError, match=r"nope does not exist; pass an existing directory"):
        check_root(tmp_path / "nope")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(RootError, match=r"f\.txt is not a directory"):
        check_root(tmp_path / "f.txt")
    with pytest.raises(RootError, match="filesystem root"):
        check_root("/")
    with pytest.raises(RootError):
        list(walk(tmp_path / "nope", Selection()))
    (tmp_path / "link").symlink_to(tmp_path, target_is_directory=True)
    assert check_root(tmp_path / "link") == tmp_path.resolve()


# --- issue 18, item 5: tracked documentation in a folder the default list names ------------------------------


def test_regression_tracked_docs_in_doc_build_were_never_indexed(tmp_path: Path) -> None:
    """Issue 18, item 5: the default list pruned every folder named `build`, so Sphinx sources in `doc/build/`
    (SQLAlchemy's layout) were never indexed. In a git repository a folder holding a file git tracks is walked;
    the repository's ignore files, the user's globs, the secret rules and the third-party names still apply."""
    tree(
        tmp_path,
        {
            ".gitignore": "doc/build/output/\n",
            "doc/build/conf.py": "project = 'x'\n",
            "doc/build/index.rst": "Index\n=====\n",
            "doc/build/orm/session.rst": "Session\n=======\n",
            "doc/build/output/html/index.html": "<p>built</p>\n",
            "doc/build/id_rsa": "not a key, but named like one\n",
            "vendor/lib/a.go": "package lib\n",
            "dist/bundle.md": "# build output, untracked\n",
            "src/a.py": "a = 1\n",
        },
    )
    git(tmp_path, "init", "-q")
    git(
        tmp_path, "add", "-f", "doc/build/conf.py", "doc/build/index.rst", "doc/build/orm", "doc/build/id_rsa"
    )
    git(tmp_path, "add", "-f", "vendor", "src")
    pruned: list[str] = []
    files, skips = [], {}
    for item in walk(tmp_path, Selection(), on_prune=pruned.append):
        if isinstance(item, FileEntry):
            files.append(item.rel)
        else:
            skips[item.rel] = item.reason
    assert files == ["doc/build/conf.py", "doc/build/index.rst", "doc/build/orm/session.rst", "src/a.py"]
    assert skips == {"doc/build/id_rsa": "secret file (excluded by default)"}
    assert pruned == ["dist", "vendor"], "untracked output and third-party code stay pruned"
    assert files_of(tmp_path, globs=("!doc/*",)) == ["src/a.py"], "the user's globs still apply"
    # the walk is told git's listing by a caller that has it (the index run), and asks git itself otherwise
    told = [i.rel for i in walk(tmp_path, Selection(), tracked=["src/a.py"]) if isinstance(i, FileEntry)]
    assert told == ["src/a.py"]
    # a root below the repository's top: git's paths are the root's own
    assert files_of(tmp_path / "doc") == ["build/conf.py", "build/index.rst", "build/orm/session.rst"]
    # the watcher's filter agrees with the walk
    f = PathFilter(tmp_path, Selection())
    assert f.accepts("doc/build/orm/session.rst", is_dir=False)
    assert not f.accepts("dist/bundle.md", is_dir=False)
    assert not f.accepts("vendor/lib/a.go", is_dir=False)


def test_regression_doc_sources_in_a_build_folder_outside_git_are_walked(tmp_path: Path) -> None:
    """Issue 18, item 5, outside git: a folder the list names is walked when it directly holds documentation
    sources (a Sphinx conf.py, or reStructuredText, which nothing builds into); a build's output is not."""
    tree(
        tmp_path,
        {
            "doc/build/conf.py": "project = 'x'\n",
            "doc/build/intro.md": "# Intro\n",
            "manual/build/index.rst": "Index\n=====\n",
            "build/lib/pkg/a.py": "a = 1\n",
            "site/build/html/index.html": "<p>built</p>\n",
            "site/build/html/_sources/index.rst.txt": "Index\n",
            "out/README.md": "# copied by a build\n",
            "node_modules/pkg/README.rst": "third party\n",
        },
    )
    pruned: list[str] = []
    files = [i.rel for i in walk(tmp_path, Selection(), on_prune=pruned.append) if isinstance(i, FileEntry)]
    assert files == ["doc/build/conf.py", "doc/build/intro.md", "manual/build/index.rst"]
    assert pruned == ["build", "node_modules", "out", "site/build"]
    f = PathFilter(tmp_path, Selection())
    assert f.accepts("doc/build/intro.md", is_dir=False) and not f.accepts("build/lib/pkg/a.py", is_dir=False)
