"""Symbols from a syntax tree: parse once, run the language's query, nest what it captured.

This module owns turning a parse into :class:`Decl` trees (a symbol, its lines, where its header ends,
its body node, the symbols inside it) and the public views of them, :func:`outline` and
:func:`enclosing`. It walks only the nodes the query captured and their near neighbours (wrappers,
comments directly above, the body's first statement), never the whole tree: the query runs in C, and a
Python step per node of a large file would cost more than parsing it.

Lines are 0-based here (tree-sitter rows) and 1-based in :class:`SymbolSpan`. The text parsed is the
source's lines joined with ``\\n``, so rows are kenning's line numbers whatever the file's line ends.
"""

from __future__ import annotations

import re

from tree_sitter import Node, QueryCursor, Tree

from kenning.chunk.source import split_lines
from kenning.chunk.syntax.languages import Grammar, Spec, grammar
from kenning.types import SYMBOL_KINDS, Symbol, SymbolKind, SymbolSpan

SIGNATURE_CHARS = 200
DOC_CHARS = 300
NAME_CHARS = 80

_KINDS: frozenset[str] = frozenset(SYMBOL_KINDS)
# Kinds whose qualified names say where they belong ("ns::Outer::method", "M.f", "A\\B"): the qualifier
# joins the scope. Values and aliases keep their text whole ("crate::x::{A, B}" is one re-export).
_QUALIFIED: frozenset[str] = frozenset({"module", "class", "interface", "impl", "function"})
_QUALIFIED_CHARS = frozenset(".:\\<[")
_QUALIFIER = re.compile(r"::|[.:\\]")
_GENERICS = re.compile(r"<[^<>]*>|\[[^\[\]]*\]")
_RECEIVER = re.compile(r"\(\s*(?:\w+\s+)?[*&]?\s*(\w+)")
# Comment markers to peel off doc lines: /** */ /// //! // # -- --[[ ]] and a leading "*" in blocks.
_MARKERS = re.compile(r"^\s*(?:/\*+!?|\*/|\*(?!/)|//[/!]?|#+!?|-{2,}(?:\[=*\[)?|\]=*\])\s?")
_CLOSERS = re.compile(r"\s*(?:\*+/|\]=*\])\s*$")  # the end of a block comment
_TAGS = re.compile(r"</?[A-Za-z][^>]*>")  # C#'s <summary>: markup, not words
# Declarations without a name of their own, called by what they are.
_ANONYMOUS = {
    "export_statement": "default",
    "init_declaration": "init",
    "deinit_declaration": "deinit",
    "subscript_declaration": "subscript",
    "secondary_constructor": "constructor",
    "companion_object": "Companion",
    "operator_declaration": "operator",
}


def end_row(node: Node) -> int:
    """The last row holding the node's text: a node that swallowed its final newline (a Rust ``///``
    comment, a C ``#include``) ends at column 0 of the next row, which it does not really occupy."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point.row else row


def _collapse(raw: bytes, limit: int) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _doc(texts: list[str]) -> str:
    """The first paragraph of a comment or docstring, markers and quotes peeled off, on one line."""
    if not texts:
        return ""
    words: list[str] = []
    for raw in texts:
        for line in raw.splitlines():
            line = _TAGS.sub("", _CLOSERS.sub("", _MARKERS.sub("", line))).strip().strip("'\"").strip()
            if not line:
                if words:
                    return _collapse(" ".join(words).encode(), DOC_CHARS)
                continue
            words.append(line)
    return _collapse(" ".join(words).encode(), DOC_CHARS)


def _name(node: Node | None) -> str:
    # C declarators nest ("*f(int)" holds "f(int)" holds "f"): the name is at the bottom of the chain.
    while node is not None and node.type.endswith("declarator"):
        inner = node.child_by_field_name("declarator")
        if inner is None and node.type == "parenthesized_declarator":
            inner = node.named_child(0)  # `(*fn)` in `typedef int (*fn)(int)`
        if inner is None:
            break
        node = inner
    if node is None or node.text is None:
        return ""
    return _collapse(node.text, NAME_CHARS)


class Decl:
    """A symbol as the chunker needs it. Lines are 0-based and inclusive.

    Only its lines and nesting are worked out up front; its name, scope, signature, doc and header
    end are read from the tree on first use. Chunking needs them only for the symbols that head a
    passage (a method inside a class that fits one passage never does), and reading them for every
    symbol cost as much as the query.
    """

    __slots__ = (
        "_detail",
        "_head",
        "_naming",
        "children",
        "comments",
        "end",
        "kind",
        "node",
        "parent",
        "span",
        "src",
        "start",
    )

    def __init__(
        self, src: _Parse, span: Node, node: Node, kind: SymbolKind, name: Node | None, parent: Decl | None
    ) -> None:
        self.src = src
        self.span = span  # the node whose extent it takes (a wrapper such as a decorated definition)
        self.node = node  # the declaration itself, whose name and body these are
        self.kind: SymbolKind = kind
        self.parent = parent
        self.children: list[Decl] = []
        self._detail: Symbol | Node | None = name  # the name node until the Symbol is built
        self._head: tuple[int, Node | None] | None = None
        self._naming: tuple[str, str] | None = None
        self.end = min(end_row(span), src.last)
        # Comments and attributes directly above belong to the symbol (and the comments are its doc).
        start = span.start_point.row
        comments: list[Node] = []
        attached = src.spec.attached
        above = span.prev_named_sibling
        while above is not None and above.type in attached and end_row(above) == start - 1:
            before = above.prev_sibling
            if (
                before is not None
                and before.type not in attached
                and end_row(before) == above.start_point.row
            ):
                break  # a comment trailing the statement before, not one heading this symbol
            if "comment" in above.type:
                comments.append(above)
            start = above.start_point.row
            above = above.prev_named_sibling
        comments.reverse()
        self.start = start
        self.comments = comments

    @property
    def symbol(self) -> Symbol:
        if not isinstance(self._detail, Symbol):
            self._detail = self.src.symbol(self, *self.naming())
        return self._detail

    @property
    def scope(self) -> str:
        """The breadcrumb, without reading the signature and doc (packed symbols need only this)."""
        return self._detail.scope if isinstance(self._detail, Symbol) else self.naming()[1]

    def naming(self) -> tuple[str, str]:
        """The name and the scope, worked out once."""
        if not isinstance(self._naming, tuple):
            self._naming = self.src.naming(self, self._detail if isinstance(self._detail, Node) else None)
        return self._naming

    @property
    def head(self) -> int:
        """The last line of the header: signature, and the docstring where the doc is in the body."""
        if self._head is None:
            self._head = self.src.head(self)
        return self._head[0]

    @property
    def body(self) -> Node | None:
        """The node whose children are the body's statements."""
        if self._head is None:
            self._head = self.src.head(self)
        return self._head[1]


