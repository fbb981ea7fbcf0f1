"""`llmcalc calibrate`: the plan of a calibration (llmcalc/costs/calibration.py), its run by the torch harness
(llmcalc/reference/calibrate.py, imported only here and only when it runs) and the fit of its timings."""

from __future__ import annotations

from collections.abc import Callable

from llmcalc.costs.calibration import Plan, fit
from llmcalc.errors import UserError
from llmcalc.model.gpu import GPU
from llmcalc.model.time_model import TimeModel
from llmcalc.views.torch_needed import require_torch as torch_needed


def require_torch(device: str):
    """torch, when it is installed and `device` is there; else a one-line error."""
    return torch_needed("calibrate", device, "run it on a GPU machine, or `device` cpu for a smoke run")


def detected_gpu(device: str) -> str:
    """The GPU preset of this machine's GPU (named like torch.cuda.get_device_name()); h100-sxm on cpu, whose
    peaks a smoke run divides by."""
    if device != "cuda":
        return "h100-sxm"
    from llmcalc.inputs.gpus import preset_for_device

    name = require_torch(device).cuda.get_device_name()
    preset = preset_for_device(name)
    if preset is None:
        raise UserError(f"`gpu`: no GPU preset matches {name!r}; give `gpu` NAME (see `llmcalc gpus`) or a GPU "
                        "YAML file")
    return preset


def calibrate(runs: Plan, gpu: GPU, progress: Callable[[str], None] = lambda step: None
              ) -> tuple[TimeModel, list[str], dict]:
    """Measure `runs` on this machine and fit them on `gpu`'s datasheet: the profile, notes on the fit, and the
    raw timings. Figures no run measures are kept from `gpu`'s bundled profile (else the roofline)."""
    from llmcalc.inputs.time_models import base_profile
    from llmcalc.reference.calibrate import measure

    require_torch(runs.device)
    raw = measure(runs, progress)
    tm, notes = fit(raw, gpu, *base_profile(gpu))
    return tm, notes, raw
