"""Time models by name: the roofline, or a GPU's calibration profile (`presets/calibration/<gpu>.yaml`, data with
the source of every figure), or a user's profile file; read with the safe loader."""

from __future__ import annotations

from pathlib import Path

from llmcalc.errors import UserError
from llmcalc.inputs.files import PRESETS, read_yaml, validated
from llmcalc.model.engine import Engine
from llmcalc.model.engine_profile import EngineProfile
from llmcalc.model.gpu import GPU
from llmcalc.model.time_model import ROOFLINE, SMOKE_GPU, TimeModel

CALIBRATION_DIR = PRESETS / "calibration"
NAMES = ("roofline", "calibrated")


def calibrated_gpus() -> list[str]:
    """GPU presets with a bundled calibration profile."""
    return sorted(p.stem for p in CALIBRATION_DIR.glob("*.yaml"))


def bundled(folder: Path, name: str) -> Path | None:
    """The file `folder`/<name>.yaml where the folder holds one by that name, else None: a name is looked up among
    the files there, never made into a path (a GPU file's name `../x` reads nothing outside the presets)."""
    return folder / f"{name}.yaml" if name in {p.stem for p in folder.glob("*.yaml")} else None


def profile_path(gpu: GPU, engine: Engine | None) -> Path | None:
    """The bundled profile of `gpu` under `engine`: presets/calibration/engines/<engine>/<gpu>.yaml where the
    runs of that engine on that GPU gave one, else the GPU's own, presets/calibration/<gpu>.yaml; None where
    there is neither."""
    engines = CALIBRATION_DIR / "engines"
    if engine is not None and engine.name in {p.name for p in engines.iterdir() if p.is_dir()}:
        path = bundled(engines / engine.name, gpu.name)
        if path is not None:
            return path
    return bundled(CALIBRATION_DIR, gpu.name)