class _Parse:
    """One parse's symbols, nested. Holds the bytes so names and signatures can be sliced out."""

    def __init__(self, data: bytes, spec: Spec, nrows: int) -> None:
        self.data = data
        self.spec = spec
        self.last = max(nrows - 1, 0)

    def decls(self, tree: Tree, query_cursor: QueryCursor) -> list[Decl]:
        found: dict[int, tuple[int, str, Node, Node | None]] = {}
        for index, caps in query_cursor.matches(tree.root_node):
            for key, nodes in caps.items():
                if key in _KINDS:
                    node = nodes[0]
                    known = found.get(node.id)
                    if known is None or index < known[0]:
                        names = caps.get("name")
                        found[node.id] = (index, key, node, names[0] if names else None)
        # A symbol directly inside another captured node is the same declaration seen twice
        # (`typedef struct {...} t;`): real nesting always passes through a body node.
        items = [
            (node, kind, name)
            for _, kind, node, name in found.values()
            if node.parent is None or node.parent.id not in found
        ]
        symbols = {node.id for node, _, _ in items}
        wrappers = self.spec.wrappers
        spans = [
            (self._span_node(node, symbols) if wrappers else node, node, kind, name)
            for node, kind, name in items
        ]
        spans.sort(key=lambda s: (s[0].start_byte, -s[0].end_byte))
        roots: list[Decl] = []
        stack: list[tuple[int, Decl]] = []  # (end byte, decl) of the symbols open at this point
        for span, node, kind, name_node in spans:
            while stack and stack[-1][0] < span.end_byte:
                stack.pop()
            parent = stack[-1][1] if stack else None
            # Values are kept at the top of a file or module only: a class's fields and a function's
            # locals are not what anyone looks a symbol up by.
            if kind == "value" and parent is not None and parent.kind != "module":
                continue
            decl = Decl(self, span, node, kind, name_node, parent)  # type: ignore[arg-type]
            (parent.children if parent else roots).append(decl)
            stack.append((span.end_byte, decl))
        return roots

    def _span_node(self, node: Node, symbols: set[int]) -> Node:
        """The node whose extent the symbol takes: itself, or a wrapper it is the only symbol of."""
        wrappers = self.spec.wrappers
        parent = node.parent
        while parent is not None and parent.type in wrappers:
            if sum(1 for c in parent.named_children if c.id in symbols) > 1:
                break
            node, parent = parent, parent.parent
        return node

    def _body(self, node: Node) -> Node | None:
        body = node.child_by_field_name("body")
        if body is None and self.spec.bodies:
            body = next((c for c in node.children if c.type in self.spec.bodies), None)
        return body

    def _docstring(self, body: Node | None) -> Node | None:
        """Python: the string that is the body's first statement."""
        # a body tree-sitter recovered from a syntax error can hold no statement (`def f():\n    f( a b`): an
        # unfinished edit must not stop the index run
        if body is None or not body.named_child_count or not self.spec.docstring:
            return None
        stmt = body.named_child(0)
        if stmt is not None and stmt.type == "expression_statement" and stmt.named_child_count == 1:
            string = stmt.named_child(0)
            if string is not None and string.type == "string":
                return stmt
        return None

    def head(self, d: Decl) -> tuple[int, Node | None]:
        node = d.node
        body = self._body(node)
        first = node.start_point.row
        if body is None:
            return min(first, d.end), None
        # A body that opens with a bracket starts on the header's last line; one that starts at its
        # first statement (Python, Ruby, Lua) starts on the line after it.
        row = body.start_point.row
        head = row if self.data[body.start_byte : body.start_byte + 1] in (b"{", b"(") else row - 1
        doc = self._docstring(body)
        if doc is not None:
            head = max(head, end_row(doc))
        return min(max(head, first), d.end), body

    def symbol(self, d: Decl, name: str, scope: str) -> Symbol:
        node, data = d.node, self.data
        body = d.body
        if body is None:
            sig_end = node.end_byte
        else:
            # The signature ends at the last token before the body, not at comments between them.
            before = body.prev_sibling
            while before is not None and "comment" in before.type:
                before = before.prev_sibling
            sig_end = before.end_byte if before is not None else body.start_byte
        raw_sig = data[node.start_byte : min(sig_end, node.start_byte + 4 * SIGNATURE_CHARS)]
        signature = _collapse(raw_sig, SIGNATURE_CHARS + 40).rstrip(" {:=;").rstrip()
        if len(signature) > SIGNATURE_CHARS:
            signature = signature[: SIGNATURE_CHARS - 1].rstrip() + "…"
        docstring = self._docstring(body)
        doc_nodes = [docstring.named_child(0)] if docstring is not None else d.comments
        doc = _doc([n.text.decode("utf-8", "replace").lstrip("rRbBuUfF") for n in doc_nodes if n and n.text])
        return Symbol(d.kind, name, scope, signature, doc)

    def naming(self, d: Decl, name_node: Node | None) -> tuple[str, str]:
        node, kind, spec = d.node, d.kind, self.spec
        if name_node is None and node.type in _ANONYMOUS:
            name = _ANONYMOUS[node.type]
        else:
            name = _name(name_node if name_node is not None else node.child_by_field_name("name"))
        qualifier: list[str] = []
        if kind in _QUALIFIED and _QUALIFIED_CHARS.intersection(name):
            parts = [p for p in _QUALIFIER.split(_GENERICS.sub("", name)) if p.strip()]
            if parts:
                qualifier, name = [p.strip() for p in parts[:-1]], parts[-1].strip()
        elif kind == "alias" and name.startswith("{") and name.endswith("}"):
            name = name[1:-1].strip() or name
        if spec.receiver and (receiver := node.child_by_field_name(spec.receiver)) is not None:
            match = _RECEIVER.match(receiver.text.decode("utf-8", "replace") if receiver.text else "")
            if match:
                qualifier = [match.group(1)]
        if not name:
            # Anonymous (`export default function`): the declaration's own word.
            name = _ANONYMOUS.get(d.span.type) or re.sub(
                r"_(declaration|definition|statement|item)$", "", d.span.type
            )
        return name, ".".join([*([d.parent.scope] if d.parent else []), *qualifier, name])


