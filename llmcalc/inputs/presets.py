"""Model presets (`presets/*.yaml`, each with its source) and user spec files, validated into a ModelSpec."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from llmcalc.errors import UserError
from llmcalc.inputs.files import PRESETS, read_yaml, validated


def preset_names() -> list[str]:
    """Every preset, sorted."""
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def spec_from_data(data: Any, where: str):
    """Validate a mapping into a ModelSpec."""
    from llmcalc.model.spec import ModelSpec

    return validated(ModelSpec, data, where, "presets/*.yaml")


def load_preset(name: str):
    """The preset called exactly `name`; an unknown name lists the valid ones and the nearest."""
    names = preset_names()
    if name not in names:
        near = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise UserError(f"unknown preset {name!r}; {hint}valid presets: {', '.join(names)}")
    return spec_from_data(read_yaml(PRESETS / f"{name}.yaml", "preset"), f"preset {name}")


def load_spec_file(path: str | Path):
    """A user-written spec (YAML or JSON), validated like a preset."""
    p = Path(path)
    return spec_from_data(read_yaml(p, "config"), str(p))
