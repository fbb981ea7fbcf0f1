"""GPU presets (`presets/gpus/*.yaml`) and user GPU files, read with the safe loader."""

from __future__ import annotations

import difflib
from pathlib import Path

from llmcalc.errors import UserError, clip
from llmcalc.inputs.files import PRESETS, named_folder, read_yaml, validated
from llmcalc.model.gpu import GPU

GPU_DIR = PRESETS / "gpus"
def preset_for_device(device_name: str) -> str | None:
    """The GPU preset a device name (torch.cuda.get_device_name()) names: the preset with the longest of its
    `device_names` found in it; None if none."""
    hits = [(len(word), name) for name in gpu_names() for word in load_gpu(name).device_names
            if word.lower() in device_name.lower()]
    return max(hits)[1] if hits else None


def gpu_names() -> list[str]:
    return sorted(p.stem for p in GPU_DIR.glob("*.yaml"))


def load_gpu(name: str) -> GPU:
    """A GPU preset by name, or a user's GPU YAML by path (anything ending .yaml/.yml/.json)."""
    if name.endswith((".yaml", ".yml", ".json")):
        path, where = Path(name), f"gpu file {name}"
    else:
        names = gpu_names()
        if not name.strip():
            raise UserError("`gpu`: the name is empty; give a GPU preset's name (`llmcalc gpus` lists them) or a GPU "
                            "YAML file")
        if name not in names and named_folder(name):
            raise UserError(f"`gpu`: {name} is a folder; give a GPU preset's name or a GPU YAML file")
        if name not in names:
            near = [n for n in names if n.startswith(name.lower())] or difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
            raise UserError(f"`gpu`: unknown GPU {clip(repr(name))}; {hint}valid GPUs: {', '.join(names)} (or a YAML "
                            "file)")
        path, where = GPU_DIR / f"{name}.yaml", f"gpu {name}"
    return validated(GPU, read_yaml(path, "gpu file"), where, "presets/gpus/h100-sxm.yaml")
