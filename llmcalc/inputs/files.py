"""Reading the files users and presets hold: YAML or JSON through the safe loader, bounded in size,
depth and aliases; a mapping validated into a Pydantic model with one-line errors."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml

from llmcalc.errors import UserError, clip, plain, validation_message


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The safe loader, reading a number in exponent form without a point (1e-6, 2E5) as the number it is, as YAML
    1.2 and JSON do (YAML 1.1 reads it as a string)."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float",
                              re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
                              list("-+0123456789."))

_PACKAGED = Path(__file__).resolve().parent.parent / "presets"
PRESETS = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "presets"
"""The presets folder: the top-level presets/ of a checkout, mapped into the package as llmcalc/presets/
when a wheel is built (pyproject.toml)."""

MAX_FILE_BYTES = 1 << 20
"""Largest spec, GPU or config file read (a preset is ~1 KB; a Hugging Face config.json a few KB)."""
MAX_DEPTH = 32
"""Deepest nesting of mappings and lists in a file (a spec nests 3 deep); deeper is refused before
it is built, as libyaml's composer recurses per level."""
MAX_NODES = 100_000
"""Most values a file may hold once its aliases are expanded (a "billion laughs" bomb is refused)."""


def check_size(path: Path, what: str, limit: int = MAX_FILE_BYTES, kind: str = "a YAML or JSON file") -> None:
    """A file larger than `limit` bytes, or a device or pipe (/dev/zero, /dev/stdin: reading would
    never end or wait forever), is refused before it is read; the refusal asks for `kind`."""
    import stat

    try:
        mode, size = path.stat().st_mode, path.stat().st_size
    except OSError:
        return  # reading it reports the problem
    if stat.S_ISDIR(mode):
        return
    if not stat.S_ISREG(mode):
        raise UserError(f"{what} {path}: not a regular file (a device or a pipe); give {kind}")
    if size > limit:
        raise UserError(f"{what} {path}: {size:,} bytes, more than {limit:,}; give {kind} of at most that")


DEEP = f"nested more than {MAX_DEPTH} levels deep; flatten it (the files llmcalc reads nest a few levels)"
"""The refusal of a file nested deeper than MAX_DEPTH."""


class _Bound(ValueError):
    """A file over one of the bounds above."""


def _check_events(text: str) -> None:
    """Walk the YAML events (no objects built): nesting depth, values with aliases expanded, an alias inside the
    collection it names (a cycle no reader of the data would leave), and duplicate keys in a mapping. Raises
    _Bound naming the problem; yaml.YAMLError on bad syntax."""
    nodes, sizes, stack = 0, {}, []  # stack: [start count, anchor, keys seen or None, expecting a key]
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
            if stack and stack[-1][2] is not None:
                frame = stack[-1]
                if frame[3] and isinstance(ev, yaml.ScalarEvent):
                    if ev.value in frame[2]:
                        raise _Bound(f"key {clip(ev.value)!r} appears twice in one mapping; keep one")
                    frame[2].add(ev.value)
                frame[3] = not frame[3]
            if isinstance(ev, yaml.AliasEvent) and any(frame[1] == ev.anchor for frame in stack):
                raise _Bound(f"alias *{clip(ev.anchor)} is inside the collection it names (a recursive alias); "
                             "write the values out")
            nodes += sizes.get(ev.anchor, 1) if isinstance(ev, yaml.AliasEvent) else 1
            if nodes > MAX_NODES:
                raise _Bound(f"more than {MAX_NODES:,} values (aliases expanded); write the values out plainly")
        if isinstance(ev, yaml.CollectionStartEvent):
            stack.append([nodes, ev.anchor, set() if isinstance(ev, yaml.MappingStartEvent) else None, True])
            if len(stack) > MAX_DEPTH:
                raise _Bound(DEEP)
        elif isinstance(ev, yaml.CollectionEndEvent):
            start, anchor, _, _ = stack.pop()
            if anchor:
                sizes[anchor] = nodes - start + 1
        elif isinstance(ev, yaml.ScalarEvent) and ev.anchor:
            sizes[ev.anchor] = 1
        if isinstance(ev, yaml.ScalarEvent) and ev.implicit[0] and _BASE_60.match(ev.value):
            line = f" at line {ev.start_mark.line + 1}" if ev.start_mark else ""
            raise _Bound(f"{clip(ev.value)!r}{line} is a base-60 number in YAML 1.1 (1:30 reads as 90); write the "
                         "number plainly, or quote it for text")


_BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
"""YAML 1.1's sexagesimal ints and floats, which the safe loader reads as numbers (1:30 as 90)."""


def read_yaml(path: Path, what: str, text: str | None = None) -> Any:
    """Parse a YAML (or JSON) file with the safe loader; errors become one-line UserErrors. `text`: the file's
    text held in memory (a pasted file), parsed instead of reading `path`, which then only names it."""
    if text is None:
        text = _read_text(path, what)
    try:
        _check_events(text)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except _Bound as e:
        raise UserError(f"{what} {path}: {e}") from None
    except ValueError as e:  # a value the loader cannot convert, e.g. an int of 5,000 digits
        raise UserError(f"{what} {path}: a value cannot be read ({clip(str(e), 50)}); write plain numbers") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or "not valid YAML"
        if "nesting depth" in problem:  # libyaml ≥ 0.2.5 stops at its own depth bound before the events reach ours
            raise UserError(f"{what} {path}: {DEEP}") from None
        if "constructor" in problem:  # e.g. !!python/object: the safe loader builds no objects
            raise UserError(f"{what} {path}: YAML tag refused{at} ({problem}); write plain values, no tags") from None
        raise UserError(f"{what} {path}: malformed YAML{at}: {problem}; fix the syntax") from None
    check_finite(data, f"{what} {path}")
    return data


_DISK_HIDDEN: ContextVar[bool] = ContextVar("disk_hidden", default=False)


@contextmanager
def disk_hidden() -> Iterator[None]:
    """Within the block no name a user gave for a preset is looked up on disk as a folder (named_folder is
    False): a front end whose user names presets only (the web page) answers `--gpu docs` as an unknown GPU
    whether or not the server's working folder holds a folder of that name. Paths llmcalc makes itself (a Hub
    model's folder in the cache) are read as ever."""
    token = _DISK_HIDDEN.set(True)
    try:
        yield
    finally:
        _DISK_HIDDEN.reset(token)


def named_folder(name: str) -> bool:
    """Whether a name given for a preset (a GPU's, an engine's) is a folder there: is_folder, and False under
    disk_hidden."""
    return not _DISK_HIDDEN.get() and is_folder(name)


def is_folder(path: Path | str) -> bool:
    """A folder is there: False also where the name cannot be looked up at all (too long for the file system, no
    permission on a folder above), which reading it then reports as such."""
    try:
        return Path(path).is_dir()
    except OSError:
        return False


def _read_text(path: Path, what: str) -> str:
    """A file's UTF-8 text, bounded in size (check_size), with one-line errors."""
    check_size(path, what)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path}: is a folder; give a YAML file") from None
    except OSError as e:
        raise UserError(f"{what} {clip(str(path))}: cannot read it ({e.strerror or e.__class__.__name__}); give a "
                        "readable UTF-8 file") from None
    except UnicodeDecodeError:
        raise UserError(f"{what} {path}: cannot read it (not UTF-8 text); give a readable UTF-8 file") from None


class KeyTwice(ValueError):
    """A JSON object gives one key twice."""


class TooManyContainers(ValueError):
    """JSON text of more objects and arrays than MAX_CONTAINERS."""


