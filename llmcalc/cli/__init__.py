"""The `llmcalc` command line: parse, load, compute, render; no arithmetic lives here.

Each command is one module of this package that registers itself on `app` (llmcalc/cli/app.py: `command`);
nothing lists them. main() imports only the module of the command being run, so a call loads that command's
options, costs and report types and no other's; `--help` and unknown commands load every module of the package.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from importlib import import_module

from llmcalc.errors import UserError, clip

HERE = os.path.dirname(__file__)


def load_commands(args: list[str]):
    """The typer app with the commands `args` may run: the one named first; none for `--version` alone (typer
    builds every loaded command before the version is printed, ~60 ms for all of them); else all of them."""
    from llmcalc.cli.app import app

    helping = bool({"-h", "--help"} & set(args))
    if not args or helping:
        from llmcalc.cli.help import help_layout

        help_layout()
    first = next((a for a in args if not a.startswith("-")), None)
    if first is not None and _module(first):
        import_module(f"llmcalc.cli.{first}")
        if first in _registered(app):
            return app
    elif first is None and "--version" in args and not helping:
        return app
    return _load_all(app)


def commands() -> tuple[str, ...]:
    """Every command, in the order `llmcalc --help` lists them."""
    from llmcalc.cli.app import app

    return tuple(_registered(_load_all(app)))


def __getattr__(name: str):
    if name == "COMMANDS":  # commands(), read as a constant
        return commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _module(name: str) -> bool:
    """Whether `name` is a module of this package, a command's or another's (options, groups)."""
    return name.isidentifier() and not name.startswith("_") and os.path.isfile(os.path.join(HERE, f"{name}.py"))


def _registered(app) -> list[str]:
    """The names of the commands registered on `app`, in its order."""
    return [c.name or c.callback.__name__ for c in app.registered_commands]


def _load_all(app):
    """`app` with every command: each module of this package imported, the commands put in their ranks' order."""
    for name in sorted(os.listdir(HERE)):
        if name.endswith(".py") and _module(name[:-3]):
            import_module(f"llmcalc.cli.{name[:-3]}")
    app.registered_commands.sort(key=lambda c: getattr(c.callback, "rank", float("inf")))  # unranked: last
    return app


def main() -> None:
    """Entry point of the `llmcalc` process; it ends in sys.exit. Exit codes: 0 ok, 1 a check failed (validate,
    explain), 2 bad input, or a file or stdout that cannot be written (> /dev/full). User errors are one line
    on stderr.

    The cyclic garbage collector is off while the command runs, and what the run built is frozen before
    the exit: a run leaves next to no cyclic garbage (the largest sweep peaks at the same memory), while
    the collections that importing pydantic, typer and rich triggers, and the one at interpreter exit, each
    walk every object they built: ~15% of `llmcalc kv`'s start-up (docs/performance.md). Pydantic runs without
    plugins (_without_pydantic_plugins)."""
    _without_pydantic_plugins()
    gc.disable()
    try:
        _run()
    finally:
        gc.freeze()  # the exit's collection skips all of it
        gc.enable()


def _without_pydantic_plugins() -> None:
    """Pydantic without plugins for this process: its loader (pydantic.plugin._loader, imported when the first model
    is built) is replaced by one that finds none. The real one imports importlib.metadata and reads the entry
    points of every installed distribution to look for plugins, ~15 ms of every start-up (docs/performance.md);
    no plugin takes part in what llmcalc computes (pydantic's own switch, PYDANTIC_DISABLE_PLUGINS, is read
    only after that import)."""
    if "pydantic.plugin._loader" not in sys.modules:
        loader = types.ModuleType("pydantic.plugin._loader", _without_pydantic_plugins.__doc__)
        loader.get_plugins = tuple  # type: ignore[attr-defined]  # no plugins: ()
        sys.modules[loader.__name__] = loader