def parse(lines: list[str], lang: str | None) -> tuple[list[Decl], Tree, Grammar] | None:
    """The file's top-level symbols (each holding its nested ones) and the tree, or None when the
    language has no usable grammar."""
    g = grammar(lang)
    if g is None:
        return None
    data = "\n".join(lines).encode("utf-8", "replace")
    tree = g.parser().parse(data)
    cursor = QueryCursor(g.query)
    cursor.set_max_start_depth(g.spec.depth)
    return _Parse(data, g.spec, len(lines)).decls(tree, cursor), tree, g


def flatten(decls: list[Decl]) -> list[Decl]:
    """Every symbol, parents before their children, in document order."""
    out: list[Decl] = []
    todo = list(reversed(decls))
    while todo:
        d = todo.pop()
        out.append(d)
        todo.extend(reversed(d.children))
    return out


def outline(text: str, lang: str) -> list[SymbolSpan] | None:
    """Every symbol of ``text`` in document order, nested ones included, or None if ``lang`` has no
    grammar. Lines are 1-based and include the symbol's doc comments and decorators."""
    parsed = parse(split_lines(text), lang)
    if parsed is None:
        return None
    return [SymbolSpan(d.symbol, d.start + 1, d.end + 1) for d in flatten(parsed[0])]


def enclosing(spans: list[SymbolSpan], line: int) -> SymbolSpan | None:
    """The innermost symbol containing 1-based ``line``: the narrowest span, the later on a tie (a
    nested symbol comes after its parent)."""
    best: SymbolSpan | None = None
    for span in spans:
        if span.start_line <= line <= span.end_line and (
            best is None or span.end_line - span.start_line <= best.end_line - best.start_line
        ):
            best = span
    return best
