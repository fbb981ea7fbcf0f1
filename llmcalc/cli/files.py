"""Files the CLI writes: each target checked before any work (check_outputs), then written whole or not at all
(written, write_atomic). Every command with a file output (calibrate --out/--raw, sweep and serve --plot) goes
through here."""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from llmcalc.errors import Unread, UserError, clip


def check_outputs(force: bool, **targets: Path | None) -> None:
    """Before any work: each target given (field name ↦ path; None: not given) can be written as asked, else a
    UserError naming its field. Refused: a folder, a missing folder, an existing file without `force`, something
    that is not a regular file (a device such as /dev/full, a pipe) even with `force`, a folder this process
    cannot create a file in (a temporary file is made there and removed), two targets that are one file, and a
    target that the command line names as an input too (a spec, a raw file), even with `force`; and `force`
    with no target given, which would overwrite nothing. A link is checked as the file it names."""
    if force and all(path is None for path in targets.values()):
        names = " or ".join(f"`{name}`" for name in targets)
        raise Unread("force", f"`force` overwrites the {names} file when it exists; none is given, so leave `force` "
                              "out")
    seen: dict[str, str] = {}
    for name, path in targets.items():
        if path is None:
            continue
        where = f"`{name}` {path}"
        if str(path) == ".":  # what an empty value ('') reaches here as
            raise UserError(f"`{name}`: an empty name or the folder '.' names no file; give a file path")
        try:
            os.stat(path)
        except FileNotFoundError:
            pass
        except OSError as e:  # a name too long, a loop of links, a folder that is a file
            raise UserError(f"`{name}` {clip(str(path))}: {e.strerror}; give another file path") from None
        if path.is_dir():
            raise UserError(f"{where}: a folder; name a file in it")
        if not path.parent.is_dir():
            raise UserError(f"{where}: folder {path.parent} does not exist; create it or give another path")
        if path.exists() or path.is_symlink():
            if not path.is_file():
                raise UserError(f"{where}: not a regular file (a device, a pipe or a broken link); give a file path")
            if not force:
                raise UserError(f"{where}: the file exists and is left as it is; give another path, or `force` to "
                                "overwrite it")
        real = os.path.realpath(path)  # a link is written through, to the file it names (`written`)
        try:
            fd, probe = tempfile.mkstemp(dir=os.path.dirname(real), prefix=f".{path.name}.", suffix=".probe")
        except OSError as e:
            raise UserError(f"{where}: cannot create a file in {os.path.dirname(real)} ({e.strerror}); give a path "
                            "in a folder you can write") from None
        os.close(fd)
        os.unlink(probe)
        if real in seen:
            raise UserError(f"`{seen[real]}` and `{name}`: both name {real}; give two different files")
        seen[real] = name
    named = Counter(os.path.realpath(t) for t in _argv_values() if os.path.isfile(t))
    for real, name in seen.items():
        if named[real] > 1:  # the target's own value, and the file as an input too
            raise UserError(f"`{name}` {real}: it is also an input of this command and is left as it is, `force` or "
                            "not; write elsewhere")


def _argv_values() -> list[str]:
    """The command line's values: each argument, and the value of each --flag=value."""
    return [a.split("=", 1)[1] if a.startswith("--") and "=" in a else a for a in sys.argv[1:]]


@contextmanager
def written(path: Path) -> Iterator[Path]:
    """A temporary path in `path`'s folder, with its suffix (a plot's format follows it), renamed to `path`
    once the block completes; removed if the block fails: a reader (or a crash) never sees half a file. The
    file gets the permissions a plain open() would give it (the umask's), not mkstemp's owner-only ones. A
    symbolic link is followed: the file it names is replaced, the link is left as it is (/dev/stdout, redirected
    to a file, gets the text; renaming over the link would replace the link itself)."""
    suffix, path = path.suffix, Path(os.path.realpath(path))  # the format is the name's given, not its target's
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{suffix}")
    os.close(fd)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through `written`."""
    with written(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
