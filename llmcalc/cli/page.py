"""The commands as the web page (llmcalc/ui) asks them: the views it offers, each command's options as its form
draws them (read off the command's own parser), and a question answered by running its command line here
(invoke.py) — the report as --format json writes it, or the command line's one-line error and the option it names.
Nothing is computed or worded here."""

from __future__ import annotations

import re
from typing import Any

from llmcalc.ui.questions import MODEL_FILE_OPTIONS, Question
from llmcalc.ui.questions import question as read_question

PAGE_COMMANDS = ("params", "kv", "memory", "flops", "latency", "fit", "compare", "sweep", "serve", "plan", "train",
                 "explain")
"""The page's views, in its order: each the command of that name."""
LISTS = ("presets", "gpus")
"""Commands the page asks for its pickers (the model and GPU presets)."""
NOT_ON_PAGE = ("--format", "--units", "--bars", "--plot", "--plot-vs", "--force", "--emit", "--candidate",
               "--calibration", "--trace")
"""Options the page does not offer: how a table is printed (format, units, bars: the page draws its own), files
written (plots, launch commands) and files of the user's read (a profile, a trace): the page writes no file and
reads none but a pasted model. What an output option adds to the report (params --bytes, --interval, plan
--timings) is offered."""
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def question(body: Any) -> Question:
    """The Question a request's body holds, checked against the page's commands and their options."""
    return read_question(body, PAGE_COMMANDS + LISTS, page_options)


STATED_DEFAULT = re.compile(r"\bdefault:? ([\w.]+)\)|([\w.-]+) \(default\)")
"""A default an option's help states, where the option's own is None so that leaving it out can be told from
giving it (serve's --prompt: "(default: 1024)", --expert-skew: "...; default 1.64)", memory's --optimizer:
"adamw (default)")."""


def page_options(command: str) -> list[dict[str, Any]]:
    """The options the page offers for `command`, as its form draws them: flag, off (a switch's other form),
    name, help, panel, metavar, is_flag, default, choices, multiple."""
    from llmcalc.cli.invoke import command_group

    out = []
    for p in command_group().commands[command].params:
        if p.param_type_name != "option":
            continue
        flag = next((o for o in p.opts if o.startswith("--")), None)
        if flag is None or flag in NOT_ON_PAGE:
            continue
        off = next((o for o in p.secondary_opts if o.startswith("--")), None)
        default = p.default if isinstance(p.default, (str, int, float, bool)) else None
        if default is None and (stated := STATED_DEFAULT.search(p.help or "")):  # left None to tell "not given"
            default = stated[1] or stated[2]
        out.append({"flag": flag, "off": off, "name": p.name, "help": _plain(p.help or ""),
                    "panel": getattr(p, "rich_help_panel", None) or "Options", "metavar": p.metavar or "",
                    "is_flag": bool(getattr(p, "is_flag", False)), "default": default,
                    "choices": list(getattr(p.type, "choices", None) or []) or None,
                    "multiple": bool(getattr(p, "multiple", False))})
    return out


def page_arguments(command: str) -> list[dict[str, Any]]:
    """The command's arguments (compare's variants, explain's topic): name, help, metavar, many."""
    from llmcalc.cli.invoke import command_group

    return [{"name": p.name, "help": _plain(getattr(p, "help", "") or ""), "metavar": p.metavar or p.name.upper(),
             "many": p.nargs == -1, "required": p.required}
            for p in command_group().commands[command].params if p.param_type_name == "argument"]


def _plain(text: str) -> str:
    return " ".join(text.split())


def schema() -> dict[str, Any]:
    """Every view of the page: its command's help line, arguments and options."""
    from llmcalc.cli.invoke import command_group

    group = command_group()
    return {"commands": [{"name": c, "help": _plain((group.commands[c].help or "").split("\n\n")[0]),
                          "arguments": page_arguments(c), "options": page_options(c)} for c in PAGE_COMMANDS]}


def answer(q: Question) -> dict[str, Any]:
    """Run the question's command line: {"code", "command_line", "report" (what --format json writes) or
    "error" (the command line's one line) and "field" (the first option of the command it names, the pasted
    file's option for a problem in it, or null)}."""
    from llmcalc.cli.invoke import invoke
    from llmcalc.inputs.models import given_files
    from llmcalc.render.formats import report_data

    with given_files(dict([q.file]) if q.file else {}):
        outcome = invoke(list(q.argv))
    out: dict[str, Any] = {"code": outcome.code, "command_line": q.command_line}
    if outcome.error is not None:
        offered = {o["flag"] for o in page_options(q.argv[0])} if q.argv[0] in PAGE_COMMANDS else set()
        named = [f for f in _FLAG.findall(outcome.error) if f in offered]
        if not named and q.file and q.file[0] in outcome.error:  # a problem in the pasted file
            named = [w for w in q.argv if w in MODEL_FILE_OPTIONS]
        return out | {"error": outcome.error, "field": named[0] if named else None}
    return out | {"report": report_data(outcome.report) if outcome.report is not None else None}
