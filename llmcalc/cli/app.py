"""The typer application: its help, the root options (--version), and `command`, with which each command
registers itself from its own module in llmcalc/cli/ (llmcalc/cli/__init__.py loads only the one that runs)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

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


def command(rank: int, **settings: Any) -> Callable[[Callable], Callable]:
    """Register the decorated function as the command of its name (typer's `app.command(**settings)`), its option
    groups in place (llmcalc/cli/groups.py: grouped). `rank` places it in `llmcalc --help`'s list of commands,
    lowest first; the function returned, the command as typer sees it, keeps it as `.rank`."""

    def register(function: Callable) -> Callable:
        from llmcalc.cli.groups import grouped

        command = grouped(function)
        command.rank = rank  # type: ignore[attr-defined]
        app.command(**settings)(command)
        return command

    return register