def _run() -> None:
    """Run the command named in sys.argv and exit with its code (see main)."""
    if sys.stdout is None:  # started with its standard output closed (>&-): nowhere to write the answer
        _say("error: standard output is closed; give the command somewhere to write (a file or a pipe)\n")
        sys.exit(2)
    for name in ("COLUMNS", "LINES"):  # 0 or 00 is no size (rich divides by it): the terminal's, or 80 × 25
        value = os.environ.get(name, "").strip()
        if value.isascii() and value.isdigit() and int(value) == 0:
            del os.environ[name]
    from llmcalc.render.text import writes_unicode

    for stream in (sys.stdout, sys.stderr):  # an encoding that cannot write ×, Σ or ≈ writes ? (JSON escapes them)
        if stream is not None and not writes_unicode(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    app = None
    try:
        app = load_commands(sys.argv[1:])
        code = app(standalone_mode=False)
        sys.stdout.flush()  # a full disk (> /dev/full) fails here, not in the interpreter's exit
    except OSError as e:
        _io_failed(e)
    except Exception as e:
        refused = refusal(e, app, sys.argv[1:])
        if refused is None:
            raise
        code, line = refused
        if line:  # empty after no-args help was shown
            _say(f"error: {line}\n")
        sys.exit(code)
    sys.exit(code if isinstance(code, int) else 0)


def refusal(e: Exception, app, args: list[str]) -> tuple[int, str] | None:
    """The exit code and the one line (without `error: `) the command line gives for `e`, raised running `args`:
    bad input (a UserError, a model built from the options, a typer/click usage error, which carries exit_code
    and format_message()), each field it marks written as the running command's flag; None for anything else."""
    from pydantic import ValidationError

    if isinstance(e, ValidationError):  # a model built from the options (a file's is named where it is read)
        from llmcalc.errors import validation_message

        e = UserError(validation_message(e))
    if isinstance(e, UserError):
        return 2, one_line(e.worded(_flags(app, args)))
    if hasattr(e, "format_message") and hasattr(e, "exit_code"):
        message = e.format_message()
        return e.exit_code, one_line(f"{' '.join(_usage_hint(e, message).split())} (see --help)") if message else ""
    return None


def _io_failed(e: OSError) -> None:
    """Exit on a failed read or write (the disk full, the reader of a pipe gone): one line on stderr and exit
    2, or, for a closed pipe (| head), nothing and exit 1 as click does; stdout is pointed at /dev/null so the
    interpreter's exit does not fail flushing what is left."""
    import errno
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout closed or not a file
        pass
    if e.errno == errno.EPIPE:
        sys.exit(1)
    where = f"{clip(str(e.filename))}: " if e.filename else "writing the output: "
    fix = {errno.ENAMETOOLONG: "give a shorter name", errno.ENOENT: "check the path",
           errno.EACCES: "check its permissions, or write somewhere that can be written",
           errno.EROFS: "write somewhere that can be written"}.get(e.errno, "free space or write somewhere that can "
                                                                          "be written")
    _say(f"error: {one_line(where + (e.strerror or str(e)))}; {fix}\n")
    sys.exit(2)


def _flags(app, args: list[str]):
    """field ↦ the running command's option for it (`kv_dtype` → --kv-dtype), None where it has none: the
    layers below the CLI name fields in the domain's words (llmcalc/errors.py)."""
    import typer.main

    command = getattr(typer.main.get_command(app), "commands", {}).get(args[0]) if app and args else None
    options = {p.name: next((o for o in p.opts if o.startswith("--")), None) for p in getattr(command, "params", [])}
    given = {a.split("=", 1)[0] for a in args}
    derived = "dp" if args[0] == "train" else "tp"  # train spreads --gpus over replicas (llmcalc.api.train)
    if options.get(derived) and f"--{derived}" not in given and "--gpus" in given:  # gpus / the other degrees
        options[derived] = f"{derived} (from --gpus)"
    return options.get


_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}
"""Every character str.splitlines breaks a line at, as its escape (\\n, \\x1e, \\u2028)."""
LONGEST_WORD = 240
"""Longest run of non-spaces an error line echoes whole: a value of 131,000 characters is shown by its start."""


def one_line(text: str) -> str:
    """A message as one line for a terminal: line breaks (a file name or a YAML key may hold one, of any kind) and
    other control characters (ESC) are escaped, and a word past LONGEST_WORD characters is cut, saying how long it
    was."""
    import re

    from llmcalc.render.text import CONTROLS

    text = text.translate(CONTROLS | _BREAKS)

    def cut(m: re.Match) -> str:
        return f"{m[0][:LONGEST_WORD // 2]}… ({len(m[0]):,} characters)"

    return re.sub(r"\S{%d,}" % (LONGEST_WORD + 1), cut, text)


def _say(line: str) -> None:
    """Write an error line on stderr, if it can be written: exit codes say what happened either way (a closed or
    full stderr must not turn bad input's 2 into the interpreter's 1)."""
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass


def _usage_hint(e: Exception, message: str) -> str:
    """A usage error's message; an unknown command gets the nearest name and the list of commands."""
    import difflib

    message = message.replace("Value error, ", "")
    commands = sorted(getattr(getattr(getattr(e, "ctx", None), "command", None), "commands", None) or [])
    if message.startswith("No such command") and commands and message.count("'") >= 2:
        near = difflib.get_close_matches(message.split("'")[1], commands, n=1)
        hint = f" Did you mean {near[0]!r}?" if near and "Did you mean" not in message else ""
        message = f"{message}{hint} Commands: {', '.join(commands)}."
    return message
