"""The CHATGATE_* environment checked against the settings model before it is read.

pydantic-settings ignores a variable whose first part names no section
(`CHATGATE_TELEGRM__TOKEN`), and stops with a traceback on a value that should be JSON
and is not (`CHATGATE_ACCESS__ADMINS='[x'`). Here each becomes one line naming the
variable: the nearest valid name for a misspelt one, what went wrong for bad JSON.
Names are read as pydantic-settings reads them: case-insensitive, `__` between levels,
any key below a table (`CHATGATE_LLM__EXTRA_HEADERS__X_TITLE`, `CHATGATE_MCP__SERVERS__GH__URL`).
"""

from __future__ import annotations

import difflib
import json
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

PREFIX = "CHATGATE_"
DELIMITER = "__"
# CHATGATE_* variables that are not settings: the config file path, execute_code's RPC
# token and the durability tests' crash points (gateway/runtime/faults.py).
NOT_SETTINGS = frozenset({"CHATGATE_CONFIG", "CHATGATE_RPC_TOKEN", "CHATGATE_CRASH_AT"})

# How each kind of value is written, for the error line.
_JSON_EXAMPLES = {"list": '["a", "b"]', "table": '{"key": "value"}', "section": '{"name": value}'}


@dataclass(frozen=True)
class EnvProblem:
    """One bad variable: `path` is the setting it would set (lowercase, as pydantic reports
    it), `line` what `chatgate` prints."""

    path: tuple[str, ...]
    line: str


def env_problems(
    model: type[BaseModel], environ: Mapping[str, str], *, check_names: bool = True
) -> list[EnvProblem]:
    """Every CHATGATE_* variable in `environ` that names no setting (when `check_names`) or
    holds text that is not the JSON its setting needs; other variables are never looked at."""
    problems: list[EnvProblem] = []
    for name, value in sorted(environ.items()):
        upper = name.upper()
        if not upper.startswith(PREFIX) or upper in NOT_SETTINGS:
            continue
        parts = tuple(upper[len(PREFIX) :].lower().split(DELIMITER))
        found, target = _resolve(model, parts)
        if found < len(parts):
            if check_names:
                hint = _nearest(model, parts, found) if any(parts) else ""
                line = f"{name}: no such setting" + (f"; did you mean {hint}?" if hint else "")
                problems.append(EnvProblem(parts, line))
            continue
        kind = _json_kind(target)
        if kind is not None and value.strip():
            try:
                json.loads(value)
            except json.JSONDecodeError as exc:
                line = f"{name}: not valid JSON ({exc.msg}); write it like {_JSON_EXAMPLES[kind]}"
                problems.append(EnvProblem(parts, line))
    return problems


def explained(model: type[BaseModel], loc: tuple[str, ...], problems: list[EnvProblem]) -> bool:
    """Whether a validation error at `loc` is the work of a variable in `problems`: the
    unknown key it names, or the plain setting it tried to give settings below
    (`CHATGATE_LLM__MODEL__X` makes llm.model a table); never a whole section."""
    if not loc:
        return False
    for problem in problems:
        if problem.path == loc:
            return True
        if problem.path[: len(loc)] == loc and _fields(_resolve(model, loc)[1]) is None:
            return True
    return False


def _resolve(model: type[BaseModel], parts: tuple[str, ...]) -> tuple[int, Any]:
    """How many leading parts name a setting (or a key of a table), and the type reached."""
    annotation: Any = model
    for depth, part in enumerate(parts):
        fields = _fields(annotation)
        if fields is not None:
            field = fields.get(part)
            if field is None:
                # A section may keep keys of its own in a table (`[profiles.coding]`).
                field = _table_values(fields.get(_free_keys(annotation)))
                if field is None or not part:
                    return depth, None
            annotation = field
            continue
        value_type = _table_values(annotation)
        if value_type is None or not part:
            return depth, None
        annotation = value_type
    return len(parts), annotation


def _nearest(model: type[BaseModel], parts: tuple[str, ...], found: int) -> str:
    """The valid name closest to the misspelt one, below the last level that matched."""
    annotation: Any = model
    base: tuple[str, ...] = ()
    for depth in range(found):  # the deepest section on the way, with the user's table keys
        _, reached = _resolve(model, parts[: depth + 1])
        if _fields(reached) is not None:
            annotation, base = reached, parts[: depth + 1]
    candidates = {_env_name((*base, *tail)) for tail in _names(annotation)}
    match = difflib.get_close_matches(_env_name(parts), candidates, n=1, cutoff=0.6)
    return match[0] if match else ""


def _names(annotation: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, field in (_fields(annotation) or {}).items():
        yield (*path, name)
        yield from _names(field, (*path, name))


def _env_name(parts: tuple[str, ...]) -> str:
    return PREFIX + DELIMITER.join(parts).upper()


def _fields(annotation: Any) -> dict[str, Any] | None:
    """The field types of a settings section (by lowercase name), or None if it is not one."""
    inner = _optional_inner(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return {name.lower(): f.annotation for name, f in inner.model_fields.items()}
    return None


def _free_keys(annotation: Any) -> str:
    """The table a section keeps unknown keys in (its `FREE_KEYS`), or ""."""
    inner = _optional_inner(annotation)
    return str(getattr(inner, "FREE_KEYS", "")).lower()


def _table_values(annotation: Any) -> Any:
    """The value type of a `dict[str, X]` setting, whose keys are free; None otherwise."""
    inner = _optional_inner(annotation)
    if inner is dict:
        return Any
    if get_origin(inner) is dict:
        args = get_args(inner)
        return args[1] if len(args) == 2 else Any
    return None


def _json_kind(annotation: Any) -> str | None:
    """ "list", "table" or "section" when pydantic-settings must read the value as JSON (and stops
    at a parse error); None for plain values and for unions (it passes those on as text,
    and validation reports them)."""
    if _is_union(annotation):
        return None
    origin = get_origin(annotation) or annotation
    if origin in (list, tuple, set, frozenset):
        return "list"
    if origin is dict:
        return "table"
    if isinstance(origin, type) and issubclass(origin, BaseModel):
        return "section"
    return None


def _optional_inner(annotation: Any) -> Any:
    if _is_union(annotation):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else None
    return annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)
