"""Scenario files for `llmcalc run`: named scenarios, each one command with its options, and defaults shared by
all. Read with the safe loader under the bounds of every file (llmcalc/inputs/files.py: at most 1 MiB, 100,000
values, 32 levels, every number finite, no key twice in one mapping) and checked for shape here; the options
themselves are the command's, checked by the command (the CLI turns them into its arguments).

    defaults: {preset: llama3-8b, gpu: h100-sxm}
    scenarios:
      - name: short
        command: latency
        options: {batch: 1, seq: 1024, gen: 128}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmcalc.errors import UserError, clip

MAX_SCENARIOS = 1_000
"""Most scenarios one file holds (each is one closed-form command: well under a second)."""
MAX_MODELS = 2_000
"""Most models the scenarios of one file name in all (a `compare` of 60 presets is 60; each model's figures take a
few milliseconds, a `compare` row of every attention variant of DeepSeek-V3 about 0.1 s)."""
MODEL_KEYS = ("preset", "config", "hf_config", "hf_model")
MAX_NAME_CHARS = 200
"""Longest scenario name."""
EXAMPLE = "docs/commands/run.md"
TOP_KEYS = ("defaults", "scenarios")
SCENARIO_KEYS = ("name", "command", "options")


@dataclass(frozen=True)
class Scenario:
    """One scenario: its place in the file (from 1), its name, its command and its options as written."""

    index: int
    name: str
    command: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """How an error names it: scenario 3 "long kv"."""
        return f"scenario {self.index} {_quoted(self.name)}"


@dataclass(frozen=True)
class ScenarioFile:
    """A scenario file read: the defaults (option name ↦ value) and the scenarios, in the file's order."""

    path: Path
    defaults: dict[str, Any]
    scenarios: list[Scenario]


def _quoted(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unknown(key: object, known: tuple[str, ...], where: str) -> UserError:
    import difflib

    near = difflib.get_close_matches(str(key), known, n=1)
    hint = f"did you mean {near[0]}? Rename it" if near else f"it holds only {', '.join(known)}; remove it"
    return UserError(f"{where}: unknown field {clip(str(key))!r}; {hint}")


def _options(value: Any, where: str) -> dict[str, Any]:
    """A mapping of option names (text) to values; None (an empty `options:`) is no options."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: a {type(value).__name__}, not a mapping; write option: value pairs, e.g. "
                        "{batch: 8, seq: 4k}")
    for key in value:
        if not isinstance(key, str):
            raise UserError(f"{where}: option name {key!r} is not text; write the option's name, e.g. batch")
    return dict(value)


def _scenario(index: int, entry: Any, where: str) -> Scenario:
    """The scenario at `index` (from 1) of the file, its shape checked."""
    at = f"{where}: scenario {index}"
    if not isinstance(entry, dict):
        raise UserError(f"{at}: a {type(entry).__name__}, not a mapping; give name, command and options")
    for key in entry:
        if key not in SCENARIO_KEYS:
            raise _unknown(key, SCENARIO_KEYS, at)
    name, command = entry.get("name"), entry.get("command")
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{at}: name: {'missing' if name is None else f'{name!r} is not a name'}; give each "
                        "scenario a name (text)")
    if len(name) > MAX_NAME_CHARS:
        raise UserError(f"{at}: name: {len(name):,} characters; give at most {MAX_NAME_CHARS}")
    at = f"{where}: scenario {index} {_quoted(name)}"
    if not isinstance(command, str) or not command.strip():
        raise UserError(f"{at}: command: {'missing' if command is None else f'{command!r} is not a command'}; give "
                        "the command to run, e.g. command: kv")
    return Scenario(index, name, command.strip(), _options(entry.get("options"), f"{at}: options"))


def load_scenarios(path: Path) -> ScenarioFile:
    """The scenario file at `path`: a mapping of `scenarios` (a list of 1 to MAX_SCENARIOS mappings, each with
    a unique `name`, a `command` and optional `options`) and optional `defaults`."""
    from llmcalc.inputs.files import read_yaml

    where = f"scenario file {path}"
    data = read_yaml(path, "scenario file")
    if not isinstance(data, dict):
        got = "empty" if data is None else f"a {type(data).__name__}"
        raise UserError(f"{where}: {got}, not a mapping; give scenarios: with a list of scenarios (see {EXAMPLE})")
    for key in data:
        if key not in TOP_KEYS:
            raise _unknown(key, TOP_KEYS, where)
    entries = data.get("scenarios")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{where}: scenarios: {'missing' if entries is None else 'not a list of scenarios'}; give a "
                        f"list of scenarios, each with name, command and options (see {EXAMPLE})")
    if len(entries) > MAX_SCENARIOS:
        raise UserError(f"{where}: {len(entries):,} scenarios, more than {MAX_SCENARIOS:,}; split the file")
    scenarios = [_scenario(i, entry, where) for i, entry in enumerate(entries, 1)]
    seen: dict[str, int] = {}
    for s in scenarios:
        if s.name in seen:
            raise UserError(f"{where}: {s.label}: the name of scenario {seen[s.name]} too; give each scenario a "
                            "name of its own")
        seen[s.name] = s.index
    defaults = _options(data.get("defaults"), f"{where}: defaults")
    models = sum(_models(s.options, defaults) for s in scenarios)
    if models > MAX_MODELS:
        raise UserError(f"{where}: its scenarios name {models:,} models in all, more than {MAX_MODELS:,} (each "
                        "`preset` in a list counts); split the file")
    return ScenarioFile(path, defaults, scenarios)


def _models(options: dict[str, Any], defaults: dict[str, Any]) -> int:
    """The models a scenario names (its own model options, else the defaults'): a list counts each item."""
    given = {k: options[k] for k in MODEL_KEYS if k in options} or {k: defaults[k] for k in MODEL_KEYS
                                                                      if k in defaults}
    return sum(len(v) if isinstance(v, list) else 1 for v in given.values())