MAX_CONTAINERS = 1 << 20
"""Most JSON objects and arrays one text is parsed with, counted in the text first: each costs Python some 60 bytes
or more for as few as two characters (a 64 MiB file of `{},` took 1.7 GB to refuse). With the 64 MiB files read
(benchmark results, raw timings, a safetensors index), parsing one takes at most about 0.6 GB (measured: 2^20
objects of six numbers, or 64 MiB of numbers in one array); a detailed vLLM result holds one list per request."""
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')


class NestedTooDeep(ValueError):
    """JSON nested past Python's recursion limit."""


def json_loads(text: str, constant=None, number=None) -> Any:
    """JSON text parsed strictly, every refusal a ValueError (JSONDecodeError, a subclass, where the syntax is
    wrong): a key given twice in one object (KeyTwice: json keeps the last; YAML input refuses it too), nesting
    past Python's recursion limit (NestedTooDeep), more objects and arrays than MAX_CONTAINERS
    (TooManyContainers, before parsing), and NaN or ±Infinity unless `constant(token)` returns a value for them.
    `number`: what reads a decimal literal (float; one may refuse a literal that overflows, 1e999)."""
    import json

    def refuse(token: str):
        raise ValueError(f"{token} is not a number JSON allows")

    if len(text) > 2 * MAX_CONTAINERS:  # shorter text cannot hold more (`{}` is two characters)
        containers = sum(_STRINGS.sub("", text).count(c) for c in "{[")
        if containers > MAX_CONTAINERS:
            raise TooManyContainers(f"{containers:,} JSON objects and arrays, more than the {MAX_CONTAINERS:,} a "
                                    "file is read with")

    def pairs(items: list) -> dict:
        out: dict = {}
        for key, value in items:
            if key in out:
                raise KeyTwice(f"key {key!r} is given twice in one object")
            out[key] = value
        return out

    try:
        return json.loads(text, parse_constant=constant or refuse, object_pairs_hook=pairs, parse_float=number)
    except RecursionError:
        raise NestedTooDeep("nested too deeply") from None


def check_finite(data: Any, where: str, unbounded: tuple[str, ...] = ()) -> None:
    """Every number in a parsed file finite: YAML's .inf and .nan, JSON's NaN and Infinity (Python's json reads
    them) and a literal too large for a float (1e999 reads as inf) are refused, naming the field by its dotted
    path. Every YAML and JSON reader calls this, so no non-finite number reaches a model or an output.
    `unbounded`: keys whose values may be infinite (a bound the file's writer leaves open), not read by llmcalc."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:  # depth-first in the file's order: the first bad number is the one named
        at, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{where}: {at or 'value'}: {value} is not a finite number; give a plain number")
        _check_int(value, where, at or "value")
        if isinstance(value, dict):
            for k in value:
                _check_int(k, where, f"{at}: a key" if at else "a key")
            stack.extend(reversed([(f"{at}.{str(k)[:40]}" if at else str(k)[:40], v) for k, v in value.items()
                                   if k not in unbounded]))
        elif isinstance(value, list):
            stack.extend(reversed([(f"{at}[{i}]", v) for i, v in enumerate(value)]))


MAX_INT_BITS = 1024
"""The widest integer a file may hold (about 10^308, the largest float): YAML's 0x, 0o and 0b literals and JSON's
integers are read whole, and one of thousands of digits cannot even be written back in an error."""


def _check_int(value: Any, where: str, at: str) -> None:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise UserError(f"{where}: {at}: an integer of {value.bit_length():,} bits, past any quantity llmcalc reads "
                        f"(at most {MAX_INT_BITS:,} bits, about 10^308); give a plain number")


def validated(cls, data: Any, where: str, example: str):
    """Validate a mapping into the Pydantic model `cls`, naming the field and the fix on error."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of fields, got {type(data).__name__}; see {example}")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, where)) from None
    except UserError as e:  # a rule across fields (a model validator): the file's fields, named as written there
        raise UserError(f"{where}: {plain(str(e))}") from None
