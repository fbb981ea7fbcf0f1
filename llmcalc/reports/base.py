"""Typed results: the base every report derives from, and the placement of a model on GPUs that
latency and fit share. Reports are plain data: costs return them, renderers read them."""

from functools import cache
from typing import ClassVar, Optional

from pydantic import BaseModel, ConfigDict


@cache
def _own_docstrings(cls: type) -> dict[str, str]:
    """The docstrings of the fields `cls` itself declares: a string right under `name: type`, cleaned as
    Pydantic's use_attribute_docstrings cleans it (inspect.cleandoc)."""
    import ast
    import inspect
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0].body
    return {stmt.target.id: inspect.cleandoc(doc.value.value) for stmt, doc in zip(body, body[1:])
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)}


def _field_docstrings(schema: dict, cls: type[BaseModel]) -> None:
    """JSON Schema hook: each field's docstring becomes its description, taken from the class that declares
    the field. Read from the source only when a schema is written (`llmcalc schema`): Pydantic's
    use_attribute_docstrings reads it at class creation, ~15 ms of every command's start-up."""
    properties = schema.get("properties", {})
    for name, field in cls.model_fields.items():
        if field.description is not None or name not in properties:
            continue
        owner = next((c for c in cls.__mro__ if name in c.__dict__.get("__annotations__", {})), None)
        doc = _own_docstrings(owner).get(name) if owner is not None else None
        if doc is not None:
            properties[name]["description"] = doc


class Report(BaseModel):
    """Base of every report: frozen; a field's docstring becomes its description in the JSON Schema. A NaN or
    an infinity stays a float when dumped (ser_json_inf_nan), not a silent null, so the renderers refuse it
    (llmcalc/render/formats.py: require_finite)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, json_schema_extra=_field_docstrings,
                              ser_json_inf_nan="constants")

    printed_by: ClassVar[Optional[str]] = None
    """The command whose --format json prints this report (`llmcalc schema` publishes its schema under that
    command); None for a part of a report."""
    printed_as_list: ClassVar[bool] = False
    """Whether the command prints a list of these (`llmcalc gpus`); its other report, if any, is what it prints
    for one item (`llmcalc gpus NAME`)."""


class Placement(Report):
    """A model on `gpus` GPUs of one kind, laid out as tp · pp · dp (ep within tp · dp)."""

    model: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int
