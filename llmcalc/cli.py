"""The `llmcalc` command line: parse, load, estimate, render. No arithmetic lives here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import UserError
from .render import Format, emit

app = typer.Typer(
    help="Exact, closed-form costs of transformer LLMs: parameters, FLOPs, KV cache, memory, latency.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

PresetOpt = Annotated[Optional[str], typer.Option("--preset", "-p", help="Preset name (see `llmcalc presets`).")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="A llmcalc spec YAML written by you.")]
HFOpt = Annotated[
    Optional[Path], typer.Option("--hf-config", help="A Hugging Face config.json, or a folder holding one.")
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]


def load_model(preset: str | None, config: Path | None, hf_config: Path | None):
    """The ModelSpec named by exactly one of --preset, --config, --hf-config."""
    given = [x for x in (preset, config, hf_config) if x is not None]
    if len(given) != 1:
        raise UserError("give exactly one model: --preset NAME, --config FILE.yaml or --hf-config PATH")
    if preset is not None:
        from .presets import load_preset

        return load_preset(preset)
    if config is not None:
        from .presets import load_spec_file

        return load_spec_file(config)
    from .hf import load_hf_config

    return load_hf_config(hf_config)


@app.command()
def params(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    format: FormatOpt = "table",
) -> None:
    """Parameters: total, active per token, per component and per layer type."""
    from .params import params as count

    emit(count(load_model(preset, config, hf_config)), format)


@app.command()
def presets(format: FormatOpt = "table") -> None:
    """List the presets with their total and active parameters."""
    from .params import params as count
    from .presets import load_preset, preset_names
    from .report import PresetRow

    rows = []
    for name in preset_names():
        spec = load_preset(name)
        r = count(spec)
        rows.append(
            PresetRow(name=name, total=r.total, active=r.active, attention=spec.attention.label,
                      ffn=spec.ffn.label, source=spec.source)
        )
    emit(rows, format)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2."""
    try:
        app(standalone_mode=False)
    except UserError as e:
        sys.stderr.write(f"error: {e}\n")
        sys.exit(2)
    except Exception as e:  # typer/click usage errors carry exit_code and format_message()
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            if message := e.format_message():  # empty after no-args help was shown
                sys.stderr.write(f"error: {message} (see --help)\n")
            sys.exit(e.exit_code)
        raise
