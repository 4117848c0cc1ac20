"""YAML text for the CI outputs, written without a YAML library (imagectl does not depend on one).

The one quoting rule of every CI output: a scalar is a JSON string, number or boolean (JSON's syntax is YAML's
double-quoted flow syntax), so no value, whatever it holds, can end a line, open a mapping or be read as another
type (``"yes"``, ``"1.0"``, ``"null"`` stay strings).  A comment is one line (:func:`yaml_comment`).  Multi-line
strings, which only imagectl's own step scripts are, are literal blocks; nothing else is written plain except keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Union

YamlValue = Union[str, int, bool, None, Sequence["YamlValue"], Mapping[str, "YamlValue"]]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
# YAML 1.1 reads these plain words as booleans or null (a GitHub workflow's bare `on`): such a key is quoted
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def yaml_string(text: str) -> str:
    """``text`` as a double-quoted YAML scalar (JSON string syntax is valid YAML)."""
    return json.dumps(text)


def yaml_comment(text: str) -> str:
    """``text`` as one YAML comment line: every run of whitespace (line breaks too) made one space."""
    return "# " + " ".join(text.split())


def yaml_lines(value: YamlValue, indent: int = 0) -> list[str]:
    """``value`` (mappings with string keys, lists, strings, integers, booleans, None) as block YAML lines,
    ``indent`` spaces in; mapping order is kept, so the same value always gives the same text."""
    pad = " " * indent
    if isinstance(value, Mapping):
        if not value:
            return [pad + "{}"]
        lines: list[str] = []
        for key, item in value.items():
            lines += _entry(pad + _key(key) + ":", item, indent)
        return lines
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            return [pad + "[]"]
        lines = []
        for item in value:
            if _is_collection(item) and item:  # "- key: value" or "- - item", the rest below it
                nested = yaml_lines(item, indent + 2)
                lines += [pad + "- " + nested[0][indent + 2:], *nested[1:]]
            else:
                lines += _entry(pad + "-", item, indent)
        return lines
    return [pad + _scalar(value)]


def yaml_document(value: YamlValue) -> str:
    """One YAML document of ``value``, ending in a newline."""
    return "\n".join(yaml_lines(value)) + "\n"


def _entry(head: str, item: YamlValue, indent: int) -> list[str]:
    """``head`` (``key:`` or ``-``) and its value: on the same line for a scalar or an empty collection, a
    literal block for a multi-line string that one keeps as written, else the nested lines below."""
    block = _block(item, indent + 2) if isinstance(item, str) and "\n" in item else None
    if block is not None:
        return [f"{head} {'|' if str(item).endswith(chr(10)) else '|-'}", *block]
    if _is_collection(item) and item:
        return [head, *yaml_lines(item, indent + 2)]
    return [f"{head} {yaml_lines(item)[0]}"]


def _block(text: str, indent: int) -> list[str] | None:
    """The lines of a literal block scalar of ``text``, ``indent`` spaces in (empty lines empty), or None where a
    literal block would not keep it as written (a first line that starts with a blank, trailing blanks, a tab, a
    carriage return, a final empty line, a character YAML escapes): then it is a JSON string like any other."""
    lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
    if lines[0] != lines[0].lstrip() or not lines[-1] or not text.isascii():
        return None
    if any(line != line.rstrip() or not line.isprintable() for line in lines):
        return None
    return [" " * indent + line if line else "" for line in lines]


def _is_collection(value: YamlValue) -> bool:
    return isinstance(value, Mapping) or (isinstance(value, Sequence) and not isinstance(value, str))


def _key(key: str) -> str:
    return key if _PLAIN_KEY.fullmatch(key) and key.lower() not in _RESERVED else yaml_string(key)


def _scalar(value: YamlValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return yaml_string(value)
    raise TypeError(f"not a YAML scalar: {type(value).__name__}")
