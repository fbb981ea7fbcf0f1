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
    """The preset called exactly `name`; an unknown name gets the nearest names (close in spelling, or sharing
    its start) and points at `llmcalc presets` for the whole list."""
    names = preset_names()
    if name not in names:
        near = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        near += [n for n in names if name and n.startswith(name.lower()) and n not in near][:3 - len(near)]
        hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
        raise UserError(f"`preset`: unknown preset {name!r}; {hint}`llmcalc presets` lists all {len(names)}")
    return spec_from_data(read_yaml(PRESETS / f"{name}.yaml", "preset"), f"preset {name}")


def load_spec_file(path: str | Path, text: str | None = None):
    """A user-written spec (YAML or JSON), validated like a preset; `text`: the file's text held in memory (a
    pasted file), read instead of `path`, which then only names it."""
    p = Path(path)
    return spec_from_data(read_yaml(p, "config", text), str(p))


def preset_for_model_id(model_id: str) -> str | None:
    """The preset whose `source` is the Hugging Face repository `model_id` names (openai/gpt-oss-20b →
    gpt-oss-20b, its source https://huggingface.co/openai/gpt-oss-20b/...); None if none is."""
    want = f"huggingface.co/{model_id.strip().strip('/')}/".lower()
    for name in preset_names():
        source = read_yaml(PRESETS / f"{name}.yaml", "preset").get("source", "")
        if isinstance(source, str) and (source.lower() + "/").startswith(f"https://{want}"):
            return name
    return None
