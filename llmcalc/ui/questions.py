"""What the page asks: a question is a command line (the words after `llmcalc`) and, when the model was pasted
rather than named, that file's name and text. A request's body is read into one here and checked against the
commands and options the page offers (given by whoever serves the page: llmcalc/cli/page.py): no option the page
does not show, no path but the pasted file's. Nothing is run here.

Bounds: a question is at most MAX_WORDS words of MAX_WORD characters and one file of MAX_FILE_BYTES; the
server caps the request at MAX_REQUEST_BYTES before it is parsed."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmcalc.errors import clip

MODEL_FILE_OPTIONS = ("--config", "--hf-config")
"""The options that name a model's file: on the page, only the pasted file's name."""
MAX_WORDS = 200
MAX_WORD = 1000
MAX_FILE_BYTES = 1 << 20
"""The largest pasted file (the command line's bound on a spec or config file, llmcalc/inputs/files.py)."""
MAX_REQUEST_BYTES = 2 * MAX_FILE_BYTES
_PATHLIKE = re.compile(r"[/\\]|\.(ya?ml|json)$", re.IGNORECASE)


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


Options = Callable[[str], list[dict[str, Any]]]
"""A command's options as the page offers them (each a dict with `flag`, `off`, `is_flag`, …)."""


def question(body: Any, commands: tuple[str, ...], options: Options) -> Question:
    """The Question a request's JSON body holds: {"argv": [words], "file": {"name": …, "text": …}} (file
    optional), its command one of `commands`, its options among `options(command)`. Raises BadQuestion, one line,
    for anything the page would not send."""
    if not isinstance(body, dict) or set(body) - {"argv", "file"}:
        raise BadQuestion('give a JSON object {"argv": [words], "file": {"name": ..., "text": ...}}')
    argv = body.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(w, str) for w in argv):
        raise BadQuestion("argv: give a list of words, the command first")
    if len(argv) > MAX_WORDS or any(len(w) > MAX_WORD for w in argv):
        raise BadQuestion(f"argv: at most {MAX_WORDS} words of {MAX_WORD} characters")
    _check_text("argv", argv)
    file = body.get("file")
    if file is not None:
        if (not isinstance(file, dict) or set(file) != {"name", "text"}
                or not all(isinstance(file[k], str) for k in file)):
            raise BadQuestion('file: give {"name": "config.json", "text": "..."}')
        if not file["name"].strip() or len(file["name"]) > 200:
            raise BadQuestion("file: give it a name of 1 to 200 characters")
        _check_text("file", [file["name"], file["text"]])
        if len(file["text"].encode()) > MAX_FILE_BYTES:
            raise BadQuestion(f"file: more than {MAX_FILE_BYTES:,} bytes; a config.json or spec is a few KB")
        file = (file["name"], file["text"])
    command = argv[0]
    if command not in commands:
        raise BadQuestion(f"argv: {command!r} is not a command of the page; give one of {', '.join(commands)}")
    _check_options(command, argv[1:], file, options(command))
    return Question(tuple(argv), file)


def _check_text(field: str, texts: list[str]) -> None:
    """Text that UTF-8 can write: JSON's escapes can name a lone surrogate (\\ud800), which no file or reply holds."""
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise BadQuestion(f"{field}: holds a lone surrogate (\\u{ord(text[_bad(text)]):04x}); send valid "
                              "Unicode text") from None


def _bad(text: str) -> int:
    return next(i for i, c in enumerate(text) if 0xD800 <= ord(c) <= 0xDFFF)


def _check_options(command: str, words: list[str], file: tuple[str, str] | None,
                   offered: list[dict[str, Any]]) -> None:
    """Every option one the page offers for `command`, and no value or word naming a file but the pasted one."""
    options = {o["flag"]: o for o in offered}
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
        elif _PATHLIKE.search(word):  # a command's own words (a GPU's name, a variant, a topic) name no file either
            raise BadQuestion(f"argv: {clip(word, 60)!r} looks like a file; the page takes preset names, not paths")
        i += 1


def _number(word: str) -> bool:
    return bool(re.fullmatch(r"-\d[\d.,kmgKMG_e+-]*", word))


def _check_value(flag: str, value: str, file: tuple[str, str] | None) -> None:
    if flag in MODEL_FILE_OPTIONS:
        if file is None or value != file[0]:
            raise BadQuestion(f"argv: {flag} names a file; the page reads only the pasted file (file.name)")
    elif flag != "--hf-model" and _PATHLIKE.search(value):
        raise BadQuestion(f"argv: {flag} {clip(value, 60)!r} looks like a file; the page takes preset names, not paths")
