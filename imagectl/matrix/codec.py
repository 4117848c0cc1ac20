"""The matrix model as plain data and back: what the matrix cache (:mod:`.cached`) stores as JSON.

:func:`to_data` turns frozen dataclasses, mappings, tuples and paths into dicts, lists and strings;
:func:`from_data` rebuilds a value of a given type from that data, checking every value's type on the way (a value
of another shape raises TypeError), driven by the dataclasses' own annotations: adding a field to the model needs
no code here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any



def to_data(value: object) -> object:
    """``value`` as JSON-able data (dataclass -> dict of its fields, mapping -> dict, tuple -> list, Path -> str)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(key): to_data(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [to_data(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} as data")


Decoder = Callable[[object], Any]


def from_data(hint: Any, data: object) -> Any:
    """A value of type ``hint`` rebuilt from :func:`to_data`'s output; raises TypeError (or KeyError for a missing
    field) for data of another shape."""
    return decoder(hint)(data)


@lru_cache(maxsize=None)
def decoder(hint: Any) -> Decoder:
    """The function that rebuilds a value of type ``hint`` from data (made once per type)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = decoder(next(a for a in args if a is not type(None)))
        return lambda data: None if data is None else inner(data)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = decoder(args[0])
        return lambda data: tuple(item(x) for x in _list(data))
    if origin is tuple:
        items = [decoder(a) for a in args]
        return lambda data: tuple(d(x) for d, x in zip(items, _list(data), strict=True))
    if origin is Mapping or origin is dict:
        value = decoder(args[1])
        return lambda data: {key: value(x) for key, x in _dict(data).items()}
    if dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    return lambda data: _scalar(hint, data)


def _dataclass_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    fields = [(f.name, decoder(hints[f.name])) for f in dataclasses.fields(cls)]
    return lambda data: cls(**{name: field(_dict(data)[name]) for name, field in fields})


def _dict(data: object) -> dict[str, object]:
    if not isinstance(data, dict):
        raise TypeError(f"expected a mapping, found {type(data).__name__}")
    return data


def _list(data: object) -> list[object]:
    if not isinstance(data, list):
        raise TypeError(f"expected a list, found {type(data).__name__}")
    return data


def _scalar(hint: Any, data: object) -> Any:
    if hint is Path and isinstance(data, str):
        return Path(data)
    if hint in (str, bool, int) and type(data) is hint:
        return data
    raise TypeError(f"expected {getattr(hint, '__name__', hint)}, found {type(data).__name__}")
