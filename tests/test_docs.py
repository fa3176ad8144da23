"""The docs keep up with the code: every command's `--help` and every setting is in docs/, the generated pages are
what `python docs/generate.py` writes today, and no relative link in README.md or docs/ leads nowhere."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from kenning import cli, config
from kenning.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("kenning",)
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and subcommand of the real parser, walked (no list kept by hand)."""
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, (*path, name))
    return found


def _sections(page: str) -> dict[str, str]:
    """docs/cli.md cut at its `## `kenning ...`` headings: the command's words -> its section."""
    parts = re.split(r"^## `(kenning[^`]*)`\n", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _flat(text: str) -> str:
    return " ".join(text.replace("\\|", "|").split())


def test_generated_pages_are_what_the_generator_writes_today() -> None:
    generate = _generator()
    pages = {p.name for p in generate.pages()}
    assert {"cli.md", "configuration.md", "output.md"} <= pages
    stale = [p.name for p in generate.pages() if generate.render(p.read_text()) != p.read_text()]
    assert not stale, f"{stale} are behind the code: run `python docs/generate.py` and commit them"


def test_every_command_help_is_in_the_docs(capsys: pytest.CaptureFixture[str]) -> None:
    sections = _sections((DOCS / "cli.md").read_text())
    commands = _commands(cli.build_parser())
    assert any(len(path) == 3 for path, _ in commands), "the walk must reach subcommands' own actions"
    for path, parser in commands:
        name = " ".join(path)
        assert name in sections, f"`{name}` has no section in docs/cli.md"
        section = _flat(sections[name])
        # what the user sees: the real --help, through the CLI's entry point
        with pytest.raises(SystemExit) as done:
            cli.main([*path[1:], "--help"])
        assert done.value.code == 0
        shown = capsys.readouterr().out
        flags = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", shown)) - {"-h", "--help"}
        assert flags, f"`{name} --help` shows no flag"
        missing = sorted(f for f in flags if f"`{f}`" not in section and f not in section)
        assert not missing, f"`{name} --help` shows {missing}, which docs/cli.md does not"
        for action in parser._actions:
            if action.help and action.help is not argparse.SUPPRESS and action.dest != "help":
                assert _flat(action.help) in section, (
                    f"`{name}`: the help of {action.dest} is not in docs/cli.md"
                )
        for text in (parser.description, parser.epilog):
            if text:
                assert _flat(text) in section, f"`{name}`: its description or examples are not in docs/cli.md"


def test_every_setting_is_in_the_docs() -> None:
    settings = set(config._SCALARS)
    assert set(config.SETTING_DOCS) == settings, "kenning.config.SETTING_DOCS must have one line per setting"
    page = (DOCS / "configuration.md").read_text()
    for name in settings:
        assert f"`{name}`" in page and f"`KENNING_{name.upper()}`" in page, (
            f"{name} is not in configuration.md"
        )
    assert "[embedders." in page


def test_the_settings_a_workspace_cannot_set_are_the_ones_the_docs_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-user-config"))
    values = {"store": "postgresql://db.internal/kenning"}
    refused = set()
    for name, kind in config._SCALARS.items():
        default = getattr(config.Config(), name)
        value = values.get(name, default if default is not None else "x")
        if kind is str:
            value = f'"{value}"'
        elif kind is bool:
            value = str(value).lower()
        root = tmp_path / name
        root.mkdir()
        (root / ".kenning.toml").write_text(f"{name} = {value}\n")
        try:
            config.load_config(root, env={})
        except ConfigError:
            refused.add(name)
    assert refused == config.USER_ONLY


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped, spaces to
    hyphens (a repeated one gets -1, -2: see _anchors)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # a `# comment` is no heading
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _prose(text: str) -> str:
    """The text without its fenced code blocks and inline code, where a `[x](y)` is no link."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def test_every_relative_link_leads_to_a_file_that_exists() -> None:
    pages = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
    checked, broken = 0, []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text())):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            where = (page.parent / file).resolve() if file else page
            checked += 1
            if not where.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert checked > 20
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", _prose((REPO / "README.md").read_text())))
    orphans = sorted(p.name for p in DOCS.glob("*.md") if p.name not in linked)
    assert not orphans, f"README.md links to no {orphans}"
