"""Options that always go together, declared once: the model, the batch, the images, the layout, the weights'
types, LoRA, recompute, the time model, request lengths and latency targets, the output.

A command names a group as one parameter, annotated with it (`model: groups.Model`); `grouped` puts the group's
options in that place of the command's signature (typer reads `__signature__`) and calls the command with one
object of the group, whose methods turn the options into what the layers below take (`model.load()`). An option
of a group that a command words or defaults its own way is declared in the command: it stays where the command
puts it, and the group's object still holds its value. `workload` builds the command's Workload from its groups
and its own fields.
"""

from collections.abc import Callable
from typing import Any, ClassVar

from llmcalc.cli.options import (
    BatchOpt,
    CalibrationOpt,
    ConfigOpt,
    DPOpt,
    EngineOpt,
    EPOpt,
    FormatOpt,
    GPUsOpt,
    HFGenericOpt,
    HFModelOpt,
    HFOpt,
    ImageSizeOpt,
    ImagesOpt,
    LoraOpt,
    LoraTargetsOpt,
    OutputLenOpt,
    PPOpt,
    PresetOpt,
    PromptLenOpt,
    RecomputeLayersOpt,
    RecomputeOpsOpt,
    RecomputeOpt,
    SeqOpt,
    SLOTPOTOpt,
    SLOTTFTOpt,
    TimeModelOpt,
    TPOpt,
    UnitsOpt,
    WeightsDtypeOpt,
    WeightsFormatOpt,
    emit,
    load_model,
)


class Group:
    """Options declared once for every command that takes them: a subclass's annotated class attributes are its
    options (an option alias of llmcalc/cli/options.py, and its default), in help order; an object of it holds
    their values as attributes of the same names."""

    _parameters: ClassVar[tuple | None] = None

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    @classmethod
    def parameters(cls) -> tuple:
        """The group's options as keyword-only signature parameters with their defaults, in order."""
        if cls.__dict__.get("_parameters") is None:
            import inspect
            import sys

            where = vars(sys.modules[cls.__module__])  # a module of postponed annotations holds them as text
            hints = {}  # a subclass's options follow its base's
            for base in reversed(cls.__mro__):
                hints |= base.__dict__.get("__annotations__", {})
            cls._parameters = tuple(
                inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=getattr(cls, name),
                                  annotation=eval(hint, where) if isinstance(hint, str) else hint)
                for name, hint in hints.items() if not name.startswith("_"))
        return cls._parameters

    def fields(self) -> dict:
        """The Workload fields these options set (`workload`); none unless the group says."""
        return {}

    def values(self) -> dict:
        """The options' values by name: the keywords of the same names of llmcalc/api.py's functions."""
        return dict(self.__dict__)

    def replace(self, **values: Any) -> "Group":
        """A copy with `values` in place of the options' own."""
        return type(self)(**(self.__dict__ | values))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


def grouped(command: Callable) -> Callable:
    """`command` with each parameter annotated with a Group replaced, in its place, by the group's options but
    those the command declares itself, and called with one object of the group there. `emit` and the error
    messages find the options in the returned function's signature, as typer does."""
    import functools
    import inspect

    signature = inspect.signature(command, eval_str=True)
    own = signature.parameters
    parameters: list[inspect.Parameter] = []
    groups: dict[str, type[Group]] = {}
    for p in own.values():
        if isinstance(p.annotation, type) and issubclass(p.annotation, Group):
            groups[p.name] = p.annotation
            parameters += [q for q in p.annotation.parameters() if q.name not in own]
        else:
            parameters.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    if not groups:
        return command

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        for name, group in groups.items():
            values[name] = group(**{q.name: values[q.name] if q.name in own else values.pop(q.name)
                                    for q in group.parameters()})
        return command(**values)

    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


def workload(*groups: Group, **fields: Any):
    """The Workload of a command's options: the fields of each group given, converted in that order (a bad value
    is named in that order), and the command's own fields."""
    from llmcalc.workload import Workload

    given: dict = {}
    for group in groups:
        given.update(group.fields())
    return Workload(**given, **fields)


class Model(Group):
    """The model: exactly one of --preset, --config, --hf-config, --hf-model (and --hf-generic for the last two)."""

    preset: PresetOpt = None
    config: ConfigOpt = None
    hf_config: HFOpt = None
    hf_model: HFModelOpt = None
    hf_generic: HFGenericOpt = False

    def ref(self):
        """The model named, unread (llmcalc/inputs/models.py: ModelRef; read by load_model)."""
        from llmcalc.inputs.models import ModelRef

        return ModelRef(self.preset, self.config, self.hf_config, self.hf_model, self.hf_generic)

    def load(self):
        """The ModelSpec named (options.load_model)."""
        return load_model(self.preset, self.config, self.hf_config, self.hf_model, self.hf_generic)


