"""Secrets never leave the machine through kenning: keys, token-shaped secrets, and the index's own files.

Every secret here is built at run time from pieces (see conftest.armor), so this file holds none itself:
kenning indexes its own source.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcp import Client

from conftest import KEY_BODY, armor, make_tree, run_cli
from test_mcp import call, drive


def _key_module() -> str:
    return f'"""Deploy helper."""\n\nKEY = """{armor("PRIVATE KEY")}"""\n\n\ndef deploy(host):\n    return host\n'


def test_regression_symbols_printed_a_private_key_the_index_and_grep_refuse(tmp_path: Path) -> None:
    """`kenning symbols deploy_key.py` and the MCP symbols tool printed ~200 characters of the key (the value's
    signature), while the indexer and grep refused the same file: outline read files without the secret rule."""
    root = make_tree(
        tmp_path / "ws", {"deploy_key.py": _key_module(), "ok.py": "def fine():\n    return 1\n"}
    )
    for args in (("symbols", "deploy_key.py"), ("symbols", "--json", "deploy_key.py")):
        out = run_cli(*args, cwd=root)
        assert KEY_BODY[:20] not in out.stdout + out.stderr, out.stdout
        assert "Traceback" not in out.stderr
        assert "secret file" in out.stdout and out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    both = run_cli("symbols", "deploy_key.py", "ok.py", cwd=root)
    assert "def fine()" in both.stdout and KEY_BODY[:20] not in both.stdout
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0  # the index still serves the MCP side

    async def body(client: Client) -> None:
        text, data = await call(client, "symbols", {"path": "deploy_key.py"})
        assert KEY_BODY[:20] not in text + json.dumps(data), text
        assert data["supported"] is False and data["symbols"] == [] and "secret file" in data["note"]

    drive(body, root)


def _modes(home: Path) -> dict[str, str]:
    """Every folder and file under the index home (itself included) with a mode other than 0700/0600."""
    wrong = {}
    for path in [home, *home.rglob("*")]:
        mode = path.lstat().st_mode & 0o777
        if mode != (0o700 if path.is_dir() else 0o600):
            wrong[str(path.relative_to(home.parent))] = oct(mode)
    return wrong


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)  # the children (the CLI, the MCP server) inherit it
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.slow
def test_regression_the_index_was_readable_by_other_users(tmp_path: Path) -> None:
    """index.db was 0644 in 0755 folders, so another local user read the text of a 0600 file out of it. Under a
    umask that closes nothing, every folder of the index must come out 0700 and every file 0600."""
    root = make_tree(
        tmp_path / "ws", {"private.md": "# Payroll\n\nSalaries of everyone.\n", "a.py": "x = 1\n"}
    )
    (root / "private.md").chmod(0o600)
    elsewhere = tmp_path / "indexes" / "deep"  # index_dir, made by kenning: its folders are private too
    with _umask(0):
        out = run_cli("index", str(root), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        home = root / ".kenning"
        assert (home / "kenning.json").is_file() and list(home.rglob("index.db*"))
        assert list(home.rglob("vectors-*")), "the vector snapshot is checked too"
        assert _modes(home) == {}
        assert run_cli("search", "payroll", str(root), cwd=tmp_path).returncode == 0  # readers still read it

        # an index made before the rule is tightened on its next write
        for path in [home, *home.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
        assert _modes(home) == {}

        out = run_cli("index", str(root), cwd=tmp_path, env={"KENNING_INDEX_DIR": str(elsewhere)})
        assert out.returncode == 0, out.stderr
        assert _modes(tmp_path / "indexes") == {}

        other = make_tree(tmp_path / "mcp-ws", {"notes.md": "# Notes\n\nprivate notes\n"})

        async def body(client: Client) -> None:
            await call(client, "text_index", {"paths": ["."]})

        drive(body, other)
        assert (other / ".kenning" / "kenning.json").is_file() and _modes(other / ".kenning") == {}


def _b64(data: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _token_secrets() -> dict[str, str]:
    """Token-shaped secrets, each made from pieces here so no source file holds one whole."""
    return {
        "aws_id": "AKIA" + "Q3EGRIXYZ" + "7NEXAMPLE"[:7],
        "aws_secret": "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY",
        "github": "gh" + "p_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8",
        "stripe": "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "jwt": ".".join(
            (_b64({"alg": "HS256", "typ": "JWT"}), _b64({"sub": "42", "name": "ops"}), "SflKxwRJSMeKKF2QT4fw")
        ),
        "netrc": "hunter" + "2-horse-staple",
    }


def _secret_tree(s: dict[str, str]) -> dict[str, str]:
    config = {
        "region": "eu-west-1",
        "aws_access_key_id": s["aws_id"],
        "aws_secret_access_key": s["aws_secret"],
    }
    return {
        "config.json": json.dumps(config, indent=2) + "\n",
        "settings.py": (
            '"""Deployment settings."""\n\n'
            f'GITHUB_TOKEN = "{s["github"]}"\nSTRIPE_API_KEY = "{s["stripe"]}"\n\n\n'
            f'def headers():\n    return {{"Authorization": "Bearer {s["jwt"]}"}}\n'
        ),
        "docs/deploy.md": (
            "# Deploy\n\nPut this in your netrc file:\n\n"
            f"    machine deploy.example.com login ops password {s['netrc']}\n\nThen run the deploy script.\n"
        ),
    }


def _lines_with(tree: dict[str, str], word: str) -> set[tuple[str, int]]:
    return {
        (rel, n) for rel, text in tree.items() for n, line in enumerate(text.split("\n"), 1) if word in line
    }


@pytest.mark.slow
def test_regression_token_shaped_secrets_were_indexed_and_handed_to_agents(tmp_path: Path) -> None:
    """AWS keys in config.json, GitHub and Stripe tokens and a JWT in settings.py and a netrc line were stored,
    embedded and printed whole by search, grep, symbols and MCP. The value is redacted; the file stays
    searchable and its line numbers exact."""
    secrets = _token_secrets()
    tree = _secret_tree(secrets)
    root = make_tree(tmp_path / "ws", tree)

    def leaked(text: str) -> list[str]:
        return [name for name, value in secrets.items() if value in text or value[:16] in text]

    out = run_cli("index", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    stored = b"".join(p.read_bytes() for p in (root / ".kenning").rglob("*") if p.is_file())
    assert leaked(stored.decode("latin-1")) == []
    assert b"[secret redacted]" in stored

    for query in ("aws_secret_access_key", "GITHUB_TOKEN STRIPE_API_KEY", "netrc machine password", "Bearer"):
        found = run_cli("search", "--json", "--preview", "full", query, str(root), cwd=tmp_path)
        assert found.returncode == 0, (query, found.stderr)
        assert leaked(found.stdout) == [] and "[secret redacted]" in found.stdout, (query, found.stdout)
    for value in secrets.values():  # the value itself finds nothing: it is not in the index
        found = run_cli("search", "--json", "--mode", "lexical", value, str(root), cwd=tmp_path)
        assert leaked(found.stdout) == [], found.stdout

    for engine in ("rg", "python"):
        grep = run_cli("grep", "--engine", engine, "--json", "aws_|TOKEN|KEY|Bearer|machine", cwd=root)
        assert grep.returncode == 0, grep.stderr
        assert leaked(grep.stdout) == [], grep.stdout
        rows = [json.loads(line) for line in grep.stdout.splitlines()]
        printed = {(r["path"], r["line"]) for r in rows if r["type"] == "match"}
        assert sum("[secret redacted]" in r["text"] for r in rows if r["type"] == "match") == 6
        want = set().union(*(_lines_with(tree, w) for w in ("aws_", "TOKEN", "KEY", "Bearer", "machine")))
        assert printed == want  # the same lines, at the same numbers, as in the files
        for value in secrets.values():
            assert run_cli("grep", "--engine", engine, "-F", value[:12], cwd=root).returncode == 1, value

    symbols = run_cli("symbols", "settings.py", cwd=root)
    assert "GITHUB_TOKEN" in symbols.stdout and leaked(symbols.stdout) == [], symbols.stdout

    async def body(client: Client) -> None:
        said = []
        for query in ("aws_secret_access_key", "GITHUB_TOKEN", "netrc machine password"):
            said += await call(client, "text_search", {"query": query, "preview": "full"})
        said += await call(client, "grep", {"pattern": "aws_|TOKEN|KEY|Bearer|machine"})
        said += await call(client, "symbols", {"path": "settings.py"})
        text = json.dumps(said)
        assert leaked(text) == [] and "[secret redacted]" in text

    drive(body, root)


def test_redaction_replaces_only_the_value_and_keeps_every_line() -> None:
    # imported here, so the regression tests above also run against a kenning without the module
    from kenning.walk.redaction import redact

    key = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
    text = (
        f'İstanbul office: aWs_Secret_Key = "{key}"\n'  # a letter that lowers to two, and an odd spelling
        'db = "postgres://app:p@localhost/db"  # ghpages, AKIA as a word\n'
        "  MACHINE h LOGIN u PASSWORD " + "s3cr" + "et-x\n"
        "plain line\n"
    )
    for raw in (None, text.encode()):
        out = redact(text, raw)
        assert out.split("\n")[1:] == [
            'db = "postgres://app:[secret redacted]@localhost/db"  # ghpages, AKIA as a word',
            "  MACHINE h LOGIN u PASSWORD [secret redacted]",
            "plain line",
            "",
        ]
        assert out.split("\n")[0] == 'İstanbul office: aWs_Secret_Key = "[secret redacted]"'
    plain = "no secrets here\n"
    assert redact(plain, plain.encode()) is plain


def test_regression_search_context_lines_showed_a_token_the_index_had_redacted(tmp_path: Path) -> None:
    # -C read the file's lines with the plain decoder, not the secret rule: the line after a hit gave the
    # GitHub token in full
    token = _token_secrets()["github"]
    lines = [f"# setting {i}: retry backoff jitter\n" for i in range(6)]
    lines[3] = f'GITHUB_TOKEN = "{token}"\n'
    root = make_tree(tmp_path / "ws", {"settings.py": "".join(lines)})
    assert run_cli("index", ".", cwd=root).returncode == 0
    out = run_cli("search", "-C", "5", "--json", "retry backoff jitter", ".", cwd=root)
    assert out.returncode == 0, out.stderr
    assert token not in out.stdout
    assert "[secret redacted]" in out.stdout


def _wrapped_keys() -> dict[str, bytes]:
    """One file per shape a private key was found in and missed: each holds KEY_BODY's lines."""
    pem = armor("RSA PRIVATE KEY")
    lines = pem.splitlines()
    encoded = base64.b64encode(pem.encode()).decode()
    return {
        "notes_utf16.txt": ("Server notes\n" + pem).encode("utf-16"),
        "setup.py": ("# the old key, kept for reference\n" + "".join(f"# {ln}\n" for ln in lines)).encode(),
        "Keys.java": (
            "class Keys {\n    static final String K =\n        "
            + " +\n        ".join(f'"{ln}\\n"' for ln in lines)
            + ";\n}\n"
        ).encode(),
        "runbook.md": ("# Runbook\n\n" + "".join(f"> {ln}\n" for ln in lines)).encode(),
        "kubeconfig.yaml": f"users:\n- name: ci\n  user:\n    client-key-data: {encoded}\n".encode(),
        "ok.py": b"def fine():\n    return 1\n",
    }


