"""Edit a JSON document as text: add, replace or remove one member or array element, leaving every other byte.

`kenning install` adds its entry to files people and other tools keep by hand (`~/.claude.json`,
`settings.json`): parsing and re-serialising them would re-indent them, re-escape their strings and rewrite
their numbers. Here the document is scanned for the spans of its values, and an edit splices only the text it
adds or takes out; the new text follows the indentation the document already uses (the unit of its first
indented line, tabs included; two spaces in a document without one) and its line ends.

JSONC (opencode's configuration: `//` and `/* */` comments, trailing commas) is read as well: `plain` blanks its
comments and trailing commas with spaces, so every offset of the plain text is the offset of the same character in
the original, which is scanned for positions while the splices go into the original, comments and all. The caller
checks the result parses to the object it meant; for plain JSON it keeps a re-serialised fallback for anything this
cannot place (see `kenning.agents.install`), for JSONC it refuses, since re-serialising would drop the comments.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JsonText", "edited", "loads", "plain"]

_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


@dataclass
class _Node:
    start: int
    end: int  # exclusive
    kind: str  # "object", "array" or "scalar"
    # object: (key, key_start, value); array: (None, value_start, value)
    items: list[tuple[str | None, int, _Node]] = field(default_factory=list)

    def member(self, key: str) -> _Node | None:
        found = [n for k, _, n in self.items if k == key]
        return found[-1] if found else None  # as json.loads reads a repeated key


def plain(text: str) -> str:
    """JSONC as JSON of the same length: each comment and trailing comma blanked (a comment's line ends kept, so
    line numbers hold too). Text without either comes back as it is."""
    if "/" not in text and "," not in text:
        return text
    out = list(text)
    i, n = 0, len(text)
    commas: list[int] = []  # the last comma seen outside strings, while only blanks and comments follow it
    while i < n:
        c = text[i]
        if c == '"':
            try:
                _, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            except ValueError:
                return "".join(out)  # an unclosed string: the scan that follows says where
            commas.clear()
            continue
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = ["\n" if ch == "\n" else " " for ch in text[i:end]]
            i = end
            continue
        if c == ",":
            commas[:] = [i]
        elif c in "}]":
            for at in commas:
                out[at] = " "
            commas.clear()
        elif c not in " \t\r\n":
            commas.clear()
        i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """A JSONC document's value (plain JSON reads as json.loads reads it)."""
    return json.loads(plain(text))


