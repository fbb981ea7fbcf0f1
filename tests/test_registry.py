"""No list of the commands is kept by hand: each command's module registers it with its place in the help
(llmcalc/cli/app.py: command), each report names the command that prints it (Report.printed_by), each table
renderer names the report types it draws (render/report_tables.py: renders). A new command is its module, its
report and its renderer."""

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from llmcalc.cli import COMMANDS, commands, load_commands, run
from llmcalc.errors import UserError
from llmcalc.render.report_tables import TABLES
from llmcalc.reports.run import SCENARIO_REPORTS
from llmcalc.reports.schema import COMMAND_REPORTS


def test_the_commands_are_read_from_their_modules_in_help_order():
    names = commands()
    assert names == COMMANDS
    assert names[:4] == ("params", "kv", "flops", "memory") and names[-3:] == ("run", "schema", "ui")
    assert len(set(names)) == len(names)
    group = typer.main.get_command(load_commands(["--help"]))
    assert tuple(group.list_commands(None)) == names


def test_one_command_is_loaded_alone():
    """The command named first is found by its module, without loading the others (a fresh process)."""
    code = ("import sys; from llmcalc.cli import load_commands; app = load_commands(['moe', '--help'])\n"
            "print(sorted(c.name or c.callback.__name__ for c in app.registered_commands))\n"
            "print(sorted(m for m in sys.modules if m.startswith('llmcalc.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[1]).stdout.splitlines()
    assert out[0] == "['moe']"
    assert set(eval(out[1])) <= {"llmcalc.cli.app", "llmcalc.cli.groups", "llmcalc.cli.help", "llmcalc.cli.moe",
                                 "llmcalc.cli.options"}


def test_every_report_a_command_prints_names_a_command_and_has_a_table():
    assert set(COMMAND_REPORTS) <= set(commands())
    assert set(SCENARIO_REPORTS) <= set(COMMAND_REPORTS)
    for command, forms in COMMAND_REPORTS.items():
        for form in forms:
            model = getattr(form, "__args__", (form,))[0]  # list[Row] draws by its row type
            assert model.__name__ in TABLES, (command, model)


def test_a_command_run_does_not_take_is_refused_as_one(tmp_path, monkeypatch):
    """A command with no reason given for not running from a scenario file is still named a command."""
    monkeypatch.delitem(run.REFUSED, "gpus")
    file = tmp_path / "scenarios.yaml"
    file.write_text("scenarios:\n  - name: listing\n    command: gpus\n", encoding="utf-8")
    app = load_commands(["run"])
    with pytest.raises(UserError, match=r"command gpus is not run from a scenario file; a scenario runs one of "):
        app(["run", str(file)], standalone_mode=False)
