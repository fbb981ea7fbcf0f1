"""GPU presets (`presets/gpus/*.yaml`) and user GPU files, read with the safe loader."""

from __future__ import annotations

import difflib
from pathlib import Path

from llmcalc.errors import UserError
from llmcalc.inputs.files import PRESETS, read_yaml, validated
from llmcalc.model.gpu import GPU

GPU_DIR = PRESETS / "gpus"
DEVICE_NAMES = {"H100": "h100-sxm", "H200": "h200", "A100-SXM4-80GB": "a100-80gb", "A100-SXM4-40GB": "a100-40gb",
                "L40S": "l40s", "L4": "l4", "A10G": "a10g", "RTX 4090": "rtx-4090", "RTX 3090": "rtx-3090",
                "B200": "b200", "MI300X": "mi300x", "H100 PCIe": "h100-pcie", "H800": "h800", "H20": "h20",
                "GB200": "gb200"}
"""Words in torch.cuda.get_device_name() ↦ the GPU preset they name (NVIDIA H100 80GB HBM3 → h100-sxm)."""


def preset_for_device(device_name: str) -> str | None:
    """The GPU preset a device name (torch.cuda.get_device_name()) names: its longest matching key; None if none."""
    hits = [k for k in DEVICE_NAMES if k.lower() in device_name.lower()]
    return DEVICE_NAMES[max(hits, key=len)] if hits else None


def gpu_names() -> list[str]:
    return sorted(p.stem for p in GPU_DIR.glob("*.yaml"))


def load_gpu(name: str) -> GPU:
    """A GPU preset by name, or a user's GPU YAML by path (anything ending .yaml/.yml/.json)."""
    if name.endswith((".yaml", ".yml", ".json")):
        path, where = Path(name), f"gpu file {name}"
    else:
        names = gpu_names()
        if name not in names:
            near = [n for n in names if n.startswith(name.lower())] or difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
            raise UserError(f"`gpu`: unknown GPU {name!r}; {hint}valid GPUs: {', '.join(names)} (or a YAML file)")
        path, where = GPU_DIR / f"{name}.yaml", f"gpu {name}"
    return validated(GPU, read_yaml(path, "gpu file"), where, "presets/gpus/h100-sxm.yaml")