def _skip(text: str, i: int) -> int:
    """The index of the first non-whitespace character at or after i."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _skip_inline(text: str, i: int) -> int:
    """The index of the first character at or after i that is not a space or a tab."""
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _scan(text: str, i: int) -> _Node:
    i = _skip(text, i)
    if i >= len(text):
        raise ValueError("unexpected end of JSON")
    c = text[i]
    if c == '"':
        _, end = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        return _Node(i, end, "scalar")
    if c in "{[":
        node = _Node(i, i, "object" if c == "{" else "array")
        close = "}" if c == "{" else "]"
        j = _skip(text, i + 1)
        if text.startswith(close, j):
            node.end = j + 1
            return node
        while True:
            key: str | None = None
            at = j
            if node.kind == "object":
                key, j = json.decoder.scanstring(text, j + 1)  # type: ignore[attr-defined]
                j = _skip(text, j)
                if not text.startswith(":", j):
                    raise ValueError(f"expected ':' at {j}")
                j += 1
            value = _scan(text, j)
            node.items.append((key, at if key is not None else value.start, value))
            j = _skip(text, value.end)
            if text.startswith(close, j):
                node.end = j + 1
                return node
            if not text.startswith(",", j):
                raise ValueError(f"expected ',' at {j}")
            j = _skip(text, j + 1)
    found = _SCALAR.match(text, i)
    if found is None:
        raise ValueError(f"unexpected {c!r} at {i}")
    return _Node(i, found.end(), "scalar")


class JsonText:
    """A JSON (or, with `jsonc`, JSONC) document's text, edited in place; `text` is the result."""

    def __init__(self, text: str, *, jsonc: bool = False) -> None:
        self.text = text
        self.jsonc = jsonc
        self.newline = "\r\n" if "\r\n" in text else "\n"
        indented = re.search(r"\n([ \t]+)[^\s/]", text)
        self.unit = indented.group(1) if indented else "  "
        _scan(self._plain(), 0)  # refuse what cannot be read before any edit

    def _plain(self) -> str:
        return plain(self.text) if self.jsonc else self.text

    def _node(self, path: tuple[str | int, ...]) -> _Node | None:
        node: _Node | None = _scan(self._plain(), 0)
        for step in path:
            if node is None:
                return None
            if isinstance(step, int):
                node = node.items[step][2] if node.kind == "array" and step < len(node.items) else None
            else:
                node = node.member(step) if node.kind == "object" else None
        return node

    def _line_indent(self, at: int) -> str:
        start = self.text.rfind("\n", 0, at) + 1
        return re.match(r"[ \t]*", self.text[start:]).group(0)  # type: ignore[union-attr]

    def _render(self, value: Any, indent: str, multiline: bool) -> str:
        if not multiline:
            return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        lines = json.dumps(value, ensure_ascii=False, indent=self.unit).split("\n")
        return (self.newline + indent).join(lines)

    def _insert(self, container: _Node, index: int, piece: Any, key: str | None) -> None:
        """Put `piece` (a member named key, or an array element) at `index` of the container."""
        inner = self.text[container.start : container.end]
        multiline = "\n" in inner or (not container.items and "\n" in self.text)
        outer = self._line_indent(container.start)
        if container.items:
            ref = container.items[min(index, len(container.items) - 1)][1]
            indent = self._line_indent(ref) if multiline else ""
        else:
            indent = outer + self.unit if multiline else ""
        head = "" if key is None else json.dumps(key, ensure_ascii=False) + ": "
        entry = head + self._render(piece, indent, multiline)
        gap = self.newline + indent if multiline else " "
        if not container.items and self.text[container.start + 1 : container.end - 1].strip():
            # only comments inside (JSONC): the entry goes first, the comments stay after it
            self._splice(container.start + 1, container.start + 1, gap.lstrip(" ") + entry)
        elif not container.items:
            tail = self.newline + outer if multiline else ""
            self._splice(container.start + 1, container.end - 1, gap.lstrip(" ") + entry + tail)
        elif index >= len(container.items) and multiline and self._line_end(container.items[-1][2].end):
            # JSONC: after the last member's line (its comma and comment stay on it), in the file's comma style
            end = container.items[-1][2].end
            trailing = self.text.startswith(",", _skip_inline(self.text, end))  # blanked in the plain text
            if not trailing:
                self._splice(end, end, ",")
            eol = self._line_end(end)
            assert eol is not None
            self._splice(eol, eol, self.newline + indent + entry + ("," if trailing else ""))
        elif index >= len(container.items):
            end = container.items[-1][2].end
            self._splice(end, end, "," + gap + entry)
        else:
            at = container.items[index][1]
            self._splice(at, at, entry + "," + gap)

    def _remove(self, container: _Node, index: int) -> None:
        items = container.items
        own = self._own_line(items[index][1], items[index][2].end) if self.jsonc else None
        if own is not None:
            self._splice(*own, "")  # JSONC: the member's own line, so the comments around it stay
        elif (
            len(items) == 1
            and self._plain()[container.start : container.end] != self.text[container.start : container.end]
        ):
            # comments inside (JSONC): only the member goes, and a trailing comma after it
            end = _skip(self._plain(), items[0][2].end)
            self._splice(items[0][1], end + 1 if self.text.startswith(",", end) else items[0][2].end, "")
        elif len(items) == 1:
            self._splice(container.start + 1, container.end - 1, "")
        elif index == 0:
            self._splice(items[0][1], items[1][1], "")
        else:
            self._splice(items[index - 1][2].end, items[index][2].end, "")

    def _line_end(self, at: int) -> int | None:
        """Where the line of `at` ends (before its line break), when the rest of it after `at` is at most a comma
        and a `//` comment (JSONC only); None otherwise."""
        if not self.jsonc:
            return None
        found = re.compile(r"[ \t]*,?[ \t]*(?://[^\r\n]*)?(?=\r?\n|$)").match(self.text, at)
        return found.end() if found else None

    def _own_line(self, start: int, end: int) -> tuple[int, int] | None:
        """The span of the lines a member from `start` to `end` fills alone (with the comma after it and the
        line break), or None when something else shares them."""
        line = self.text.rfind("\n", 0, start) + 1
        if self.text[line:start].strip():
            return None
        after = _skip_inline(self.text, end)
        if self.text.startswith(",", after):
            after += 1
        rest = re.compile(r"[ \t]*(?:\r?\n|$)").match(self.text, after)
        return (line, rest.end()) if rest else None

    def _splice(self, start: int, end: int, new: str) -> None:
        self.text = self.text[:start] + new + self.text[end:]

    def set_member(self, path: tuple[str | int, ...], key: str, value: Any) -> None:
        """Make `path` (creating the objects on the way) hold `key: value`, replacing a value it had."""
        for depth in range(len(path) + 1):
            node = self._node(path[:depth])
            if node is None or node.kind != "object":
                raise ValueError(f"{path[:depth] or 'the document'} is not an object")
            rest = path[depth:]
            if not rest:
                old = node.member(key)
                if old is None:
                    self._insert(node, len(node.items), value, key)
                else:
                    at = next(i for i, (k, _, n) in enumerate(node.items) if n is old)
                    self._remove(node, at)
                    self._insert(self._node(path) or node, at, value, key)
                return
            if node.member(str(rest[0])) is None:
                nested: Any = {key: value}
                for name in reversed(rest[1:]):
                    nested = {name: nested}
                self._insert(node, len(node.items), nested, str(rest[0]))
                return

    def delete_member(self, path: tuple[str | int, ...], key: str) -> None:
        node = self._node(path)
        if node is None or node.kind != "object":
            return
        at = [i for i, (k, _, _) in enumerate(node.items) if k == key]
        for i in reversed(at):
            self._remove(self._node(path) or node, i)

    def insert_element(self, path: tuple[str | int, ...], index: int, value: Any) -> None:
        node = self._node(path)
        if node is None or node.kind != "array":
            raise ValueError(f"{path} is not an array")
        self._insert(node, index, value, None)

    def delete_element(self, path: tuple[str | int, ...], index: int) -> None:
        node = self._node(path)
        if node is None or node.kind != "array":
            raise ValueError(f"{path} is not an array")
        self._remove(node, index)


