"""The language table: which grammar parses each language and which of its nodes are symbols.

This module owns everything language-specific about the syntax chunker; the rest of the package is
generic. A :class:`Spec` names the grammar wheel (imported lazily, on first use, so a missing or broken
wheel only makes that language fall back to line windows) and a tree-sitter query whose captures say
what is a symbol: the capture on the declaration is named after its kind (``@function``, ``@class``,
``@interface``, ``@value``, ``@alias``, ``@module``), and ``@name`` marks its name when the node has no
``name`` field. Where two patterns capture the same node, the earlier pattern wins: so specific
patterns (a lambda assigned at the top level is a function) come before general ones (any assignment
is a value). Values are only kept at the top of a file or module (see ``outline``).

The node types were read off trees the installed grammars print for small samples, not guessed; the
tests parse one fixture per language and check the outline against a hand-written expectation.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from functools import cache

from tree_sitter import Language, Parser, Query, QueryError

_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})


@dataclass(frozen=True, slots=True)
class Spec:
    """How to read one language's syntax tree."""

    module: str  # the grammar wheel's module, e.g. "tree_sitter_python"
    query: str  # captures: the symbol node named by its kind, and optionally its @name
    loader: str = "language"  # the module's function returning the grammar
    # Parents whose span the symbol takes when it is their only declaration: decorators, `export`,
    # `template <...>`, `type ( ... )` with one spec. Their start is where the symbol starts.
    wrappers: frozenset[str] = frozenset()
    # Siblings directly above a symbol (no blank line between) that belong to it: doc comments and,
    # where the grammar puts them outside the declaration, attributes (Rust's #[derive]).
    attached: frozenset[str] = _COMMENTS
    docstring: bool = False  # Python: a string as the body's first statement is the doc
    bodies: frozenset[str] = frozenset()  # body node types, for grammars without a `body` field
    receiver: str = ""  # Go: the field holding a method's receiver, whose type joins the scope
    # How deep in the tree a symbol may start. The query walks the tree in C, and that walk is most of
    # its cost; a depth bound prunes it. 10 levels reach a method of a class nested in a class, or a
    # function in a method, and kept 96-99.9% of the symbols of npm's JavaScript and numpy's Python at
    # two thirds of the cost; C++ and C# spend two levels on namespaces. Deeper symbols (a function in
    # a callback in a function) are chunked as part of their parent's body.
    depth: int = 10


def _spec(module: str, query: str, **kw: object) -> Spec:
    for key in ("wrappers", "attached", "bodies"):
        if isinstance(kw.get(key), str):
            kw[key] = frozenset(str(kw[key]).split())
    return Spec(module, query, **kw)  # type: ignore[arg-type]


_PYTHON = _spec(
    "tree_sitter_python",
    """(function_definition name: (identifier) @name) @function
    (class_definition name: (identifier) @name) @class
    (module (expression_statement (assignment left: (identifier) @name right: (lambda))) @function)
    (module (expression_statement (assignment left: (identifier) @name)) @value)
    (type_alias_statement left: (type (identifier) @name)) @alias""",
    wrappers="decorated_definition",
    docstring=True,
    depth=8,  # a def in a decorated method of a decorated class is at 7
)

# JavaScript's patterns, shared by TypeScript and TSX (whose grammars extend it).
_JS_QUERY = """
    (function_declaration name: (_) @name) @function
    (generator_function_declaration name: (_) @name) @function
    (method_definition name: (_) @name) @function
    (class_declaration name: (_) @name) @class
    (export_statement value: [(function_expression) (arrow_function)]) @function
    (export_statement value: (class)) @class
    (program (lexical_declaration . (variable_declarator name: (identifier) @name
        value: [(arrow_function) (function_expression)])) @function)
    (export_statement (lexical_declaration . (variable_declarator name: (identifier) @name
        value: [(arrow_function) (function_expression)])) @function)
    (program (lexical_declaration . (variable_declarator name: (_) @name)) @value)
    (program (variable_declaration . (variable_declarator name: (_) @name)) @value)
    (export_statement (lexical_declaration . (variable_declarator name: (_) @name)) @value)
    (export_statement (export_clause) @name) @alias
    (export_statement "*" @name source: (_)) @alias
"""
_TS_QUERY = (
    _JS_QUERY
    + """
    (function_signature name: (_) @name) @function
    (method_signature name: (_) @name) @function
    (abstract_method_signature name: (_) @name) @function
    (abstract_class_declaration name: (_) @name) @class
    (public_field_definition name: (_) @name value: (class)) @class
    (enum_declaration name: (_) @name) @class
    (interface_declaration name: (_) @name) @interface
    (type_alias_declaration name: (_) @name) @alias
    (internal_module name: (_) @name) @module
    (module name: (_) @name) @module
"""
)
_JS_WRAPPERS = "export_statement ambient_declaration"

