"""llmcalc: exact, closed-form costs of transformer LLMs, as a command line (`llmcalc`) and as Python functions.

    import llmcalc
    llmcalc.kv("llama2-7b", batch=64, seq=32768).total_bytes

Each command is a function of the same inputs (a model as a preset name, a spec YAML or Hugging Face config.json
path, or a ModelSpec; a GPU preset name; the command's options as keywords, with its defaults) returning the
typed report the command prints: `report.model_dump(mode="json")` is its `--format json` output. Bad input raises
`llmcalc.UserError`. docs/python.md shows them; llmcalc/api.py holds them.

Names are loaded when first used (a module `__getattr__`): `import llmcalc` costs next to nothing and never
imports torch, typer or rich.
"""

COMMANDS = ("params", "kv", "flops", "memory", "latency", "fit", "compare", "explain", "sweep", "moe", "train",
            "mfu", "serve", "plan", "measured", "scale", "validate")
"""The commands, as functions of llmcalc/api.py (each of the same name)."""

PARTS = ("calibrate_from_runs",)
"""Functions of llmcalc/api.py that are one way of running a command: `llmcalc calibrate --from-runs`."""

__all__ = [*COMMANDS, *PARTS, "UserError", "ModelSpec", "ModelRef", "load_model"]

_HOMES = {**dict.fromkeys((*COMMANDS, *PARTS), "llmcalc.api"), "load_model": "llmcalc.api",
          "UserError": "llmcalc.errors",
          "ModelSpec": "llmcalc.model.spec", "ModelRef": "llmcalc.inputs.models"}
"""Each public name ↦ the module that defines it."""


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'llmcalc' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(home), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
