"""A command line run in this process, for a front end other than the terminal (the web page, llmcalc/ui): the
command's own parser and function, its report kept instead of printed (options.kept_reports), its bad input as
the one line and exit code the command line gives (refusal). Nothing here computes or words anything again.

Runs are one at a time (a lock): typer's application and the command modules it loads are shared. A Hub model
is fetched before the lock is taken (hub_first), so a slow or unreachable Hub keeps no other question waiting."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

_ONE_AT_A_TIME = threading.Lock()


@dataclass(frozen=True)
class Outcome:
    """What running a command line gave: the exit code (0 ok, 1 a check failed, 2 bad input), the report the
    command would print (None when it refused), the one line it would write on stderr (None when it ran)."""

    code: int
    report: Any = None
    error: str | None = None


@cache
def command_group():
    """The click group of every command (typer builds it once; building it per run costs ~60 ms)."""
    import typer.main

    from llmcalc.cli import commands
    from llmcalc.cli.app import app

    commands()  # every command module loaded and registered
    return typer.main.get_command(app)


def invoke(args: list[str]) -> Outcome:
    """Run `args` (the words after `llmcalc`, the command first) as the command line does, keeping its report."""
    from llmcalc.cli import refusal
    from llmcalc.cli.app import app
    from llmcalc.cli.options import kept_reports

    hub_first(args)
    with _ONE_AT_A_TIME:
        group = command_group()
        try:
            with kept_reports() as kept:
                code = group.main(args=list(args), prog_name="llmcalc", standalone_mode=False)
        except Exception as e:
            refused = refusal(e, app, list(args))
            if refused is None:
                raise
            return Outcome(code=refused[0], error=refused[1] or "give a command")
    return Outcome(code=code if isinstance(code, int) else 0, report=kept[-1] if kept else None)


def hub_first(args: list[str]) -> None:
    """Fetch each `--hf-model` of `args` into the Hub cache, outside the lock: the run then reads it from the cache,
    or meets the reason it failed (llmcalc/inputs/hub.py keeps an unreachable Hub's for a minute); any refusal is
    the run's to report, in its own words."""
    from llmcalc.errors import UserError
    from llmcalc.inputs.hub import fetch

    for i, word in enumerate(args):
        ref = word.split("=", 1)[1] if word.startswith("--hf-model=") else \
            args[i + 1] if word == "--hf-model" and i + 1 < len(args) else None
        if ref is not None:
            try:
                fetch(ref)
            except UserError:
                pass
