"""What the page asks and what it is answered: a question is a command line (the words after `llmcalc`) and,
when the model was pasted rather than named, that file's name and text. It is checked here (a command the page
offers, options the page shows, no path but the pasted file's), run by the command line's own parser and
function in this process (llmcalc/cli/invoke.py), and answered with the report as --format json writes it, or
the command line's one-line error and the option it names. Nothing is computed or worded here.

Bounds: a question is at most MAX_WORDS words of MAX_WORD characters and one file of MAX_FILE_BYTES; the
server caps the request at MAX_REQUEST_BYTES before it is parsed."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

PAGE_COMMANDS = ("params", "kv", "memory", "flops", "latency", "fit", "compare", "sweep", "serve", "plan", "train",
                 "explain")
"""The page's views, in its order: each the command of that name."""
LISTS = ("presets", "gpus")
"""Commands the page asks for its pickers (the model and GPU presets)."""
MODEL_FILE_OPTIONS = ("--config", "--hf-config")
"""The options that name a model's file: on the page, only the pasted file's name."""
NOT_ON_PAGE_PANELS = ("Output",)
"""Help panels whose options the page does not offer: the output format, units and files are the page's own."""
NOT_ON_PAGE = ("--calibration", "--trace")
"""Options that read a file of the user's: the page reads no file but a pasted model."""
MAX_WORDS = 200
MAX_WORD = 1000
MAX_FILE_BYTES = 1 << 20
"""The largest pasted file (the command line's bound on a spec or config file, llmcalc/inputs/files.py)."""
MAX_REQUEST_BYTES = 2 * MAX_FILE_BYTES
_PATHLIKE = re.compile(r"[/\\]|\.(ya?ml|json)$", re.IGNORECASE)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


class BadQuestion(ValueError):
    """A request the page would not send: answered 400 with its one line."""


@dataclass(frozen=True)
class Question:
    """A command line and the pasted model file it names (name, text), if any."""

    argv: tuple[str, ...]
    file: tuple[str, str] | None = None

    @property
    def command_line(self) -> str:
        """The command a user would type for the same answer (the table rather than JSON)."""
        return shlex.join(("llmcalc", *self.argv))


def question(body: Any) -> Question:
    """The Question a request's JSON body holds: {"argv": [words], "file": {"name": …, "text": …}} (file
    optional). Raises BadQuestion, one line, for anything the page would not send."""
    if not isinstance(body, dict) or set(body) - {"argv", "file"}:
        raise BadQuestion('give a JSON object {"argv": [words], "file": {"name": ..., "text": ...}}')
    argv = body.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(w, str) for w in argv):
        raise BadQuestion("argv: give a list of words, the command first")
    if len(argv) > MAX_WORDS or any(len(w) > MAX_WORD for w in argv):
        raise BadQuestion(f"argv: at most {MAX_WORDS} words of {MAX_WORD} characters")
    file = body.get("file")
    if file is not None:
        if (not isinstance(file, dict) or set(file) != {"name", "text"}
                or not all(isinstance(file[k], str) for k in file)):
            raise BadQuestion('file: give {"name": "config.json", "text": "..."}')
        if not file["name"].strip() or len(file["name"]) > 200:
            raise BadQuestion("file: give it a name of 1 to 200 characters")
        if len(file["text"].encode()) > MAX_FILE_BYTES:
            raise BadQuestion(f"file: more than {MAX_FILE_BYTES:,} bytes; a config.json or spec is a few KB")
        file = (file["name"], file["text"])
    command = argv[0]
    if command not in PAGE_COMMANDS + LISTS:
        raise BadQuestion(f"argv: {command!r} is not a command of the page; give one of {', '.join(PAGE_COMMANDS)}")
    _check_options(command, argv[1:], file)
    return Question(tuple(argv), file)


def _check_options(command: str, words: list[str], file: tuple[str, str] | None) -> None:
    """Every option one the page offers for `command`, no value naming a file but the pasted one."""
    options = {o["flag"]: o for o in page_options(command)}
    offers = set(options) | {o["off"] for o in options.values() if o["off"]}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") or (word.startswith("-") and not _number(word)):
            flag = word.split("=", 1)[0]
            if flag not in offers:
                raise BadQuestion(f"argv: {flag} is not an option the page offers for {command}")
            option = options.get(flag)
            if option is not None and not option["is_flag"]:
                value = word.split("=", 1)[1] if "=" in word else (words[i + 1] if i + 1 < len(words) else "")
                i += "=" not in word
                _check_value(flag, value, file)
        i += 1


def _number(word: str) -> bool:
    return bool(re.fullmatch(r"-\d[\d.,kmgKMG_e+-]*", word))


def _check_value(flag: str, value: str, file: tuple[str, str] | None) -> None:
    if flag in MODEL_FILE_OPTIONS:
        if file is None or value != file[0]:
            raise BadQuestion(f"argv: {flag} names a file; the page reads only the pasted file (file.name)")
    elif flag != "--hf-model" and _PATHLIKE.search(value):
        raise BadQuestion(f"argv: {flag} {value[:60]!r} looks like a file; the page takes preset names, not paths")


def page_options(command: str) -> list[dict[str, Any]]:
    """The options the page offers for `command`, as its form draws them: flag, off (a switch's other form),
    name, help, panel, metavar, is_flag, default, choices, multiple."""
    from llmcalc.cli.invoke import command_group

    out = []
    for p in command_group().commands[command].params:
        if p.param_type_name != "option" or getattr(p, "rich_help_panel", None) in NOT_ON_PAGE_PANELS:
            continue
        flag = next((o for o in p.opts if o.startswith("--")), None)
        if flag is None or flag in NOT_ON_PAGE:
            continue
        off = next((o for o in p.secondary_opts if o.startswith("--")), None)
        default = p.default if isinstance(p.default, (str, int, float, bool)) else None
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


def page_schema() -> dict[str, Any]:
    """Every view of the page: its command's help line, arguments and options."""
    from llmcalc.cli.invoke import command_group

    group = command_group()
    return {"commands": [{"name": c, "help": _plain((group.commands[c].help or "").split("\n\n")[0]),
                          "arguments": page_arguments(c), "options": page_options(c)} for c in PAGE_COMMANDS]}


def answer(q: Question) -> dict[str, Any]:
    """Run the question's command line: {"code", "command_line", "report" (what --format json writes) or
    "error" (the command line's one line) and "field" (the first option of the command it names, the pasted file's option for a problem in it, or
    null)}."""
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
