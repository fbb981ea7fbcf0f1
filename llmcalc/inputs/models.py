"""The model a caller names, turned into a ModelSpec in one place (`load_model`): a preset name, a spec file, a
Hugging Face config.json or its folder, a Hugging Face Hub id, or a ModelSpec already built. The command line names
it with one of --preset, --config, --hf-config, --hf-model (a `ModelRef`); the Python API with one `model=` value.

A best-effort import (`hf_generic`: an unknown model_type read as a llama-style decoder) is recorded as it is
loaded; `best_effort_notes()` hands the records over once (the command line adds them to the report's notes)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from llmcalc.errors import UserError

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
"""A spec file's endings (a Hugging Face config is a folder, or a file named config.json)."""


@dataclass(frozen=True)
class ModelRef:
    """A model named the way the command line names it: exactly one of a preset, a spec file (`config`), a
    Hugging Face config.json or its folder (`hf_config`) or a Hub id ORG/NAME[@REVISION] (`hf_model`); `hf_generic`
    reads the last two's unknown model_type as a llama-style decoder, best effort."""

    preset: str | None = None
    config: str | os.PathLike | None = None
    hf_config: str | os.PathLike | None = None
    hf_model: str | None = None
    hf_generic: bool = False


def load_model(model):
    """The ModelSpec `model` names:

    - a ModelSpec: itself;
    - a ModelRef: the one model it names;
    - a path (str or os.PathLike) to an existing folder, or to a file named config.json: a Hugging Face config;
    - a path to another existing file, or any name ending .yaml, .yml or .json: a spec file;
    - any other str of the form ORG/NAME[@REVISION]: a Hugging Face Hub id (llmcalc/inputs/hub.py);
    - any other str: a preset name (an unknown one gets the nearest names)."""
    from llmcalc.model.spec import ModelSpec

    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, ModelRef):
        return _load_ref(model)
    ref = as_ref(model)
    if ref.hf_config is not None:
        from llmcalc.inputs.hf import load_hf_config

        return load_hf_config(ref.hf_config)
    if ref.config is not None:
        from llmcalc.inputs.presets import load_spec_file

        return load_spec_file(ref.config)
    if ref.hf_model is not None:
        return load_hub_model(ref.hf_model)
    from llmcalc.inputs.presets import load_preset

    return load_preset(ref.preset)


def as_ref(model) -> ModelRef:
    """The ModelRef a str or path names, read as load_model reads it: a folder or a file named config.json is a
    Hugging Face config, another path a spec file, ORG/NAME[@REVISION] a Hub id, any other str a preset name."""
    if isinstance(model, os.PathLike) or (isinstance(model, str) and _is_path(model)):
        from llmcalc.inputs.files import is_folder

        path = Path(model)
        if is_folder(path) or path.name == "config.json":
            return ModelRef(hf_config=path)
        return ModelRef(config=path)
    if isinstance(model, str) and HUB_ID.fullmatch(model.strip()):  # ORG/NAME[@REVISION], not a file here
        return ModelRef(hf_model=model)
    if isinstance(model, str):
        return ModelRef(preset=model)
    raise UserError(f"`model`: {type(model).__name__} is not a model; give a preset name, the path of a spec YAML "
                    "or of a Hugging Face config.json (or its folder), a Hub id ORG/NAME, or a ModelSpec")


def _is_path(text: str) -> bool:
    """Whether a str names a file or folder rather than a preset: it exists, or ends as a spec file does."""
    return text.lower().endswith(SPEC_SUFFIXES) or os.path.exists(text)


def _load_ref(ref: ModelRef):
    given = [x for x in (ref.preset, ref.config, ref.hf_config, ref.hf_model) if x is not None]
    if len(given) != 1:
        raise UserError("give exactly one model: `preset` NAME, `config` FILE.yaml, `hf_config` PATH or `hf_model` "
                        "ORG/NAME")
    if ref.hf_generic and ref.hf_config is None and ref.hf_model is None:
        raise UserError("`hf_generic`: it reads a Hugging Face config; give `hf_config` PATH or `hf_model` ORG/NAME")
    if ref.preset is not None:
        from llmcalc.inputs.presets import load_preset

        return load_preset(ref.preset)
    given = _GIVEN.get()
    if ref.config is not None:
        from llmcalc.inputs.presets import load_spec_file

        return load_spec_file(ref.config, given.get(str(ref.config)))
    if ref.hf_model is not None:
        return load_hub_model(ref.hf_model, ref.hf_generic)
    from llmcalc.inputs.hf import load_hf_config

    return _noted(load_hf_config(ref.hf_config, generic=ref.hf_generic, text=given.get(str(ref.hf_config))))


_GIVEN: ContextVar[dict[str, str]] = ContextVar("given_files", default={})  # noqa: B039 - never mutated


@contextmanager
def given_files(files: dict[str, str]) -> Iterator[None]:
    """Within the block, a spec file or config.json named (as `config` or `hf_config`) by one of `files`' names
    is read from its text there, not from disk: a front end holding a pasted file writes nothing, and no other
    name is looked up as a folder (disk_hidden)."""
    from llmcalc.inputs.files import disk_hidden

    token = _GIVEN.set(dict(files))
    try:
        with disk_hidden():
            yield
    finally:
        _GIVEN.reset(token)


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@\S+)?")
"""What a `model=` text must look like to be taken for a Hub id (hub.py checks it fully)."""


def load_hub_model(ref: str, generic: bool = False):
    """The ModelSpec of a Hub id (llmcalc/inputs/hub.py fetches its files), its files read as a local folder; a
    problem in them is named with the id, and the files by their names in the repository."""
    from llmcalc.inputs.hf import load_hf_config
    from llmcalc.inputs.hub import fetch

    folder, name, source = fetch(ref)
    try:
        return _noted(load_hf_config(folder, name=name, source=source, generic=generic, what="the repository's"))
    except UserError as e:
        raise UserError(f"`hf_model` {ref}: {str(e).replace(f'{folder}{os.sep}', '')}") from None


_BEST_EFFORT: ContextVar[tuple[str, ...]] = ContextVar("best_effort_imports", default=())


def _noted(spec):
    """`spec`, its best-effort import (if it is one) recorded for best_effort_notes."""
    if spec.best_effort is not None:
        _BEST_EFFORT.set((*_BEST_EFFORT.get(), f"{spec.name}: best-effort import (`hf_generic`), assumed: "
                          + "; ".join(spec.best_effort)))
    return spec


def best_effort_notes() -> tuple[str, ...]:
    """A note per best-effort import loaded since the last call, and none again after it."""
    notes = _BEST_EFFORT.get()
    _BEST_EFFORT.set(())
    return notes
