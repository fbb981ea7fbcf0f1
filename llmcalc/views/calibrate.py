"""`llmcalc calibrate`: the plan of a calibration (llmcalc/costs/calibration.py), its run by the torch harness
(llmcalc/reference/calibrate.py, imported only here and only when it runs) and the fit of its timings."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

from llmcalc.costs.calibration import Plan, fit
from llmcalc.errors import UserError, clip
from llmcalc.model.engine_profile import EngineProfile
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
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


def calibrate(runs: Plan, gpu: GPU, progress: Callable[[str], None] = lambda step: None,
              checkpoint: Callable[[dict], None] = lambda raw: None) -> tuple[TimeModel, list[str], dict]:
    """Measure `runs` on this machine and fit them on `gpu`'s datasheet: the profile, notes on the fit, and the
    raw timings (`checkpoint(raw so far)` as they come). Figures no run measures are kept from `gpu`'s bundled
    profile (else the roofline)."""
    from llmcalc.reference.calibrate import measure

    require_torch(runs.device)
    raw = measure(runs, progress, checkpoint, curve_model)
    checkpoint(raw)
    tm, notes, _ = fit_serving_profile(raw, gpu)
    return tm, notes, raw


def curve_model(name: str, layers: int | None, scale: int) -> ModelSpec:
    """The preset `name`, or its copy with the first `layers` layers (None: all) and widths ÷ `scale`: the models
    the reference engine's kernel curves run."""
    from llmcalc.inputs.presets import load_preset
    from llmcalc.views.validate import scaled_copy

    spec = load_preset(name)
    return spec if layers is None and scale == 1 else scaled_copy(spec, layers, scale)


def fit_serving_profile(raw: dict, gpu: GPU) -> tuple[TimeModel, list[str], str]:
    """The time-model profile of raw timings (a calibrate --raw file) on `gpu`, figures it lacks kept from the
    bundled profile; notes; the device that measured them."""
    from llmcalc.inputs.files import validated
    from llmcalc.inputs.raw_timings import RawTimings
    from llmcalc.inputs.time_models import base_profile

    if "gemm" not in raw:
        raise UserError("`from_raw`: these are kernel curves alone (no serving-profile timings); use `engine` "
                        "reference")
    validated(RawTimings, raw, "`from_raw`", "the raw file a calibration run wrote")
    with _as_written():
        tm, notes = fit(raw, gpu, *base_profile(gpu))
    return tm, notes, f"{raw.get('device_name', '?')}, {raw.get('date', '?')}"


def fit_reference_profile(raw: dict, gpu: GPU) -> tuple[EngineProfile, list[str]]:
    """The reference engine's profile of raw kernel curves on `gpu`: a calibrate --raw file of `--engine
    reference`, or a merged curves file (benchmarks/gpu/h100-2026-11-28-curves.json) whose `runs` give each
    run's environment."""
    from llmcalc.costs.engine_fit import fit_reference
    from llmcalc.inputs.files import validated
    from llmcalc.inputs.presets import load_preset
    from llmcalc.inputs.raw_timings import RunEnvironment, check_curves

    curves = raw.get("curves")
    check_curves(curves)
    if not isinstance(curves, dict) or not curves.get("gemm"):
        raise UserError("`from_raw`: no kernel curves in it; give the raw timings of a calibration with `engine` "
                        "reference")
    if "runs" in raw:  # merged from several runs: the first run's environment, each curve's run in its source
        runs = raw["runs"]
        if not isinstance(runs, dict) or not runs:
            raise UserError("`from_raw`: `runs` is not a mapping of each run to its environment; give the merged "
                            "curves file as it was written")
        env = next(iter(runs.values()))
        validated(RunEnvironment, env, "`from_raw`: runs", "the merged curves file")  # as written, if it holds these
        by = raw.get("measured_by", {})
        stamp = (f"measured by llmcalc calibrate --engine reference on {env['device_name']}, {env['date']}, torch "
                 f"{env['torch']}, CUDA {env['cuda']}" + (f" ({len(raw['runs'])} runs: "
                                                          + ", ".join(sorted(set(by.values()))) + ")" if by else ""))
    else:
        env = {k: str(raw.get(k)) for k in ("device_name", "date", "torch", "cuda")} | {
            "driver": str(raw.get("driver") or "?")}
        stamp = (f"measured by llmcalc calibrate --engine reference on {env['device_name']}, {env['date']}, torch "
                 f"{env['torch']}, CUDA {env['cuda']}")
    with _as_written():
        scan = next((p.get("preset") for p in curves.get("mamba", []) if p.get("preset")), None)
        return fit_reference(curves, {k: str(v) for k, v in env.items()}, gpu, load_preset(scan) if scan else None,
                             stamp)


@contextmanager
def _as_written():
    """A fit over raw timings whose points (the kernel curves are free-form, read where each fit reads them) are not
    as `llmcalc calibrate --raw` writes them: a one-line UserError, not the traceback of the fit that tripped."""
    try:
        yield
    except (KeyError, TypeError, ValueError, ZeroDivisionError, IndexError, AttributeError) as e:
        why = f"a point lacks {e.args[0]!r}" if isinstance(e, KeyError) else f"{type(e).__name__}: {clip(str(e), 60)}"
        raise UserError(f"`from_raw`: the timings are not as a calibration run writes them ({why}); give the raw "
                        "file it wrote, unedited") from None
