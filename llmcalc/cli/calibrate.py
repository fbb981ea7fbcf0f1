"""The `llmcalc calibrate` command: microbenchmarks on this machine's GPU, fitted into a time-model profile (a serving
stack's) or an engine profile (the bundled reference model's own kernels); or a refit of earlier raw timings, or of
the time-model profile to real serving-benchmark runs (--from-runs)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

from llmcalc.cli.app import command
from llmcalc.cli.options import GPUS, MODEL, OUTPUT, WORKLOAD, _opt
from llmcalc.errors import UserError

RAW_LIMIT = 64 << 20
"""Bytes of a --from-raw file read at most."""


@command(rank=90)
def calibrate(
    device: Annotated[Literal["cuda", "cpu"], _opt(
        "--device", help="cuda (this machine's GPU) or cpu (a smoke run at tiny sizes).", panel=WORKLOAD,
        metavar="DEVICE")] = "cuda",
    gpu: Annotated[Optional[str], _opt(
        "--gpu", help="GPU preset whose peaks the fit divides by (default: the detected GPU's).", panel=GPUS,
        metavar="NAME")] = None,
    preset: Annotated[Optional[str], _opt(
        "--preset", "-p", help="Model whose shapes are measured (default: llama3-8b); --from-runs: the runs' model.",
        panel=MODEL, metavar="NAME")] = None,
    engine: Annotated[Literal["serving", "reference"], _opt(
        "--engine", help="serving (a time-model profile) or reference (an engine profile of its kernels).",
        panel=WORKLOAD, metavar="KIND")] = "serving",
    from_raw: Annotated[Optional[Path], _opt(
        "--from-raw", help="Refit an earlier run's --raw timings (no GPU or torch needed).", panel=WORKLOAD,
        metavar="FILE")] = None,
    from_runs: Annotated[Optional[list[Path]], _opt(
        "--from-runs", help="Refit to serving-benchmark result files (as `llmcalc measured` reads).",
        panel=WORKLOAD, metavar="FILE")] = None,
    served_by: Annotated[Optional[str], _opt(
        "--served-by", help="--from-runs: the engine, where the files do not say.", panel=WORKLOAD,
        metavar="NAME")] = None,
    quick: Annotated[bool, _opt("--quick", help="Every other size, half the runs (about ¼ of the time).",
                                panel=WORKLOAD)] = False,
    out: Annotated[Optional[Path], _opt("--out", "-o", help="Write the profile here (default: print it).",
                                        panel=OUTPUT, metavar="FILE")] = None,
    raw: Annotated[Optional[Path], _opt("--raw", help="Also write every raw timing here, as JSON.", panel=OUTPUT,
                                        metavar="FILE")] = None,
    force: Annotated[bool, _opt("--force", help="Overwrite --out and --raw when they exist.", panel=OUTPUT)] = False,
) -> None:
    """Measure this GPU into a time-model profile, or the reference model's kernels into an engine profile
    (needs PyTorch; --from-raw refits earlier timings, --from-runs real serving runs, without it)."""
    from llmcalc.cli.files import check_outputs, write_atomic
    from llmcalc.inputs.gpus import load_gpu, preset_for_device
    from llmcalc.render.formats import strict_json

    check_outputs(force, out=out, raw=raw)
    if from_runs:
        if from_raw is not None or raw is not None:
            raise UserError("`from_runs`: nothing is measured or read raw; drop `from_raw` and `raw`")
        return _emit(refit_runs(from_runs, preset, gpu, served_by), out, write_atomic)
    if served_by is not None:
        raise UserError("`served_by`: names the engine of `from_runs` files; give those, or drop it")
    if from_raw is not None:
        if raw is not None:
            raise UserError("`raw`: with `from_raw` nothing is measured; drop `raw`")
        data = read_raw(from_raw)
        named = data.get("device_name") or (data.get("gpu_raw") or {}).get("device_name")
        device_gpu = load_gpu(gpu or preset_for_device(named or "") or _no_gpu(named))
        text = refit(data, device_gpu, engine, f"--from-raw {from_raw.name}")
        return _emit(text, out, write_atomic)

    from llmcalc.costs.calibration import REFERENCE_PRESETS, plan
    from llmcalc.inputs.presets import load_preset
    from llmcalc.views.calibrate import calibrate as run
    from llmcalc.views.calibrate import detected_gpu, require_torch

    curves = [load_preset(p) for p in REFERENCE_PRESETS] if engine == "reference" else None
    runs = plan(load_preset(preset or "llama3-8b"), device, quick, curves)
    device_gpu = load_gpu(gpu) if gpu is not None else None  # bad input is named before a missing torch
    require_torch(device)
    device_gpu = device_gpu or load_gpu(detected_gpu(device))

    from rich.console import Console
    from rich.progress import Progress

    def checkpoint(data: dict) -> None:  # the raw timings so far, so a failure later keeps them
        if raw is not None:
            write_atomic(raw, strict_json(data, indent=1, ascii=True))

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("calibrating", total=runs.steps)
        tm, notes, raw_data = run(runs, device_gpu, lambda step: bar.update(task, advance=1, description=step),
                                  checkpoint)
    if raw is not None:
        raw_data["fit"] = tm.model_dump()
        write_atomic(raw, strict_json(raw_data, indent=1, ascii=True))
        sys.stderr.write(f"wrote the raw timings to {raw}\n")
    text = refit(raw_data, device_gpu, engine, f"--device {device}")
    _emit(text, out, write_atomic)


def _no_gpu(named: str | None) -> str:
    raise UserError(f"`gpu`: no GPU preset matches the raw timings' device {named!r}; give `gpu` NAME")


def read_raw(path: Path) -> dict:
    """A raw-timings JSON file, size-checked and strict (no NaN or Infinity)."""
    from llmcalc.inputs.files import TooManyContainers, json_loads

    def finite(token: str) -> float:
        value = float(token)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"{token} is not a number JSON allows")
        return value

    if path.is_dir():
        raise UserError(f"`from_raw` {path}: a folder; give the file `llmcalc calibrate --raw` wrote in it")
    if not path.exists():
        raise UserError(f"`from_raw` {path}: no such file; give a file `llmcalc calibrate --raw` wrote")
    if not path.is_file():
        raise UserError(f"`from_raw` {path}: not a regular file (a device or a pipe); give a file `llmcalc calibrate "
                        "--raw` wrote")
    if path.stat().st_size > RAW_LIMIT:
        raise UserError(f"`from_raw` {path}: over {RAW_LIMIT >> 20} MiB; give a raw-timings file")

    try:
        data = json_loads(path.read_text(encoding="utf-8"), number=finite)  # 1e999 would read as inf
    except TooManyContainers as e:
        raise UserError(f"`from_raw` {path}: {e}; give a raw-timings file") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError(f"`from_raw` {path}: not valid JSON ({str(e).splitlines()[0][:80]}); give a raw-timings "
                        "file") from None
    if not isinstance(data, dict) or not ("gemm" in data or "curves" in data):
        raise UserError(f"`from_raw` {path}: no GEMM timings or kernel curves in it; give a raw-timings file")
    return data


def refit(data: dict, gpu, engine: str, how: str) -> str:
    """The profile text fitted to raw timings `data` on `gpu`: a time-model profile (serving) or the reference
    engine's profile."""
    from llmcalc.inputs.time_models import dump_engine_profile, dump_profile
    from llmcalc.views.calibrate import fit_reference_profile, fit_serving_profile

    if engine == "reference":
        profile, notes = fit_reference_profile(data, gpu)
        on = profile.measured_on
        header = [f"Reference-engine profile for {gpu.name}: `llmcalc calibrate --engine reference {how}`, measured on "
                  f"{on.get('device_name', '?')} (driver {on.get('driver', '?')}, CUDA {on.get('cuda', '?')}, torch "
                  f"{on.get('torch', '?')}), {on.get('date', '?')}; llmcalc/model/engine_profile.py names each "
                  "figure", *(f"fit: {n}" for n in notes),
                  "use: llmcalc validate --device cuda (docs/roofline.md#the-reference-engine)"]
        return dump_engine_profile(profile, header)
    tm, notes, named = fit_serving_profile(data, gpu)
    what = (f"CPU smoke-run profile (gpu: {tm.gpu}; figures over {gpu.name}'s peaks, not a GPU's)" if tm.gpu != gpu.name
            else f"Calibration profile for {gpu.name}")
    header = [f"{what}: measured by `llmcalc calibrate {how}` on {named}; "
              "llmcalc/model/time_model.py names each figure", *(f"note: {n}" for n in notes),
              "use: llmcalc latency --time-model calibrated --calibration FILE (docs/roofline.md#time-models)"]
    return dump_profile(tm, header)


