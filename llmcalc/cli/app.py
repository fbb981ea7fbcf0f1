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
        app.command(cls=OnceCommand, **settings)(command)
        return command

    return register


class OnceCommand(typer.core.TyperCommand):
    """A command whose options that take one value are given at most once: `kv -p llama2-7b -p mistral-7b` answered
    for mistral-7b alone, as click keeps the last; it is refused, naming the option and both values (an option
    that takes several, such as compare's --preset, is not one of these)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        valued = {name: p for p in self.params if getattr(p, "param_type_name", "") == "option"
                  and not (p.is_flag or p.count) for name in p.opts}  # the options that take a value
        seen: dict[str, str] = {}
        i = 0
        while i < len(args) and args[i] != "--":
            word = args[i]
            name, eq, value = word.partition("=") if word.startswith("--") else (word[:2], "", word[2:])
            if word.startswith("-") and name in valued:
                attached = bool(eq) or bool(value)
                value = value if attached else (args[i + 1] if i + 1 < len(args) else "")
                i += not attached
                param = valued[name]
                if not param.multiple:
                    if param.name in seen:
                        from llmcalc.errors import UserError, clip

                        raise UserError(f"`{param.name}`: given twice ({clip(repr(seen[param.name]), 40)}, "
                                        f"{clip(repr(value), 40)}); give it once")
                    seen[param.name] = value
            i += 1
        return super().parse_args(ctx, args)
