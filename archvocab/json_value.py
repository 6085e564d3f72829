"""Free-form JSON fields of the wire schemas (a space's settings, a spec, a measurement's
details), bounded: pydantic checks their type only as `dict[str, Any]`, and a value the
server later cannot write back out would fail where it is read, not where it was sent."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

# Nesting levels below the field itself. Real values nest a few levels (a spec's per-layer
# lists); pydantic refuses to serialise past a few hundred, json.dumps past ~1000.
MAX_DEPTH = 32


def check_json_value(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """Return `value` if it nests at most `max_depth` levels and its strings are all valid
    Unicode (JSON's \\ud800 escapes decode to lone surrogates, which no UTF-8 text holds)."""
    # Paths are tuples of keys and indices, joined only for a message: a huge key is not
    # copied into the path of every value below it.
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            _check_text(*(k for k in item if isinstance(k, str)), where=where, what="key")
            children = [(v, (*where, k)) for k, v in item.items()]
        elif isinstance(item, (list, tuple)):
            children = [(v, (*where, i)) for i, v in enumerate(item)]
        else:
            if isinstance(item, str):
                _check_text(item, where=where, what="text")
            continue
        if children and len(where) >= max_depth:
            raise ValueError(f"{_path(where)}: nested deeper than {max_depth} levels")
        stack.extend(children)
    return value


def _check_text(*texts: str, where: tuple, what: str) -> None:
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{_path(where)}: {what} {text[:40]!r} is not valid Unicode (a lone surrogate)"
            ) from None


def _path(where: tuple) -> str:
    """('a', 0, 'b') -> 'a[0].b', cut to a readable length."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where).lstrip(".")
    return "value" if not text else text if len(text) <= 60 else f"{text[:60]}..."


JsonObject = Annotated[dict[str, Any], AfterValidator(check_json_value)]