def edited(text: str, old: Any, new: Any, *, jsonc: bool = False) -> str:
    """`text` (which parses to `old`) changed to hold `new` by the fewest splices: members added, removed or
    replaced, array elements inserted or deleted; what is equal keeps its bytes (and, in JSONC, its comments)."""
    doc = JsonText(text, jsonc=jsonc)
    _apply(doc, (), old, new)
    return doc.text


def _apply(doc: JsonText, path: tuple[str | int, ...], old: Any, new: Any) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [k for k in old if k not in new]:
            doc.delete_member(path, key)
        for key, value in new.items():
            if key not in old:
                doc.set_member(path, key, value)
            elif old[key] != value:
                if isinstance(value, dict | list) and type(value) is type(old[key]):
                    _apply(doc, (*path, key), old[key], value)
                else:
                    doc.set_member(path, key, value)
        return
    if isinstance(old, list) and isinstance(new, list):
        a = [json.dumps(v, sort_keys=True) for v in old]
        b = [json.dumps(v, sort_keys=True) for v in new]
        # from the end, so the indices of the edits still to make hold
        for tag, i1, i2, j1, j2 in reversed(
            difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        ):
            if tag == "equal":
                continue
            for i in reversed(range(i1, i2)):
                doc.delete_element(path, i)
            for offset, j in enumerate(range(j1, j2)):
                doc.insert_element(path, i1 + offset, new[j])
        return
    raise ValueError("only objects and arrays can be edited in place")
