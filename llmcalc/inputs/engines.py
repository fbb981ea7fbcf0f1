"""Serving engines by name (`presets/engines/<name>.yaml`, data with the source of every figure) or a user's engine
file, read with the safe loader."""

from __future__ import annotations

import difflib
from pathlib import Path

from llmcalc.errors import UserError, clip
from llmcalc.inputs.files import PRESETS, named_folder, read_yaml, validated
from llmcalc.model.engine import Engine

ENGINE_DIR = PRESETS / "engines"
DEFAULT_ENGINE = "vllm"
"""The engine a command times when none is named: the most used open serving engine."""


def engine_names() -> list[str]:
    return sorted(p.stem for p in ENGINE_DIR.glob("*.yaml"))


def load_engine(name: str | None) -> Engine:
    """An engine preset by name (None: DEFAULT_ENGINE), or a user's engine YAML by path."""
    name = DEFAULT_ENGINE if name is None else name
    if name.endswith((".yaml", ".yml", ".json")):
        path, where = Path(name), f"engine file {name}"
    else:
        names = engine_names()
        if not name.strip():
            raise UserError(f"`engine`: the name is empty; give one of {', '.join(names)}, or an engine YAML file")
        if name not in names and named_folder(name):
            raise UserError(f"`engine`: {name} is a folder; give an engine's name or an engine YAML file")
        if name not in names:
            near = difflib.get_close_matches(name.lower(), names, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise UserError(f"`engine`: unknown engine {clip(repr(name))}; {hint}use one of {', '.join(names)}, or an "
                            "engine YAML file (presets/engines/vllm.yaml shows the fields)")
        path, where = ENGINE_DIR / f"{name}.yaml", f"engine {name}"
    return validated(Engine, read_yaml(path, "engine file"), where, "presets/engines/vllm.yaml")


COMMANDS_DIR = ENGINE_DIR / "commands"
"""presets/engines/commands/<engine>.yaml: the launch and benchmark commands of the engines `plan --emit`
writes for, each flag read in the engine's argument parser."""


def emit_engines() -> list[str]:
    """The engines `llmcalc plan --emit` can write commands for."""
    return sorted(p.stem for p in COMMANDS_DIR.glob("*.yaml"))


def load_engine_commands(name: str):
    """The launch and benchmark commands of engine `name` (presets/engines/commands/<name>.yaml); an engine without
    them is a UserError naming `emit`."""
    from llmcalc.model.engine_commands import EngineCommands

    names = emit_engines()
    if name not in names:
        raise UserError(f"`emit`: no commands for engine {name!r}; give one of {', '.join(names)}")
    path = COMMANDS_DIR / f"{name}.yaml"
    return validated(EngineCommands, read_yaml(path, "engine commands file"), f"engine commands {name}",
                     "presets/engines/commands/vllm.yaml")
