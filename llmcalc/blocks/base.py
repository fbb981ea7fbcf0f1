"""Shared base for every spec and block: frozen, strict Pydantic models."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PosInt = Annotated[int, Field(gt=0, strict=True)]
"""A positive int; bools and floats are refused, never coerced."""
NonNegInt = Annotated[int, Field(ge=0, strict=True)]

Parts = dict[str, int]
"""Named parameter counts of one block, e.g. {"q": 16777216, "k": ...}."""


class Frozen(BaseModel):
    """Immutable, rejects unknown fields, validates defaults too."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, defer_build=True)