def load_time_model(name: str | None, gpu: GPU, calibration: Path | None = None, engine: Engine | None = None,
                    **overrides: float | None) -> TimeModel:
    """The time model `name` for `gpu` (calibrated: its bundled profile under `engine` (profile_path), or the
    profile file `calibration`; None: calibrated where there is a profile, else the roofline), with each
    efficiency given in `overrides` (None: the model's own) put in its place; the engine's host step_s and request_s,
    and its fp8 and block-scaled fp8 efficiencies on the GPU's architecture, where it states them, in place of a bundled
    profile's, and of a `calibration` file's where the file sets none (a file of one's own, fitted to one's runs,
    keeps its figures)."""
    if name is None:
        profiled = calibration is not None or profile_path(gpu, engine) is not None
        name = "calibrated" if profiled else "roofline"
    own: set[str] = set()  # the host figures a calibration file sets itself
    if calibration is not None:
        raw = read_yaml(calibration, "calibration file")
        own = {k for k in ("step_s", "request_s", "fp8_efficiency", "block_fp8_efficiency") if isinstance(raw, dict)
               and raw.get(k) is not None}
        tm = validated(TimeModel, raw, f"calibration file {calibration}", "presets/calibration/h100-sxm.yaml")
        if tm.gpu == SMOKE_GPU:
            raise UserError(f"`calibration` {calibration}: a CPU smoke run's profile, whose figures are no GPU's; "
                            f"measure the {gpu.name} with `llmcalc calibrate` on it")
        if tm.gpu is not None and tm.gpu != gpu.name:
            raise UserError(f"`calibration` {calibration}: a profile for {tm.gpu}, not {gpu.name}; give `gpu` "
                            f"{tm.gpu}, or measure the {gpu.name} with `llmcalc calibrate` on it")
    elif name == "roofline":
        tm = ROOFLINE
    elif name == "calibrated":
        path = profile_path(gpu, engine)
        if path is None:
            raise UserError(f"`time_model`: no calibration profile for {gpu.name} (profiles: "
                            f"{', '.join(calibrated_gpus()) or 'none'}); use `time_model` roofline, or give "
                            "`calibration` FILE (llmcalc calibrate writes one)")
        tm = validated(TimeModel, read_yaml(path, "calibration file"), f"calibration {gpu.name}",
                       "presets/calibration/h100-sxm.yaml")
    else:
        raise UserError(f"`time_model`: unknown time model {name!r}; use one of {', '.join(NAMES)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if engine is not None and tm.fixed_costs:
        stated = {"step_s": engine.step_s, "request_s": engine.request_s,
                  "fp8_efficiency": engine.fp8.get(gpu.architecture),
                  "block_fp8_efficiency": engine.block_fp8.get(gpu.architecture)}
        given = {k: v for k, v in stated.items() if v is not None and k not in own} | given
    return TimeModel.model_validate(tm.model_dump() | given) if given else tm


def base_profile(gpu: GPU) -> tuple[TimeModel, str]:
    """The profile a calibration keeps unmeasured figures from, and its name: `gpu`'s bundled profile, else the
    roofline."""
    if bundled(CALIBRATION_DIR, gpu.name) is not None:
        return load_time_model("calibrated", gpu), f"presets/calibration/{gpu.name}.yaml"
    return ROOFLINE, f"the roofline time model (no bundled profile for {gpu.name})"


PROFILE_FIELDS = ("name", "gpu", "engine", "compute_efficiency", "fp8_efficiency", "block_fp8_efficiency",
                  "attention_efficiency", "matmul_pad_rows", "memory_efficiency", "comm_efficiency", "overlap",
                  "kernel_s", "collective_s", "step_s", "launch_s", "request_s", "sources")
"""A profile file's fields, in the order the bundled profiles write them; request_s only where it is set (no
microbenchmark measures it: `calibrate --from-runs` fits it)."""


def dump_profile(tm: TimeModel, header: list[str]) -> str:
    """`tm` as a profile file in the bundled format (presets/calibration/h100-sxm.yaml): the `header` lines as
    comments, then every figure that is set, then `sources`."""
    import yaml

    values = {k: getattr(tm, k) for k in PROFILE_FIELDS}
    data = {k: v for k, v in values.items() if v is not None and (v or k != "request_s")}
    text = yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True)
    return "".join(f"# {line}\n" for line in header) + text


ENGINE_DIR = CALIBRATION_DIR / "reference"
"""The reference engine's profiles, one per GPU (`llmcalc calibrate --engine reference`)."""


def engine_gpus() -> list[str]:
    """GPU presets with a bundled reference-engine profile."""
    return sorted(p.stem for p in ENGINE_DIR.glob("*.yaml"))


def load_engine_profile(gpu: GPU, path: Path | None = None) -> EngineProfile | None:
    """The reference engine's profile for `gpu` (presets/calibration/reference/<gpu>.yaml), or the file `path`;
    None where no bundled profile exists."""
    if path is None:
        path = bundled(ENGINE_DIR, gpu.name)
        if path is None:
            return None
    return validated(EngineProfile, read_yaml(path, "engine profile"), f"engine profile {path.name}",
                     "presets/calibration/reference/h100-sxm.yaml")


def dump_engine_profile(profile: EngineProfile, header: list[str]) -> str:
    """`profile` as a YAML file: the `header` lines as comments, then its fields (curves as flow rows)."""
    import yaml

    data = profile.model_dump()
    text = yaml.safe_dump({k: v for k, v in data.items() if k != "curves"}, sort_keys=False, width=120,
                          allow_unicode=True)
    rows = "".join(f"  {name}:\n" + "".join(f"  - {yaml.safe_dump(r, default_flow_style=True).strip()}\n"
                                            for r in points) if points else f"  {name}: []\n"
                   for name, points in data["curves"].items())
    return "".join(f"# {line}\n" for line in header) + text + "curves:\n" + rows
