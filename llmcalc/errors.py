"""User-facing errors: one line that names the field and the fix; the CLI exits 2 on them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

FIELD = re.compile(r"`([a-z][a-z0-9_]*)`")
"""A field the caller set, as an error names it: `kv_dtype`. The CLI writes its flag there (--kv-dtype)."""


class UserError(Exception):
    """Bad input from the user. The message is one line, names the field in the domain's words and says how
    to fix it; a field the caller passed is marked `name` (FIELD), for a front end to write its own way."""

    def worded(self, word: Callable[[str], str | None]) -> str:
        """The message with each marked field written word(name) (None: the bare name)."""
        return FIELD.sub(lambda m: word(m[1]) or m[1], str(self))


class Unread(UserError):
    """An input given where nothing reads it (an expert skew without expert parallelism, a training option of an
    inference estimate): refused rather than dropped. `field` names it, so a caller that supplied it as a shared
    default (a scenario file's `defaults`) can leave it out there instead."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def clip(text: str, n: int = 40) -> str:
    """`text`, or its first n characters and an ellipsis: a value an error echoes is never cut silently."""
    return text if len(text) <= n else text[:n] + "…"


def plain(text: str) -> str:
    """Text with the field marks dropped: `tp` 4 → tp 4."""
    return FIELD.sub(lambda m: m[1], text)


_FIXES = {
    "missing": "add it",
    "extra_forbidden": "remove it (check the spelling)",
    "int_type": "give a whole number",
    "int_parsing": "give a whole number",
    "int_from_float": "give a whole number",
    "bool_type": "give true or false",
    "bool_parsing": "give true or false",
    "string_type": "give a string",
    "finite_number": "give a finite number",
    "float_type": "give a number",
    "float_parsing": "give a number",
    "number_type": "give a number",
    "greater_than": "give a positive number",
    "greater_than_equal": "give 0 or more",
    "less_than_equal": "give a smaller number",
    "literal_error": "use one of the listed values",
    "union_tag_invalid": "use one of the listed kinds",
    "union_tag_not_found": "add a `kind` field",
    "list_type": "give a list",
    "too_short": "give at least one entry",
    "model_type": "give a mapping of fields",
    "model_attributes_type": "give a mapping of fields",
    "dict_type": "give a mapping of fields",
}


def _path(err: dict, marked: bool) -> str:
    path = ".".join(str(p) for p in err["loc"])
    return f"`{path}`" if marked and path else path


def validation_message(exc: Any, where: str | None = None) -> str:
    """One line for a pydantic ValidationError: `where: field: problem; fix` (one error: an unknown field
    first, with the missing field it may misspell; every missing field at once; else the first). Without `where` (a model built from the
    caller's options, not read from a file) the field is marked (FIELD), for a front end to write its flag."""
    import difflib

    marked, lead = where is None, f"{where}: " if where else ""
    errors = exc.errors(include_url=False)
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        err, parent = unknown[0], unknown[0]["loc"][:-1]
        missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and e["loc"][:-1] == parent]
        near = difflib.get_close_matches(str(err["loc"][-1]), missing, n=1)
        if near:
            return f"{lead}{_path(err, marked)}: unknown field; did you mean {near[0]}? Rename it"
        return f"{lead}{_path(err, marked)}: unknown field; remove it (check the spelling)"
    err = errors[0]
    missing = [_path(e, marked) for e in errors if e["type"] == "missing"]
    if err["type"] == "missing" and len(missing) > 1:  # every missing field at once, not one per run
        rest = exc.error_count() - len(missing)
        return (f"{lead}missing fields {', '.join(missing)}; add them" + (f" (+{rest} more)" if rest else "")
                + (" (the bundled files in presets/ show each)" if where else ""))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "value_error":  # our validators already name the field and the fix (a file's: plainly)
        return f"{lead}{plain(msg) if where else msg}"
    if err["type"] == "number_type":  # a model's own check of its float fields: the field in its context
        err = err | {"loc": (*err["loc"], err["ctx"]["field"])}
    loc = _path(err, marked)
    extra = f" (got {err['input']!r})" if err["type"] not in ("missing", "model_type", "number_type") and _short(
        err) else ""
    fix = _FIXES.get(err["type"], "correct it")
    bound = (err.get("ctx") or {}).get("ge")
    if err["type"] == "greater_than_equal" and isinstance(bound, (int, float)):
        fix = f"give a positive number, at least {bound:g}" if 0 < bound < 1 else f"give {bound:g} or more"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{lead}{loc or 'spec'}: {msg}{extra}; {fix}{more}"


def _short(err: dict) -> bool:
    return isinstance(err.get("input"), (int, float, str, bool)) and len(repr(err["input"])) < 40
