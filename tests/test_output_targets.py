"""Where results go: every file target is checked before any work (llmcalc/cli/files.py: check_outputs) and
written whole through a temporary file; stdout that cannot be written is one line, not a traceback; and every
JSON, YAML or CSV the CLI writes is strict (no NaN or Infinity), the inputs that would overflow refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from llmcalc.errors import UserError

TIMEOUT = 300
LINUX = pytest.mark.skipif(not Path("/proc/self").is_dir() or not Path("/dev/full").is_char_device(),
                           reason="needs Linux's /proc and /dev/full")


def run_in(folder: Path, *args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmcalc", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=folder, timeout=TIMEOUT)


def one_line(r: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, one line on stderr holding each of `needles`, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def files_in(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# ---- calibrate --out / --raw: refused before any measurement, nothing left behind ----

CALIBRATE = ["calibrate", "--device", "cpu", "--quick"]


@pytest.mark.parametrize("args, needles", [
    (["--out", ".", "--force", "--raw", "raw.json"], ["--out", "folder"]),
    (["--out", "nosuch/x.yaml", "--raw", "raw.json"], ["--out", "does not exist"]),
    (["--out", "x.yaml", "--raw", "x.yaml"], ["--out", "--raw", "both name"]),
    (["--out", "x.yaml", "--raw", "./sub/../x.yaml", "--force"], ["--out", "--raw", "both name"]),
    (["--raw", "raw.json", "--out", "mine.yaml"], ["--out", "exists", "--force"]),
])
def test_calibrate_refuses_a_bad_target_before_measuring(tmp_path, args, needles):
    (tmp_path / "sub").mkdir()
    (tmp_path / "mine.yaml").write_text("my own\n")
    before = files_in(tmp_path)
    one_line(run_in(tmp_path, *CALIBRATE, *args), *needles)
    assert files_in(tmp_path) == before  # no --raw checkpoint, nothing overwritten


@LINUX
def test_calibrate_refuses_an_unwritable_place_even_with_force(tmp_path):
    one_line(run_in(tmp_path, *CALIBRATE, "--out", "/proc/llmcalc-profile.yaml", "--raw", "raw.json", "--force"),
             "--out", "cannot create a file in /proc")
    assert files_in(tmp_path) == {}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_calibrate_refuses_a_pipe_or_device_even_with_force(tmp_path):
    """Not a regular file (a pipe here; /dev/full alike): never renamed over, even with --force. (A pipe in the
    test's own folder: the code before this check, run as root, replaced /dev/full itself with a file.)"""
    os.mkfifo(tmp_path / "pipe.yaml")
    one_line(run_in(tmp_path, *CALIBRATE, "--out", "pipe.yaml", "--raw", "raw.json", "--force"), "--out",
             "not a regular file")
    assert stat.S_ISFIFO((tmp_path / "pipe.yaml").stat().st_mode) and files_in(tmp_path) == {}


# ---- --plot (sweep, serve): the same checks; written only with --force over a file ----

SWEEP = ["sweep", "-p", "gpt2", "--seq", "1k,2k", "--gpu", "h100-sxm", "-f", "json"]
SERVE = ["serve", "-p", "gpt2", "--gpu", "h100-sxm", "--rate", "5", "--requests", "20", "-f", "json"]


@pytest.mark.parametrize("command", [SWEEP, SERVE], ids=["sweep", "serve"])
def test_plot_over_a_users_file_needs_force(tmp_path, command):
    pytest.importorskip("matplotlib")
    mine = b"\x89PNG my own figure"
    (tmp_path / "fig.png").write_bytes(mine)
    one_line(run_in(tmp_path, *command, "--plot", "fig.png"), "--plot", "exists", "--force")
    assert files_in(tmp_path) == {"fig.png": mine}
    r = run_in(tmp_path, *command, "--plot", "fig.png", "--force")
    assert r.returncode == 0, r.stderr
    assert set(files_in(tmp_path)) == {"fig.png"}  # no temporary file left beside it
    assert (tmp_path / "fig.png").read_bytes().startswith(b"\x89PNG") and (tmp_path / "fig.png").read_bytes() != mine


@LINUX
@pytest.mark.parametrize("command", [SWEEP, SERVE], ids=["sweep", "serve"])
def test_plot_into_an_unwritable_place_is_refused_before_the_work(tmp_path, command):
    pytest.importorskip("matplotlib")
    r = run_in(tmp_path, *command, "--plot", "/proc/llmcalc-figure.png")
    one_line(r, "--plot", "cannot create a file in /proc")
    assert r.stdout == ""


@pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32", reason="needs symbolic links")
def test_force_onto_a_link_writes_the_file_it_names_and_keeps_the_link(tmp_path):
    """--force onto a link renamed the new file over the link itself: `-o /dev/stdout --force` (stdout redirected
    to a file) replaced /dev/stdout with a regular file and left the redirect empty. The file the link names is
    written now, the link stays a link, and a plot's format follows the name given (the link's .png)."""
    pytest.importorskip("matplotlib")
    (tmp_path / "target.bin").write_bytes(b"old")
    (tmp_path / "fig.png").symlink_to("target.bin")
    r = run_in(tmp_path, *SWEEP, "--plot", "fig.png", "--force")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fig.png").is_symlink() and os.readlink(tmp_path / "fig.png") == "target.bin"
    assert (tmp_path / "target.bin").read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png", "target.bin"]  # no temporary file left


@LINUX
def test_a_link_to_stdout_redirected_to_a_file_gets_the_text(tmp_path):
    out = tmp_path / "out.txt"
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    code = ("from pathlib import Path; from llmcalc.cli.files import check_outputs, write_atomic; "
            f"p = Path({str(link)!r}); check_outputs(True, out=p); write_atomic(p, 'profile\\n')")
    with out.open("w") as f:
        r = subprocess.run([sys.executable, "-c", code], stdout=f, stderr=subprocess.PIPE, text=True,
                           timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "profile\n" and link.is_symlink()


@pytest.mark.parametrize("name, says", [("a" * 300 + ".png", "File name too long"), ("afile/x.png", "Not a directory")])
def test_a_path_the_system_refuses_is_named_by_its_option(tmp_path, name, says):
    pytest.importorskip("matplotlib")
    (tmp_path / "afile").write_text("")
    one_line(run_in(tmp_path, *SWEEP, "--plot", name), "--plot", says)


def test_written_files_are_whole_or_absent_with_plain_permissions(tmp_path):
    from llmcalc.cli.files import write_atomic, written

    target = tmp_path / "out.yaml"
    with pytest.raises(RuntimeError), written(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the work failed")
    assert list(tmp_path.iterdir()) == []
    write_atomic(target, "whole\n")
    assert target.read_text() == "whole\n" and list(tmp_path.iterdir()) == [target]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # as open() would make it, not mkstemp's 0600


def test_check_outputs_names_each_problem(tmp_path):
    from llmcalc.cli.files import check_outputs

    (tmp_path / "a.yaml").write_text("x")
    check_outputs(False, out=tmp_path / "new.yaml", raw=None)
    check_outputs(True, out=tmp_path / "a.yaml")
    cases = [((False,), {"out": tmp_path / "a.yaml"}, "exists"),
             ((True,), {"out": tmp_path}, "folder"),
             ((True,), {"out": tmp_path / "no" / "x.yaml"}, "does not exist"),
             ((True,), {"out": tmp_path / "b.yaml", "raw": tmp_path / "." / "b.yaml"}, "both name")]
    for args, targets, needle in cases:
        with pytest.raises(UserError, match=needle):
            check_outputs(*args, **targets)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml"]  # the probes left nothing


# ---- stdout that cannot be written ----

@LINUX
@pytest.mark.parametrize("fmt", ["json", "table", "csv"])
def test_a_full_disk_on_stdout_is_one_line(tmp_path, fmt):
    with open("/dev/full", "w") as full:
        r = run_in(tmp_path, "kv", "-p", "llama3-8b", "-f", fmt, stdout=full)
    one_line(r, "No space left on device")


# ---- strict JSON, YAML and CSV ----

class _Row(BaseModel):
    seq: int
    seconds: float


class _Leaky(BaseModel):
    model: str = "m"
    rows: list[_Row] = [_Row(seq=1, seconds=1.0), _Row(seq=2, seconds=float("inf"))]


@pytest.mark.parametrize("fmt", ["json", "yaml", "csv"])
def test_a_non_finite_result_never_reaches_the_output(fmt, capsys):
    from llmcalc.render import emit

    with pytest.raises(UserError, match=r"1\.seconds is inf"):
        emit(_Leaky(), fmt)
    assert capsys.readouterr().out == ""


def test_strict_json_refuses_nan():
    from llmcalc.render.formats import strict_json

    assert json.loads(strict_json({"a": [1, 2.5]})) == {"a": [1, 2.5]}
    with pytest.raises(UserError, match="nan"):
        strict_json({"a": {"b": float("nan")}})


GPU = ["--gpu", "h100-sxm"]


@pytest.mark.parametrize("args, flag", [
    (["mfu", "-p", "llama3-8b", *GPU, "--step-time", "5e-324"], "--step-time"),
    (["mfu", "-p", "llama3-8b", *GPU, "--tokens-per-s", "1e308"], "--tokens-per-s"),
    (["mfu", "-p", "llama3-8b", *GPU, "--tokens-per-s", "5e-324"], "--tokens-per-s"),
    (["mfu", "-p", "llama3-8b", "--tokens-per-s", "1000", "--peak-tflops", "5e-324"], "--peak-tflops"),
    (["mfu", "-p", "llama3-8b", "--tokens-per-s", "1e300", "--peak-tflops", "1e6"], "--tokens-per-s"),
    (["scale", "--flops", "1e39", *GPU, "--mfu", "1e-300"], "--mfu"),
    (["scale", "--flops", "1e24", *GPU, "--price", "1e308"], "--price"),
])
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_an_input_that_overflows_the_result_is_named(tmp_path, args, flag, fmt):
    line = one_line(run_in(tmp_path, *args, "-f", fmt), flag)
    assert line.startswith((f"error: {flag}", f"error: Invalid value for '{flag}'")), line


def test_a_report_hands_a_non_finite_float_to_the_renderer_never_a_null(capsys):
    """Pydantic dumps NaN and infinity as null in JSON mode through a wrap serializer (PlanReport has one) unless
    told otherwise: the reports keep them as floats, so the renderer refuses them instead of writing null."""
    from llmcalc.render import emit
    from llmcalc.reports.plan import PlanReport

    r = PlanReport(model="m", gpus=["g"], max_gpus=1, rate=1.0, prompt="1", output="1", slo_ttft_s=None,
                   slo_tpot_s=float("nan"), searched=0, feasible=0, simulated=0, candidates=[], formula="", notes=[])
    for fmt in ("json", "yaml", "csv"):
        with pytest.raises(UserError, match="slo_tpot_s is nan"):
            emit(r, fmt)
    assert capsys.readouterr().out == ""
