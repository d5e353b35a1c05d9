"""A small TOML writer for test configurations built as dicts (strings, numbers,
booleans, lists of scalars, nested tables and arrays of tables): enough for
groundwire's configuration file, so a test can rewrite the file it reloads."""

from __future__ import annotations

import json
from collections.abc import Mapping


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # JSON string escapes are valid TOML basic-string escapes.
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    raise TypeError(f"unsupported TOML value: {type(value).__name__}")


def _is_table(value: object) -> bool:
    return isinstance(value, Mapping)


def _is_table_array(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_table(v) for v in value)


def _key(name: str) -> str:
    return name if name.replace("_", "").replace("-", "").isalnum() else json.dumps(name)


def _emit(table: Mapping[str, object], prefix: str, out: list[str]) -> None:
    for name, value in table.items():
        if not _is_table(value) and not _is_table_array(value):
            out.append(f"{_key(name)} = {_scalar(value)}")
    for name, value in table.items():
        path = f"{prefix}.{_key(name)}" if prefix else _key(name)
        if _is_table(value):
            assert isinstance(value, Mapping)
            out.append(f"\n[{path}]")
            _emit(value, path, out)
        elif _is_table_array(value):
            assert isinstance(value, list)
            for item in value:
                out.append(f"\n[[{path}]]")
                _emit(item, path, out)


def dumps(document: Mapping[str, object]) -> str:
    """The TOML text of `document`."""
    out: list[str] = []
    _emit(document, "", out)
    return "\n".join(out) + "\n"