_C_QUERY = """
    (function_definition declarator: (_) @name) @function
    (declaration declarator: (function_declarator) @name) @function
    (declaration declarator: (pointer_declarator declarator: (function_declarator) @name)) @function
    (struct_specifier name: (_) @name body: (_)) @class
    (union_specifier name: (_) @name body: (_)) @class
    (enum_specifier name: (_) @name body: (_)) @class
    (type_definition type: [(struct_specifier) (union_specifier) (enum_specifier)] @x
        declarator: (_) @name (#match? @x "[{]")) @class
    (type_definition declarator: (_) @name) @alias
    (preproc_function_def name: (_) @name) @function
    (preproc_def name: (_) @name) @value
    (translation_unit (declaration declarator: (_) @name) @value)
"""
_CPP_QUERY = (
    _C_QUERY
    + """
    (field_declaration declarator: (function_declarator) @name) @function
    (class_specifier name: (_) @name body: (_)) @class
    (namespace_definition name: (_) @name) @module
    (alias_declaration name: (_) @name) @alias
    (concept_definition name: (_) @name) @interface
    (declaration_list (declaration declarator: (_) @name) @value)
"""
)

SPECS: dict[str, Spec] = {
    "python": _PYTHON,
    "javascript": _spec(
        "tree_sitter_javascript",
        _JS_QUERY + "(field_definition property: (_) @name value: (class)) @class",
        wrappers=_JS_WRAPPERS,
    ),
    "typescript": _spec(
        "tree_sitter_typescript", _TS_QUERY, loader="language_typescript", wrappers=_JS_WRAPPERS
    ),
    "tsx": _spec("tree_sitter_typescript", _TS_QUERY, loader="language_tsx", wrappers=_JS_WRAPPERS),
    "go": _spec(
        "tree_sitter_go",
        """(function_declaration name: (_) @name) @function
        (method_declaration name: (_) @name) @function
        (type_spec name: (_) @name type: (struct_type)) @class
        (type_spec name: (_) @name type: (interface_type)) @interface
        (type_spec name: (_) @name) @alias
        (type_alias name: (_) @name) @alias
        (source_file (const_declaration . (const_spec name: (_) @name)) @value)
        (source_file (var_declaration [(var_spec name: (_) @name)
            (var_spec_list . (var_spec name: (_) @name))]) @value)""",
        wrappers="type_declaration",
        bodies="struct_type interface_type",
        receiver="receiver",
    ),
    "rust": _spec(
        "tree_sitter_rust",
        """(function_item name: (_) @name) @function
        (function_signature_item name: (_) @name) @function
        (macro_definition name: (_) @name) @function
        (struct_item name: (_) @name) @class
        (enum_item name: (_) @name) @class
        (union_item name: (_) @name) @class
        (impl_item type: [(type_identifier) (scoped_type_identifier)
            (generic_type type: (_) @name)] @name) @impl
        (trait_item name: (_) @name) @interface
        (mod_item name: (_) @name body: (_)) @module
        (const_item name: (_) @name) @value
        (static_item name: (_) @name) @value
        (type_item name: (_) @name) @alias
        (use_declaration (visibility_modifier) argument: (_) @name) @alias""",
        attached="line_comment block_comment attribute_item",
    ),
    "java": _spec(
        "tree_sitter_java",
        """(method_declaration name: (_) @name) @function
        (constructor_declaration name: (_) @name) @function
        (compact_constructor_declaration name: (_) @name) @function
        (class_declaration name: (_) @name) @class
        (enum_declaration name: (_) @name) @class
        (record_declaration name: (_) @name) @class
        (interface_declaration name: (_) @name) @interface
        (annotation_type_declaration name: (_) @name) @interface""",
    ),
    "c": _spec("tree_sitter_c", _C_QUERY),
    "cpp": _spec("tree_sitter_cpp", _CPP_QUERY, wrappers="template_declaration", depth=12),
    "csharp": _spec(
        "tree_sitter_c_sharp",
        """(method_declaration name: (_) @name) @function
        (constructor_declaration name: (_) @name) @function
        (destructor_declaration name: (_) @name) @function
        (operator_declaration) @function
        (property_declaration name: (_) @name) @function
        (local_function_statement name: (_) @name) @function
        (class_declaration name: (_) @name) @class
        (struct_declaration name: (_) @name) @class
        (record_declaration name: (_) @name) @class
        (enum_declaration name: (_) @name) @class
        (interface_declaration name: (_) @name) @interface
        (delegate_declaration name: (_) @name) @alias
        (namespace_declaration name: (_) @name) @module
        (file_scoped_namespace_declaration name: (_) @name) @module""",
        depth=12,
    ),
    "ruby": _spec(
        "tree_sitter_ruby",
        """(method name: (_) @name) @function
        (singleton_method name: (_) @name) @function
        (class name: (_) @name) @class
        (module name: (_) @name) @module
        (assignment left: (constant) @name) @value""",
    ),
    "php": _spec(
        "tree_sitter_php",
        """(function_definition name: (_) @name) @function
        (method_declaration name: (_) @name) @function
        (class_declaration name: (_) @name) @class
        (trait_declaration name: (_) @name) @class
        (enum_declaration name: (_) @name) @class
        (interface_declaration name: (_) @name) @interface
        (namespace_definition name: (_) @name) @module
        (program (const_declaration (const_element (name) @name)) @value)
        (program (expression_statement (assignment_expression left: (variable_name) @name)) @value)""",
        loader="language_php",
    ),
    "kotlin": _spec(
        "tree_sitter_kotlin",
        """(function_declaration name: (_) @name) @function
        (secondary_constructor) @function
        (class_declaration "interface" name: (_) @name) @interface
        (class_declaration name: (_) @name) @class
        (object_declaration name: (_) @name) @class
        (companion_object) @class
        (type_alias type: (_) @name) @alias
        (source_file (property_declaration (variable_declaration (identifier) @name)) @value)""",
        bodies="class_body enum_class_body function_body",
    ),
    "swift": _spec(
        "tree_sitter_swift",
        """(function_declaration name: (_) @name) @function
        (protocol_function_declaration name: (_) @name) @function
        (init_declaration) @function
        (deinit_declaration) @function
        (subscript_declaration) @function
        (class_declaration name: (_) @name) @class
        (protocol_declaration name: (_) @name) @interface
        (typealias_declaration name: (_) @name) @alias
        (source_file (property_declaration name: (pattern) @name) @value)""",
        bodies="computed_property",
    ),
    "scala": _spec(
        "tree_sitter_scala",
        """(function_definition name: (_) @name) @function
        (function_declaration name: (_) @name) @function
        (class_definition name: (_) @name) @class
        (object_definition name: (_) @name) @class
        (enum_definition name: (_) @name) @class
        (trait_definition name: (_) @name) @interface
        (type_definition name: (_) @name) @alias
        (package_clause name: (_) @name body: (_)) @module
        (compilation_unit (val_definition pattern: (_) @name) @value)
        (compilation_unit (var_definition pattern: (_) @name) @value)
        (compilation_unit (given_definition) @value)""",
    ),
    "shell": _spec(
        "tree_sitter_bash",
        """(function_definition name: (_) @name) @function
        (program (variable_assignment name: (_) @name) @value)
        (program (declaration_command (variable_assignment name: (_) @name)) @value)""",
    ),
    "lua": _spec(
        "tree_sitter_lua",
        """(function_declaration name: (_) @name) @function
        (chunk (variable_declaration (assignment_statement (variable_list . (_) @name)
            (expression_list . (function_definition)))) @function)
        (chunk (assignment_statement (variable_list . (_) @name)
            (expression_list . (function_definition))) @function)
        (chunk (variable_declaration (assignment_statement (variable_list . (_) @name))) @value)
        (chunk (assignment_statement (variable_list . (_) @name)) @value)""",
    ),
}


@dataclass(slots=True)
class Grammar:
    """A loaded language: the spec it came from, its grammar and its compiled query."""

    spec: Spec
    language: Language
    query: Query
    parsers: threading.local = field(default_factory=threading.local)

    def parser(self) -> Parser:
        # A parser holds parse state, so each thread gets its own should files be chunked in threads.
        parser: Parser | None = getattr(self.parsers, "parser", None)
        if parser is None:
            parser = self.parsers.parser = Parser(self.language)
        return parser


@cache
def grammar(lang: str | None) -> Grammar | None:
    """The loaded grammar for a kenning language name, or None: unknown, or the wheel is missing,
    incompatible with this tree-sitter, or its query does not compile (then the language falls back)."""
    spec = SPECS.get(lang or "")
    if spec is None:
        return None
    try:
        module = importlib.import_module(spec.module)
        language = Language(getattr(module, spec.loader)())
        return Grammar(spec, language, Query(language, spec.query))
    except (ImportError, OSError, AttributeError, ValueError, TypeError, QueryError):
        return None
