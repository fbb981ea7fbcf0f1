"""The `llmcalc run` command: the named scenarios of a scenario file, each one command with its options, in one
process and one output.

Each scenario runs through its command's own typer command: its options become the argument list the command
line would give (`batch: 8` → `--batch 8`, `flash: false` → `--no-flash`), parsed by the command's own parser
(its defaults, conversions and errors) and passed to the command's own function, whose report is kept instead of
printed (options.kept_reports). Nothing of a command is written again here.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from llmcalc.cli.app import app, command
from llmcalc.cli.options import OUTPUT, FormatOpt, UnitsOpt, _opt
from llmcalc.errors import Unread, UserError

MODEL_OPTIONS = ("preset", "config", "hf_config", "hf_model")
"""One model option: a scenario that names one of them takes none of the defaults' (e.g. its own config)."""
WHOLE_RUN = ("format", "units")
"""Options of the run, not of a scenario."""
REFUSED = {
    "sweep": "a grid of its own and a plot file; give its points as scenarios",
    "serve": "a simulation of up to 100,000 requests; run it on its own",
    "plan": "a search with simulations; run it on its own",
    "measured": "it reads result files and simulates each run; run it on its own",
    "validate": "it builds the torch reference model; run it on its own",
    "calibrate": "it measures a GPU and writes files; run it on its own",
    "gpus": "it lists the GPU presets; run it on its own",
    "presets": "it lists the model presets; run it on its own",
    "schema": "it prints JSON Schemas; run it on its own",
    "run": "scenario files do not nest; list the scenarios in one file",
}
"""The commands a scenario may not name, and why."""


class ScenarioError(UserError):
    """A bad scenario: where (the file, the scenario and its command) and the problem, one line naming the option
    and the fix; --keep-going reports the problem in the output."""

    def __init__(self, at: str, problem: str) -> None:
        super().__init__(f"{at}: {problem}")
        self.problem = problem


@command(rank=200, help=(
    "The named scenarios of a YAML file, each one command (params, kv, flops, memory, latency, fit, moe, train, "
    "mfu, scale, explain, compare) with its options, in one process: one table, JSON, YAML or CSV of them all."))