def test_regression_private_keys_in_a_comment_a_quote_a_string_utf16_or_base64_were_indexed(
    tmp_path: Path,
) -> None:
    """A PEM in a UTF-16 file, commented out with `# `, built by Java string concatenation, in a Markdown quote,
    or base64-encoded in a kubeconfig's client-key-data was not seen as a key: the file was indexed and the key
    stored and printed. Each such file is now refused as a secret file by the index, grep and symbols."""
    files = _wrapped_keys()
    root = tmp_path / "ws"
    root.mkdir()
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    pieces = [KEY_BODY[i : i + 16] for i in range(0, 64, 16)] + [
        base64.b64encode(KEY_BODY[:48].encode()).decode()
    ]

    out = run_cli("index", "--json", ".", cwd=root)
    assert out.returncode == 0, out.stderr
    stored = b"".join(p.read_bytes() for p in (root / ".kenning").rglob("*") if p.is_file()).decode("latin-1")
    assert [p for p in pieces if p in stored] == []
    assert "def fine" in stored  # the index holds the other file

    grep = run_cli("grep", "--engine", "python", "-c", "[A-Za-z0-9]", ".", cwd=root)
    assert [ln for ln in grep.stdout.splitlines() if "ok.py" not in ln] == [], grep.stdout
    for rel in files:
        if rel == "ok.py":
            continue
        named = run_cli("grep", "--engine", "python", "[A-Za-z]", rel, cwd=root)
        assert [p for p in pieces if p in named.stdout] == [] and named.returncode != 0, (rel, named.stdout)
    symbols = run_cli("symbols", "setup.py", "Keys.java", cwd=root)
    assert [p for p in pieces if p in symbols.stdout] == [], symbols.stdout
    assert symbols.stdout.count("secret file") == 2, symbols.stdout


