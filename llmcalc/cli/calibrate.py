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
    quick: Annotated[bool, _opt("--quick", help="Every other size and half the runs (about a quarter of the time).",
                                panel=WORKLOAD)] = False,
    out: Annotated[Optional[Path], _opt("--out", "-o", help="Write the profile here (default: print it).",
                                        panel=OUTPUT, metavar="FILE")] = None,
    raw: Annotated[Optional[Path], _opt("--raw", help="Also write every raw timing here, as JSON.", panel=OUTPUT,
                                        metavar="FILE")] = None,
    force: Annotated[bool, _opt("--force", help="Overwrite --out and --raw when they exist.", panel=OUTPUT)] = False,
) -> None:
    """Measure this GPU (GEMMs, attention, bandwidth, kernel cost) into a time-model profile (needs PyTorch)."""
    import json

    from llmcalc.costs.calibration import plan
    from llmcalc.inputs.gpus import load_gpu
    from llmcalc.inputs.presets import load_preset
    from llmcalc.inputs.time_models import dump_profile
    from llmcalc.views.calibrate import calibrate as run
    from llmcalc.views.calibrate import detected_gpu, require_torch

    for name, path in (("out", out), ("raw", raw)):
        if path is not None and path.exists() and not force:
            raise UserError(f"`{name}` {path}: the file exists and is left as it is; give another path, or "
                            "`force` to overwrite it")
        if path is not None and not path.parent.is_dir():
            raise UserError(f"`{name}` {path}: no folder {path.parent}; create it or give another path")
    runs = plan(load_preset(preset), device, quick)
    device_gpu = load_gpu(gpu) if gpu is not None else None  # bad input is named before a missing torch
    require_torch(device)
    device_gpu = device_gpu or load_gpu(detected_gpu(device))

    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("calibrating", total=runs.steps)
        tm, notes, raw_data = run(runs, device_gpu, lambda step: bar.update(task, advance=1, description=step))

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

