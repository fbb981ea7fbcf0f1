"""Typed results: the base every report derives from, and the placement of a model on GPUs that
latency and fit share. Reports are plain data: costs return them, renderers read them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Report(BaseModel):
    """Base of every report: frozen; a field's docstring becomes its description in the JSON Schema."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, use_attribute_docstrings=True)


class Placement(Report):
    """A model on `gpus` GPUs of one kind, laid out as tp · pp · dp (ep within tp · dp)."""

    model: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int