def run(
    scenarios: Annotated[Path, typer.Argument(
        help="The scenario file: defaults, and scenarios each with a name, a command and its options "
             "(docs/commands/run.md).", show_default=False, metavar="SCENARIOS.yaml")],
    keep_going: Annotated[bool, _opt(
        "--keep-going", help="Run the good scenarios when some are bad: each bad one is reported (stderr, and its "
        "error in the output) and the exit code is 2. Default: the first bad scenario stops the run before any "
        "output.", panel=OUTPUT)] = False,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    from llmcalc.inputs.scenarios import load_scenarios
    from llmcalc.render import emit
    from llmcalc.reports.run import SCENARIO_REPORTS, ScenarioResult

    file = load_scenarios(scenarios)
    where = f"scenario file {file.path}"
    commands = _commands(sorted({s.command for s in file.scenarios if s.command in SCENARIO_REPORTS}))
    options = {name: _options(c) for name, c in commands.items()}
    defaults = _defaults(file.defaults, options, where)
    parsed: list[Parsed | ScenarioError] = []
    for s in file.scenarios:  # every scenario parsed before any runs
        try:
            parsed.append(_parse(s, commands, options, defaults, where))
        except ScenarioError as e:
            if not keep_going:
                raise
            parsed.append(e)
    results, failed, checks = [], 0, 0
    for s, p in zip(file.scenarios, parsed, strict=True):
        try:
            if isinstance(p, ScenarioError):
                raise p
            report, code = _evaluate_over_defaults(s, p, commands, options, defaults, where)
        except ScenarioError as e:
            if not keep_going:
                raise
            from llmcalc.cli import one_line

            sys.stderr.write(f"error: {one_line(str(e))}\n")
            results.append(ScenarioResult(index=s.index, name=s.name, command=s.command, error=e.problem))
            failed += 1
            continue
        checks += code != 0
        results.append(ScenarioResult(index=s.index, name=s.name, command=s.command, report=report))
    emit(results, format, units)
    if failed or checks:
        raise typer.Exit(2 if failed else 1)


@dataclass(frozen=True)
class Parsed:
    """A scenario parsed by its command's parser, ready to run: `at` names it in errors, `words` holds the
    scenario's word for each of the command's fields and flags (kv_dtype, --kv-dtype → kv_dtype)."""

    at: str
    command: Any
    ctx: Any
    words: dict[str, str]
    defaulted: dict[str, str]
    """Each field the file's defaults gave this scenario ↦ the default's key."""


class _LeaveOut(Exception):
    """A default the scenario's command does not read there (an llmcalc.errors.Unread it raised): `key`."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _commands(names: list[str]) -> dict[str, Any]:
    """name ↦ the typer (click) command object of each command named, its module loaded."""
    from importlib import import_module

    import typer.main

    for name in names:
        import_module(f"llmcalc.cli.{name}")
    group = typer.main.get_command(app)
    return {name: group.commands[name] for name in names}


def _key(name: str) -> str:
    """An option as a scenario names it: its long name, `-` or `_` alike (kv-dtype, kv_dtype)."""
    return name.lstrip("-").replace("-", "_")


def _options(command) -> dict[str, tuple[Any, str | None, bool]]:
    """The options a scenario may give `command`: key ↦ (its parameter, the long flag, whether that flag is a
    flag's off form such as --no-flash, --inference); an argument (compare's variants, explain's topic) by its
    name, with no flag."""
    out: dict[str, tuple[Any, str | None, bool]] = {}
    for p in command.params:
        if p.name in WHOLE_RUN:
            continue
        if p.param_type_name == "argument":
            out[_key(p.name)] = (p, None, False)
            continue
        for flag in p.opts:
            if flag.startswith("--"):
                out[_key(flag)] = (p, flag, False)
        for flag in p.secondary_opts:
            if flag.startswith("--"):
                out[_key(flag)] = (p, flag, True)
    return out


def _normalised(mapping: dict[str, Any], at: str) -> dict[str, tuple[str, Any]]:
    """key ↦ (the name as written, its value); one option written twice (kv-dtype and kv_dtype) refused."""
    out: dict[str, tuple[str, Any]] = {}
    for name, value in mapping.items():
        key = _key(name)
        if key in out:
            raise ScenarioError(at, f"{out[key][0]!r} and {name!r} name one option; keep one")
        if key in WHOLE_RUN:
            raise ScenarioError(at, f"{name}: the output of the whole run, given to llmcalc run itself; remove "
                                    "it here")
        out[key] = (name, value)
    return out


def _defaults(defaults: dict[str, Any], options: dict[str, dict], where: str) -> dict[str, tuple[str, Any]]:
    """The defaults, each an option of at least one command the file runs."""
    import difflib

    out = _normalised(defaults, f"{where}: defaults")
    known = set().union(*options.values()) if options else set()
    for key, (name, _) in out.items():
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {near[0]}?" if near else "check the spelling, or remove it"
            raise ScenarioError(f"{where}: defaults", f"{name}: an option of none of the commands the file "
                                f"runs ({', '.join(options) or 'none'}); {hint}")
    return out


def _argv(name: str, value: Any, param, flag: str | None, off: bool, at: str) -> tuple[list[str], list[str]]:
    """(options, arguments) of the command line for one option of a scenario; None gives nothing (the
    command's default)."""
    if value is None:
        return [], []
    if flag is not None and getattr(param, "is_flag", False):
        if not isinstance(value, bool):
            raise ScenarioError(at, f"{name}: {value!r} is not true or false; give {name}: true or {name}: false")
        if not param.secondary_opts:
            if not value and param.default:
                raise ScenarioError(at, f"{name}: it cannot be turned off; remove it")
            return ([flag] if value else []), []
        on = next(o for o in param.opts if o.startswith("--"))
        other = on if off else param.secondary_opts[0]
        return [flag if value else other], []
    many = getattr(param, "multiple", False) or param.nargs == -1
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not many:
        raise ScenarioError(at, f"{name}: a list; it takes one value")
    if not values:
        return [], []
    texts = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            shown = "true or false" if isinstance(v, bool) else f"a {type(v).__name__}"
            raise ScenarioError(at, f"{name}: {shown} is not a value of this option; give a number or text, as "
                                    "on the command line")
        texts.append(v if isinstance(v, str) else repr(v) if isinstance(v, float) else str(v))
    if flag is None:
        return [], texts
    return [x for t in texts for x in (flag, t)], []


def _parse(s, commands: dict, options: dict, defaults: dict, where: str, left_out: frozenset[str] = frozenset()):
    """The scenario `s`, its options over the defaults (but those `left_out`), parsed by its command's own parser;
    a ScenarioError names the scenario, the option and the fix."""
    import difflib

    from llmcalc.reports.run import SCENARIO_REPORTS

    at = f"{where}: {s.label}"
    if s.command not in SCENARIO_REPORTS:
        runnable = ", ".join(SCENARIO_REPORTS)
        if s.command in REFUSED or _is_command(s.command):
            why = f" ({REFUSED[s.command]})" if s.command in REFUSED else ""
            raise ScenarioError(at, f"command {s.command} is not run from a scenario file{why}; "
                                    f"a scenario runs one of {runnable}")
        near = difflib.get_close_matches(s.command, list(SCENARIO_REPORTS), n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise ScenarioError(at, f"command {s.command!r} is not a command; {hint}give one of {runnable}")
    at = f"{at} ({s.command})"
    command, known = commands[s.command], options[s.command]
    own = _normalised(s.options, at)
    for key, (name, _) in own.items():
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {near[0]}? Rename it" if near else f"{s.command} takes {', '.join(sorted(known))}"
            raise ScenarioError(at, f"{name}: not an option of {s.command}; {hint}")
    mine = {known[k][0].name: k for k in own}
    if len(mine) < len(own):  # train and inference, flash and no-flash
        twice = [k for k in own if mine[known[k][0].name] != k][0]
        raise ScenarioError(at, f"{own[mine[known[twice][0].name]][0]} and {own[twice][0]} set one option; keep one")
    mine_model = any(k in own for k in MODEL_OPTIONS)
    merged = {k: (f"{name} (from defaults)", v) for k, (name, v) in defaults.items()
              if k in known and known[k][0].name not in mine and not (mine_model and k in MODEL_OPTIONS)
              and k not in left_out}
    defaulted = {known[k][0].name: k for k in merged}
    merged.update(own)
    argv, arguments = [], []
    for key, (name, value) in merged.items():
        param, flag, off = known[key]
        o, a = _argv(name, value, param, flag, off, at)
        argv += o
        arguments += a
    words = {p.name: k for k, (p, _, off) in known.items() if not off}  # a field ↦ the scenario's word for it
    words |= {known[k][0].name: name for k, (name, _) in merged.items()}
    words |= {flag: k for k, (_, flag, _) in known.items() if flag}
    try:
        ctx = command.make_context(s.command, argv + (["--", *arguments] if arguments else []))
    except Exception as e:
        if not (hasattr(e, "format_message") and hasattr(e, "exit_code")):
            raise
        raise ScenarioError(at, _usage_error(e, words)) from None
    return Parsed(at, command, ctx, words, defaulted)


def _is_command(name: str) -> bool:
    """Whether `name` is a command of llmcalc (one REFUSED gives no reason for: every command is loaded)."""
    from llmcalc.cli import commands

    return name in commands()


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _worded(e: UserError, words: dict[str, str]) -> str:
    """A command's error in the scenario's words: a field it marks (`tp`) or a flag it names (--gpu) written as
    the scenario's option (tp, gpu)."""
    return FLAG.sub(lambda m: words.get(m[0], m[0]), e.worded(words.get))


def _usage_error(e: Exception, words: dict[str, str]) -> str:
    """The command parser's error as a scenario's: the option as the scenario names it, and the fix."""
    param = getattr(e, "param", None)
    message = getattr(e, "message", None) or e.format_message()
    if param is None:
        return FLAG.sub(lambda m: words.get(m[0], m[0]), message)
    if hasattr(param.type, "choices"):
        fix = "use one of the listed values"
    elif "give" in message:
        fix = ""
    else:
        fix = "give a value as the command line takes it"
    return f"{words.get(param.name, param.name)}: {message.rstrip('.')}" + (f"; {fix}" if fix else "")


def _evaluate_over_defaults(s, p: Parsed, commands: dict, options: dict, defaults: dict, where: str):
    """_evaluate, leaving out each default the command does not read in this scenario (a shared default such as
    `recompute` given to an inference `memory` too) and running it again: a scenario's own option that nothing
    reads is refused, a default only applies where it does something."""
    left_out: set[str] = set()
    while True:
        try:
            return _evaluate(p)
        except _LeaveOut as e:
            left_out.add(e.key)
            p = _parse(s, commands, options, defaults, where, frozenset(left_out))


def _evaluate(p: Parsed):
    """Run the parsed scenario through its command's own function: (its report, the command's exit code); a
    default it does not read raises _LeaveOut."""
    from llmcalc.cli.options import kept_reports

    code = 0
    try:
        with kept_reports() as kept, p.ctx:
            try:
                p.command.invoke(p.ctx)
            except typer.Exit as e:  # explain: a total does not match (exit 1), after its report
                code = e.exit_code
    except Unread as e:
        if e.field in p.defaulted:
            raise _LeaveOut(p.defaulted[e.field]) from None
        raise ScenarioError(p.at, _worded(e, p.words)) from None
    except UserError as e:
        raise ScenarioError(p.at, _worded(e, p.words)) from None
    except Exception as e:
        from pydantic import ValidationError

        if isinstance(e, ValidationError):  # a model built from the options
            from llmcalc.errors import validation_message

            raise ScenarioError(p.at, _worded(UserError(validation_message(e)), p.words)) from None
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            raise ScenarioError(p.at, _usage_error(e, p.words)) from None
        raise
    return kept[-1], code
