"""`llmcalc train --engine NAME`: a training step on a named engine. The reference engine (the bundled PyTorch
model) is the one that trains here: its step is llmcalc/costs/engine_training.py's, its kernels counted from the
reference under torch (llmcalc/reference/kernel_count.py), which is imported only then."""

from __future__ import annotations

from llmcalc.costs.engine_training import engine_training
from llmcalc.errors import UserError
from llmcalc.inputs.time_models import ENGINE_DIR, load_engine_profile
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.training import TrainReport
from llmcalc.views.torch_needed import require_torch
from llmcalc.views.validate import MAX_LAYERS
from llmcalc.workload import Workload


def train_on_engine(spec: ModelSpec, gpu: GPU, w: Workload, engine: str, **unused) -> TrainReport:
    """One training step of `w` on `engine` (reference); a one-line refusal for another engine, for a time-model
    option given beside it (`unused`: its name and value), and where the GPU has no engine profile."""
    if engine != "reference":
        raise UserError(f"`engine`: train runs only the reference engine (the bundled PyTorch model's training "
                        f"step), not {engine} (vllm, sglang and trtllm serve); give `engine` reference, or leave it "
                        "out for the time model's training stack")
    for name, value in unused.items():
        if value:
            raise UserError(f"`{name}`: the reference engine's step is timed by its own engine profile "
                            "(presets/calibration/reference/) as one micro-batch, without a band; leave out "
                            f"`{name}` with `engine` reference")
    if spec.n_layers > MAX_LAYERS:  # the count runs every layer in torch: its work grows with them
        raise UserError(f"`model`: {spec.name} has {spec.n_layers:,} layers and the reference engine counts each "
                        f"layer's kernels in torch; it takes {MAX_LAYERS} or fewer")
    profile = load_engine_profile(gpu)
    if profile is None:
        have = ", ".join(sorted(p.stem for p in ENGINE_DIR.glob("*.yaml")))
        raise UserError(f"`gpu`: no reference-engine profile for {gpu.name} (bundled: {have}); measure one on "
                        "that GPU with calibrate's reference engine (docs/commands/calibrate.md)")

    def count(batch: int, seq: int):
        require_torch("train on the reference engine", "fake", "")
        from llmcalc.reference.kernel_count import count_training

        return count_training(spec, batch, seq)

    return engine_training(spec, gpu, w, profile, count)
