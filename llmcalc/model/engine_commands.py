"""An engine's commands as data: the program that launches its server and the one that benchmarks it, with the
flags each accepts that `llmcalc plan --emit` may write, every list read in the engine's own argument parser
(presets/engines/commands/<engine>.yaml names the file and commit). The emitter (llmcalc/views/emit.py) writes no
flag outside these lists; a test holds every emitted command to them."""

from typing import Literal

from pydantic import field_validator

from llmcalc.errors import UserError
from llmcalc.model.base import Frozen


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

    @field_validator("flags")
    @classmethod
    def _flags(cls, flags: list[str]) -> list[str]:
        if any(not f.startswith("--") or " " in f for f in flags) or len(set(flags)) != len(flags):
            raise UserError("`flags`: give each accepted flag once, spelled with its leading -- and no spaces")
        return flags

    def model_flag(self) -> str | None:
        """The flag that names the model, or None where the model is the first argument."""
        return None if self.model == "positional" else "--model" if self.model == "flag" else self.model


class EngineCommands(Frozen):
    """An engine's launch and benchmark commands."""

    engine: Literal["vllm", "sglang", "trtllm"]
    launch: Command
    benchmark: Command
