"""The `llmcalc calibrate` command: microbenchmarks on this machine's GPU, fitted into a time-model profile."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

from llmcalc.cli.app import app
from llmcalc.cli.options import GPUS, MODEL, OUTPUT, WORKLOAD, _opt
from llmcalc.errors import UserError


@app.command()
def calibrate(
    device: Annotated[Literal["cuda", "cpu"], _opt(
        "--device", help="cuda: measure this machine's GPU; cpu: a smoke run at tiny sizes (covers the code path, "
        "not a GPU's figures).", panel=WORKLOAD, metavar="cuda|cpu")] = "cuda",
    gpu: Annotated[Optional[str], _opt(
        "--gpu", help="GPU preset whose peaks and bandwidth the fit divides by (default: the one named like the "
        "detected GPU; h100-sxm on cpu).", panel=GPUS, metavar="NAME")] = None,
    preset: Annotated[str, _opt("--preset", "-p", help="Model whose weight-matmul and attention shapes are "
                                "measured.", panel=MODEL, metavar="NAME")] = "llama3-8b",
    quick: Annotated[bool, _opt("--quick", help="Every other size and fewer runs (about a third of the time).",
                                panel=WORKLOAD)] = False,
    out: Annotated[Optional[Path], _opt("--out", "-o", help="Write the profile here (default: print it).",
                                        panel=OUTPUT, metavar="FILE")] = None,
    raw: Annotated[Optional[Path], _opt("--raw", help="Also write every raw timing here, as JSON.", panel=OUTPUT,
                                        metavar="FILE")] = None,
    force: Annotated[bool, _opt("--force", help="Overwrite --out and --raw when they exist.", panel=OUTPUT)] = False,
) -> None:
    """Measure GEMMs, attention, copy bandwidth and kernel cost on this machine and fit a calibration profile
    for --time-model calibrated --calibration FILE (needs PyTorch)."""
    import json

    from llmcalc.costs.calibration import fit, plan
    from llmcalc.inputs.gpus import load_gpu, preset_for_device
    from llmcalc.inputs.presets import load_preset
    from llmcalc.inputs.time_models import base_profile, dump_profile

    for name, path in (("out", out), ("raw", raw)):
        if path is not None and path.exists() and not force:
            raise UserError(f"`{name}` {path}: the file exists and is left as it is; give another path, or "
                            "`force` to overwrite it")
        if path is not None and not path.parent.is_dir():
            raise UserError(f"`{name}` {path}: no folder {path.parent}; create it or give another path")
    spec = load_preset(preset)
    device_gpu = load_gpu(gpu) if gpu is not None else None  # bad input is named before a missing torch
    torch = require_torch(device)
    if device_gpu is None:
        detected = torch.cuda.get_device_name() if device == "cuda" else None
        name = "h100-sxm" if detected is None else preset_for_device(detected)
        if name is None:
            raise UserError(f"`gpu`: no GPU preset matches {detected!r}; give `gpu` NAME (see `llmcalc gpus`) or a "
                            "GPU YAML file")
        device_gpu = load_gpu(name)
    base, base_name = base_profile(device_gpu)
    runs = plan(spec, device, quick)

    from rich.console import Console
    from rich.progress import Progress

    from llmcalc.reference.calibrate import measure

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("calibrating", total=runs.steps)
        raw_data = measure(runs, lambda step: bar.update(task, advance=1, description=step))
    tm, notes = fit(raw_data, device_gpu, base, base_name)

    header = [f"Calibration profile for {device_gpu.name}: measured by `llmcalc calibrate --device {device}` on "
              f"{raw_data['device_name']}, {raw_data['date']}; llmcalc/model/time_model.py names each figure",
              *(f"note: {n}" for n in notes),
              "use: llmcalc latency --time-model calibrated --calibration FILE (docs/roofline.md#time-models)"]
    text = dump_profile(tm, header)
    if raw is not None:
        raw_data["fit"] = tm.model_dump()
        raw.write_text(json.dumps(raw_data, indent=1) + "\n", encoding="utf-8")
        sys.stderr.write(f"wrote the raw timings to {raw}\n")
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        sys.stderr.write(f"wrote the profile to {out}; use it with --time-model calibrated --calibration {out}\n")


def require_torch(device: str):
    """torch, when it is installed and `device` is there; else a one-line error."""
    try:
        import torch
    except ImportError:
        raise UserError("calibrate needs PyTorch; install it with pip install 'llmcalc-cost[torch]'") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("`device` cuda: no CUDA GPU is visible here; run it on a GPU machine, or `device` cpu for a "
                        "smoke run")
    return torch
