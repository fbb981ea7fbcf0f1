"""An engine's commands as data: the program that launches its server and the one that benchmarks it, with the
flags each accepts that `llmcalc plan --emit` may write, every list read in the engine's own argument parser
(presets/engines/commands/<engine>.yaml names the file and commit). The emitter (llmcalc/views/emit.py) writes no
flag outside these lists; a test holds every emitted command to them. The launch command also names which of its
flags set the settings llmcalc runs the engine with (Settings, llmcalc/model/engine.py) and which turns its CUDA
graphs off: the emitter writes the plan's settings with the first, and the published serving runs are evaluated
with the settings their launch commands state (benchmarks/serving/evaluate.py)."""

from typing import Literal

from pydantic import field_validator, model_validator

from llmcalc.errors import UserError
from llmcalc.model.base import Frozen


def _spelled(flag: str) -> bool:
    """Whether `flag` is spelled as a long option: a leading --, no spaces."""
    return flag.startswith("--") and " " not in flag


class Source(Frozen):
    """Where a command's flags were read: the repository, the file (and the function) and the commit."""

    repo: str
    path: str
    commit: str


class Command(Frozen):
    """One command: its program words, how it takes the model, and the flags it accepts that may be emitted."""

    program: list[str]
    """The words before any flag (`vllm serve`, `python -m sglang.launch_server`)."""
    model: str
    """How the model is given: `positional` (the first argument after the program), `flag` (the `--model` flag)
    or the flag that names it (`--model-path`)."""
    source: Source
    flags: list[str]
    """The flags the parser of `source` accepts that the emitter may write, each spelled as that parser spells
    it."""
    settings: dict[Literal["max_seqs", "max_batched_tokens", "block_size", "gpu_memory_utilization"], str] = {}
    """The flags of `flags` that set each Settings value (the running sequences, the step's token budget, the KV
    block size, the memory share), as the engine names them."""
    graphs_off: str | None = None
    """The flag of the same parser that turns the engine's CUDA graphs off; the emitter never writes it."""
    overlap_off: str | None = None
    """The flag of the same parser that turns the engine's overlap scheduling off (Engine.overlap_scheduling); the
    emitter never writes it."""

    @field_validator("flags")
    @classmethod
    def _flags(cls, flags: list[str]) -> list[str]:
        if any(not _spelled(f) for f in flags) or len(set(flags)) != len(flags):
            raise UserError("`flags`: give each accepted flag once, spelled with its leading -- and no spaces")
        return flags

    @model_validator(mode="after")
    def _settings_are_flags(self) -> "Command":
        unknown = [f for f in self.settings.values() if f not in self.flags]
        if unknown:
            raise UserError(f"`settings`: {unknown[0]} is not among `flags`; list it there, as its parser spells it")
        for name in ("graphs_off", "overlap_off"):
            if getattr(self, name) is not None and not _spelled(getattr(self, name)):
                raise UserError(f"`{name}`: spell the flag with its leading -- and no spaces")
        return self

    def model_flag(self) -> str | None:
        """The flag that names the model, or None where the model is the first argument."""
        return None if self.model == "positional" else "--model" if self.model == "flag" else self.model


class EngineCommands(Frozen):
    """An engine's launch and benchmark commands."""

    engine: Literal["vllm", "sglang", "trtllm"]
    launch: Command
    benchmark: Command
