"""The typer application: its help, the root options (--version) and nothing else; each command registers
itself from its own module in llmcalc/cli/ (llmcalc/cli/__init__.py loads only the one that runs)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

app = typer.Typer(
    help="Exact, closed-form costs of transformer LLMs: parameters, FLOPs, KV cache, memory, latency.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("llmcalc-cost")
        except PackageNotFoundError:
            v = "unknown (not installed)"
        sys.stdout.write(f"llmcalc {v}\n")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", callback=_version,
                                          is_eager=True, metavar="")] = False,
) -> None:
    pass
