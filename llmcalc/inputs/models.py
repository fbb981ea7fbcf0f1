"""The model a caller names, turned into a ModelSpec in one place (`load_model`): a preset name, a spec file, a
Hugging Face config.json or its folder, or a ModelSpec already built. The command line names it with one of
--preset, --config, --hf-config (a `ModelRef`); the Python API with one `model=` value."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from llmcalc.errors import UserError

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
"""A spec file's endings (a Hugging Face config is a folder, or a file named config.json)."""


@dataclass(frozen=True)
class ModelRef:
    """A model named the way the command line names it: exactly one of a preset, a spec file (`config`) or a
    Hugging Face config.json or its folder (`hf_config`)."""

    preset: str | None = None
    config: str | os.PathLike | None = None
    hf_config: str | os.PathLike | None = None


def load_model(model):
    """The ModelSpec `model` names:

    - a ModelSpec: itself;
    - a ModelRef: the one model it names;
    - a path (str or os.PathLike) to an existing folder, or to a file named config.json: a Hugging Face config;
    - a path to another existing file, or any name ending .yaml, .yml or .json: a spec file;
    - any other str: a preset name (an unknown one gets the nearest names).

    A Hugging Face Hub id (ORG/NAME) is not read; it would be recognised here, before the preset lookup."""
    from llmcalc.model.spec import ModelSpec

    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, ModelRef):
        return _load_ref(model)
    if isinstance(model, os.PathLike) or (isinstance(model, str) and _is_path(model)):
        path = Path(model)
        if path.is_dir() or path.name == "config.json":
            from llmcalc.inputs.hf import load_hf_config

            return load_hf_config(path)
        from llmcalc.inputs.presets import load_spec_file

        return load_spec_file(path)
    # A Hugging Face Hub id (ORG/NAME, not a file here) is to be recognised at this point, before the preset lookup.
    if isinstance(model, str):
        from llmcalc.inputs.presets import load_preset

        return load_preset(model)
    raise UserError(f"`model`: {type(model).__name__} is not a model; give a preset name, the path of a spec YAML "
                    "or of a Hugging Face config.json (or its folder), or a ModelSpec")


def _is_path(text: str) -> bool:
    """Whether a str names a file or folder rather than a preset: it exists, or ends as a spec file does."""
    return text.lower().endswith(SPEC_SUFFIXES) or os.path.exists(text)


def _load_ref(ref: ModelRef):
    given = [x for x in (ref.preset, ref.config, ref.hf_config) if x is not None]
    if len(given) != 1:
        raise UserError("give exactly one model: `preset` NAME, `config` FILE.yaml or `hf_config` PATH")
    if ref.preset is not None:
        from llmcalc.inputs.presets import load_preset

        return load_preset(ref.preset)
    if ref.config is not None:
        from llmcalc.inputs.presets import load_spec_file

        return load_spec_file(ref.config)
    from llmcalc.inputs.hf import load_hf_config

    return load_hf_config(ref.hf_config)
