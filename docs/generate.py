"""Write the parts of docs/ that the code knows better than a person: the settings, the commands, the JSON schemas.

A generated part sits between two markers in its page, `<!-- generated: NAME -->` and `<!-- end: NAME -->`; the
prose around it is written by hand and kept. Run from anywhere:

    python docs/generate.py           # rewrite the generated parts in place
    python docs/generate.py --check   # exit 1, naming the stale pages, when a page differs from what it would write

tests/test_docs.py runs the check, so a new setting, command, flag or schema field fails the tests until its page
is regenerated. The CLI reference is built from the parser's actions rather than from argparse's `--help` layout,
which changes between Python versions.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import MISSING, fields
from pathlib import Path

DOCS = Path(__file__).resolve().parent
MARKER = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end: (?P=name) -->)", re.S)


# ---- settings (docs/configuration.md) ----


def _default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _flags_by_dest() -> dict[str, list[str]]:
    """Each option's dest -> the `kenning COMMAND --flag`s that set it, over every command."""
    found: dict[str, list[str]] = {}
    for path, parser in commands():
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                flag = max(action.option_strings, key=len)
                found.setdefault(action.dest, []).append(f"`{' '.join(path)} {flag}`")
    return found


def settings_table() -> str:
    from kenning import config

    flags = _flags_by_dest()
    rows = [
        "| setting | default | environment | flags | `.kenning.toml` | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for f in fields(config.Config):
        if f.name not in config._SCALARS:
            continue  # embedders (a table of its own, below) and what load_config records
        doc = config.SETTING_DOCS.get(f.name)
        if doc is None:
            raise SystemExit(f"kenning.config.SETTING_DOCS has no line for the setting {f.name!r}: add one")
        default = f.default if f.default is not MISSING else None
        kind = config._SCALARS[f.name].__name__
        workspace = "no" if f.name in config.USER_ONLY else "yes"
        rows.append(
            f"| `{f.name}` ({kind}) | {_default(default)} | `KENNING_{f.name.upper()}` "
            f"| {', '.join(flags.get(f.name, [])) or '-'} | {workspace} | {doc} |"
        )
    return "\n".join(rows) + "\n"


# ---- commands (docs/cli.md) ----


def _parser() -> argparse.ArgumentParser:
    from kenning.cli import build_parser

    return build_parser()


def commands(
    parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ("kenning",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and subcommand, found by walking the parser: (("kenning", "snapshot", "export"), parser)."""
    parser = parser or _parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def _argument(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        shown = str(action.metavar)
    elif action.choices is not None:
        shown = "{" + ",".join(str(c) for c in action.choices) + "}"
    elif action.option_strings:
        shown = action.dest.upper()
    else:
        shown = action.dest
    if not action.option_strings and action.choices is not None and action.metavar is not None:
        shown += " {" + ",".join(str(c) for c in action.choices) + "}"
    return f"`{shown}`"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def command_reference() -> str:
    out: list[str] = []
    helps: dict[str, str] = {}  # a subcommand's line in its parent's list, for one made without a description
    for path, parser in commands():
        name = " ".join(path)
        out.append(f"## `{name}`\n")
        description = parser.description or helps.get(name)
        if description:
            out.append(description.strip() + "\n")
        rows = []
        subs: list[str] = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action._choices_actions:
                    helps[f"{name} {sub.dest}"] = sub.help or ""
                    subs.append(f"- [`{name} {sub.dest}`](#{_slug(f'{name} {sub.dest}')}): {_cell(sub.help)}")
                continue
            if action.dest == "help":
                continue
            names = ", ".join(f"`{o}`" for o in action.option_strings) or _argument(action)
            argument = _argument(action) if action.option_strings else ""
            rows.append(f"| {_cell(names)} | {_cell(argument)} | {_cell(action.help)} |")
        if subs:
            out.append("\n".join(subs) + "\n")
        if rows:
            out.append("| argument | value | what it does |\n|---|---|---|\n" + "\n".join(rows) + "\n")
        if parser.epilog:
            out.append("```\n" + parser.epilog.strip() + "\n```\n")
    return "\n".join(out)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


# ---- JSON Lines schemas (docs/output.md), from the docstrings that define them ----


def _schema(module: str) -> str:
    import importlib

    doc = importlib.import_module(module).__doc__ or ""
    start = doc.find("JSON Lines schema")
    if start < 0:
        raise SystemExit(f"{module}'s docstring no longer holds its JSON Lines schema")
    return doc[start:].strip() + "\n"


BLOCKS: dict[str, Callable[[], str]] = {
    "settings": settings_table,
    "commands": command_reference,
    "search-json": lambda: _schema("kenning.render"),
    "grep-json": lambda: _schema("kenning.search.grep"),
}


def render(text: str) -> str:
    """`text` with each generated part written anew."""

    def fill(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in BLOCKS:
            raise SystemExit(f"unknown generated part {name!r}; known: {', '.join(BLOCKS)}")
        return f"{m.group(1)}{BLOCKS[name]()}{m.group(4)}"

    return MARKER.sub(fill, text)


def pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if MARKER.search(p.read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    args.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is stale")
    check = args.parse_args(argv).check
    stale = []
    for page in pages():
        old = page.read_text(encoding="utf-8")
        new = render(old)
        if new != old:
            stale.append(page)
            if not check:
                page.write_text(new, encoding="utf-8")
    for page in stale:
        print(f"{page.relative_to(DOCS.parent)}: {'stale' if check else 'rewritten'}", file=sys.stderr)
    if check and stale:
        print("run `python docs/generate.py` and commit the pages", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
