"""Checking an MCP call's arguments against the tool's input schema, with refusals an agent can act on.

Types are strict ("true" is not true, "5" is not 5), bounds come from the schema (the listing leaves them out, so a
refusal states the bound it met), unknown arguments are refused, and so is a NUL byte anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jsonschema

from kenning.errors import ArgumentError
from kenning.mcp import schemas


def check_arguments(tool: str, schema: schemas.Schema, arguments: dict[str, Any]) -> None:
    """Refuse what the published schema refuses (types are strict: "true" is not true), and NUL bytes."""
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path)
    )
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "arguments"
        raise ArgumentError(f"{tool}: {where}: {_plain(err)}", hint=_fix(err))
    for where, text in _strings(arguments):
        if "\x00" in text:
            raise ArgumentError(f"{tool}: {where} contains a NUL byte", hint="remove it")


def _plain(err: jsonschema.ValidationError) -> str:
    if err.validator == "type":
        return f"{err.instance!r} is not of type {err.validator_value!s}"
    if err.validator == "additionalProperties":
        return str(err.message).replace("Additional properties are not allowed", "unknown argument")
    if err.validator in ("maxLength", "maxItems"):
        return f"too long (at most {err.validator_value})"
    if err.validator in ("minLength", "minItems"):
        return f"too short (at least {err.validator_value})"
    return str(err.message)


def _fix(err: jsonschema.ValidationError) -> str:
    if err.validator == "type":
        return f"pass a JSON {err.validator_value}, not a string spelling of one"
    if err.validator == "additionalProperties":
        return "see the tool's input schema for the arguments it takes"
    if err.validator in ("maxLength", "maxItems", "minLength", "minItems", "minimum", "maximum"):
        return "stay within that bound"
    return "see the tool's input schema"


def _strings(value: Any, where: str = "arguments") -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, where)
            yield from _strings(item, f"{key}" if where == "arguments" else f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")
