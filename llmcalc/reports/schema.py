"""Which report each command prints as JSON, and its published JSON Schema (`llmcalc schema`). Each report says
which command prints it (Report.printed_by), so this module lists no command: it reads them from every module
of this package."""

import os
import types
from functools import reduce
from importlib import import_module
from operator import or_

from llmcalc.reports.base import Report


def _printed() -> dict[str, tuple]:
    """command ↦ what its --format json prints: its list of rows first (list[Row]), then a report (or a list's
    one-item form), each from the reports that name the command; by module, then class, name."""
    here = os.path.dirname(__file__)
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") and not name.startswith("_"):
            import_module(f"{__package__}.{name[:-3]}")
    found: dict[str, list] = {}
    todo, seen = [Report], set()
    while todo:
        for cls in todo.pop().__subclasses__():
            if cls not in seen:
                seen.add(cls)
                todo.append(cls)
    for cls in sorted(seen, key=lambda c: (c.__module__, c.__qualname__)):
        command = cls.__dict__.get("printed_by")
        if command:
            found.setdefault(command, []).append(list[cls] if cls.printed_as_list else cls)
    return {c: tuple(sorted(forms, key=lambda f: not isinstance(f, types.GenericAlias))) for c, forms in found.items()}


COMMAND_REPORTS: dict[str, tuple] = _printed()
"""What each command's --format json prints (the command ↦ its forms: a report model, or list[a row model],
and the report of its one-item form where it has one: `llmcalc presets NAME`, `llmcalc gpus NAME`); in no
order of the commands' (`llmcalc schema` lists them as `llmcalc --help` does)."""


def command_schema(command: str) -> dict:
    """The JSON Schema (draft 2020-12, as Pydantic writes it) of `command`'s JSON output."""
    from pydantic import TypeAdapter

    return TypeAdapter(reduce(or_, COMMAND_REPORTS[command])).json_schema(mode="serialization")