def test_private_key_detection_leaves_lookalikes_alone() -> None:
    from kenning.walk import holds_private_key

    readme = b"-----BEGIN RSA PRIVATE KEY-----\n# MIIEowIBAAKCAQEA...\n# -----END RSA PRIVATE KEY-----\n"
    cert = armor("CERTIFICATE").encode()
    assert not holds_private_key(readme)
    assert not holds_private_key(b"# " + cert.replace(b"\n", b"\n# "))
    assert not holds_private_key(base64.b64encode(cert))
    assert not holds_private_key(armor("PUBLIC KEY").encode("utf-16"))
    assert {rel: holds_private_key(data) for rel, data in _wrapped_keys().items()} == {
        "notes_utf16.txt": True, "setup.py": True, "Keys.java": True, "runbook.md": True,
        "kubeconfig.yaml": True, "ok.py": False,
    }  # fmt: skip


def _more_secrets() -> dict[str, str]:
    """Shapes the redaction missed, each made from pieces so no source file holds one whole."""
    return {
        "aws_ini": "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKE1",
        "aws_yaml": "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKE2",
        "aws_export": "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKE3",
        "redis": "Redis" + "Pass" + "w0rd-9",
        "amqp": "Rabbit" + "Pass" + "w0rd-7",
        "github_pat": "github" + "_pat_" + "11ABCDEFG0123456789_" + "abcdefghijKLMNOPQRST0123456789" * 2,
        "anthropic": "sk-" + "ant-api03-" + "Q1w2E3r4T5y6U7i8O9p0" * 4 + "-AbCdEfAA",
        "stripe_test": "sk" + "_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "openai_project": "sk-" + "proj-" + "Xy7Kp2Lm9Qw4" * 6,
        "openai_user": "sk-" + "Ab1cD2eF3gH4" * 4,
    }


