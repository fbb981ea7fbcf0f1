"""Shared base for every spec and block: frozen, strict Pydantic models."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MAX_SIZE = 2**40
"""Sanity bound on every size and count of a model or workload (≈1.1·10^12: no vocabulary, width,
context or batch comes near it); larger ones are refused, not computed."""
PosInt = Annotated[int, Field(gt=0, le=MAX_SIZE, strict=True)]
"""A positive int up to MAX_SIZE; bools and floats are refused, never coerced."""
NonNegInt = Annotated[int, Field(ge=0, le=MAX_SIZE, strict=True)]

Parts = dict[str, int]
"""Named parameter counts of one block, e.g. {"q": 16777216, "k": ...}."""


class Frozen(BaseModel):
    """Immutable, rejects unknown fields, validates defaults too."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, defer_build=True)