class Batch(Group):
    """The batch: sequences in all, and tokens per sequence."""

    batch: BatchOpt = 1
    seq: SeqOpt = 4096

    def fields(self) -> dict:
        return {"batch": self.batch, "seq": self.seq}


class Images(Group):
    """Images per sequence and their size (a vision-language model)."""

    images: ImagesOpt = 0
    image_size: ImageSizeOpt = None

    def fields(self) -> dict:
        """images, and image_size from HEIGHTxWIDTH when given (llmcalc/api.py: images)."""
        from llmcalc.api import images

        return images(self.images, self.image_size)


class Layout(Group):
    """The GPUs in all and the parallel degrees; tp defaults to gpus / (pp · dp)."""

    gpus: GPUsOpt = None
    tp: TPOpt = None
    pp: PPOpt = 1
    dp: DPOpt = 1
    ep: EPOpt = 1

    def fields(self) -> dict:
        from llmcalc.api import layout

        return layout(self.gpus, self.tp, self.pp, self.dp, self.ep)


class Weights(Group):
    """The weights' storage type and per-component formats."""

    weights_dtype: WeightsDtypeOpt = None
    weights_format: WeightsFormatOpt = None

    def fields(self) -> dict:
        """weights_dtype, and weights_format parsed (llmcalc/api.py: weights)."""
        from llmcalc.api import weights

        return weights(self.weights_dtype, self.weights_format)


class Lora(Group):
    """LoRA adapters: their rank and the matrices they adapt."""

    lora_rank: LoraOpt = None
    lora_targets: LoraTargetsOpt = None

    def fields(self) -> dict:
        """lora_rank, and lora_targets parsed when given (llmcalc/api.py: lora)."""
        from llmcalc.api import lora

        return lora(self.lora_rank, self.lora_targets)


class Recompute(Group):
    """Activation recompute: the mode, or the ops and the layers it redoes."""

    recompute: RecomputeOpt = "none"
    recompute_ops: RecomputeOpsOpt = None
    recompute_layers: RecomputeLayersOpt = None

    def fields(self) -> dict:
        """recompute, recompute_layers, and recompute_ops as a tuple in order (llmcalc/api.py: recompute)."""
        from llmcalc.api import recompute

        return recompute(self.recompute, self.recompute_ops, self.recompute_layers)


class TimeModel(Group):
    """The time model: its kind, and a calibration profile."""

    time_model: TimeModelOpt = None
    calibration: CalibrationOpt = None

    def serving_engine(self):
        """The serving engine timed: none (the GPU's own profile)."""
        return None

    def load(self, device, **efficiencies):
        """The time model on `device` with `efficiencies` (llmcalc/api.py: time_model); with no GPU, no time: the
        roofline."""
        from llmcalc.api import time_model

        return time_model(device, self.time_model, self.calibration, getattr(self, "engine", None),
                          serving=hasattr(self, "engine"), **efficiencies)


class EngineTime(TimeModel):
    """The time model of a named serving engine: the engine, the time model's kind, and a calibration profile."""

    engine: EngineOpt = None

    def serving_engine(self):
        """The engine named (presets/engines/), the default one when none is."""
        from llmcalc.api import engine

        return engine(self.engine)


class Lengths(Group):
    """Prompt and output tokens per request: a number, or a distribution to draw from."""

    prompt: PromptLenOpt = None
    output: OutputLenOpt = None

    def parse(self) -> tuple:
        """(prompt, output) parsed (llmcalc/inputs/requests.py: parse_lengths); one not given, its default."""
        from llmcalc.api import _lengths

        return _lengths(self.prompt, self.output)


class Targets(Group):
    """The latency targets: p99 time to first token and time per output token."""

    slo_ttft: SLOTTFTOpt = None
    slo_tpot: SLOTPOTOpt = None

    def slo(self):
        """The targets as the serving views take them."""
        from llmcalc.api import _slo

        return _slo(self.slo_ttft, self.slo_tpot)


class Output(Group):
    """How the report is printed: its format and units."""

    format: FormatOpt = "table"
    units: UnitsOpt = "both"

    def emit(self, report, *, of: Callable, **view) -> None:
        """`report` printed as the options say (options.emit)."""
        emit(report, self.format, self.units, of=of, **view)