def test_regression_unquoted_aws_keys_url_passwords_without_a_user_and_newer_tokens_were_stored(
    tmp_path: Path,
) -> None:
    """An AWS secret key in a credentials-style file, YAML or an `export` line (unquoted), a URL password with an
    empty user (redis://:PW@host), and github_pat_, sk-ant-, sk_test_ and OpenAI sk- keys were stored, printed
    by grep and served whole. Each value is now redacted, by the index and both grep engines alike."""
    s = _more_secrets()
    tree = {
        "deploy/aws.cfg": f"[default]\naws_access_key_id = AKIA\naws_secret_access_key = {s['aws_ini']}\n",
        "deploy/ci.yaml": f"env:\n  aws_secret_access_key: {s['aws_yaml']}\n  region: eu-west-1\n",
        "deploy/env.sh": f"export AWS_SECRET_ACCESS_KEY={s['aws_export']}\nexport REGION=eu\n",
        "app/brokers.py": (
            f'CACHE = "redis://:{s["redis"]}@cache:6379/0"\nQUEUE = "amqp://:{s["amqp"]}@rabbit:5672//"\n'
        ),
        "app/keys.py": "".join(
            f'{name.upper()}_TOKEN = "{s[name]}"\n'
            for name in ("github_pat", "anthropic", "stripe_test", "openai_project", "openai_user")
        ),
    }
    root = make_tree(tmp_path / "ws", tree)

    def leaked(text: str) -> list[str]:
        return [name for name, value in s.items() if value in text or value[:14] in text]

    assert run_cli("index", ".", cwd=root).returncode == 0
    stored = b"".join(p.read_bytes() for p in (root / ".kenning").rglob("*") if p.is_file())
    assert leaked(stored.decode("latin-1")) == []
    for engine in ("rg", "python"):
        grep = run_cli("grep", "--engine", engine, "--json", "(?i)aws_secret|://|TOKEN", cwd=root)
        assert grep.returncode == 0, grep.stderr
        assert leaked(grep.stdout) == [], grep.stdout
        rows = [json.loads(line) for line in grep.stdout.splitlines()]
        assert sum("[secret redacted]" in r.get("text", "") for r in rows) == 10, grep.stdout
    found = run_cli(
        "search", "--json", "--preview", "full", "aws_secret_access_key TOKEN redis", ".", cwd=root
    )
    assert found.returncode == 0 and leaked(found.stdout) == [], found.stdout


def test_regression_an_env_template_of_one_environment_was_left_out_as_a_secret() -> None:
    from kenning.walk import is_secret

    for name in (".env", ".env.local", ".env.development", ".env.test", "conf/.env.staging"):
        assert is_secret(name), name
    for name in (".env.example", ".env.local.example", ".env.production.sample", "conf/.env.dev.template"):
        assert not is_secret(name), name