def _emit(text: str, out: Path | None, write_atomic) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    write_atomic(out, text)
    sys.stderr.write(f"wrote the profile to {out}\n")


RUN_FLAGS = {"files": "--from-runs", "config": "--config", "hf_config": "--hf-config", "hf_model": "--hf-model",
             "requests": "--requests", "concurrency": "--concurrency", "rate": "--rate", "prompt": "--prompt",
             "output": "--output"}
"""The fields a run's resolution names that are not calibrate's options, written as `llmcalc measured`'s flags (the
run files themselves as calibrate's --from-runs)."""


def refit_runs(files: list[Path], preset: str | None, gpu: str | None, served_by: str | None) -> str:
    """The profile text of the runs in `files` refitted (llmcalc/api.py: calibrate_from_runs); each term before and
    after and the leave-one-out written to stderr (they are in the profile's header too)."""
    from llmcalc import api
    from llmcalc.inputs.models import ModelRef

    try:
        refit = api.calibrate_from_runs(files, None if preset is None else ModelRef(preset=preset), gpu,
                                        served_by=served_by)
    except UserError as e:
        raise UserError(e.worded(lambda field: RUN_FLAGS.get(field, f"`{field}`"))) from None
    sys.stderr.write("".join(f"{line}\n" for line in refit.lines))
    return refit.text()
