"""Model presets (YAML beside this file) and user spec files, read with safe loaders only."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from ..errors import UserError, validation_message

HERE = Path(__file__).parent
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def preset_names() -> list[str]:
    """Every preset, sorted."""
    return sorted(p.stem for p in HERE.glob("*.yaml"))


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML (or JSON) file with the safe loader; errors become one-line UserErrors."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path}: is a folder; give a YAML file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{what} {path}: cannot read it ({e.__class__.__name__}); give a readable UTF-8 file") from None
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or "not valid YAML"
        if "constructor" in problem:  # e.g. !!python/object: the safe loader builds no objects
            raise UserError(f"{what} {path}: YAML tag refused{at} ({problem}); write plain values, no tags") from None
        raise UserError(f"{what} {path}: malformed YAML{at}: {problem}; fix the syntax") from None


def validated(cls, data: Any, where: str, example: str):
    """Validate a mapping into the Pydantic model `cls`, naming the field and the fix on error."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of fields, got {type(data).__name__}; see {example}")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, where)) from None


def spec_from_data(data: Any, where: str):
    """Validate a mapping into a ModelSpec."""
    from ..spec import ModelSpec

    return validated(ModelSpec, data, where, "presets/*.yaml")


def load_preset(name: str):
    """The preset called exactly `name`; an unknown name lists the valid ones and the nearest."""
    names = preset_names()
    if name not in names:
        near = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise UserError(f"unknown preset {name!r}; {hint}valid presets: {', '.join(names)}")
    return spec_from_data(read_yaml(HERE / f"{name}.yaml", "preset"), f"preset {name}")


def load_spec_file(path: str | Path):
    """A user-written spec (YAML or JSON), validated like a preset."""
    p = Path(path)
    return spec_from_data(read_yaml(p, "config"), str(p))
