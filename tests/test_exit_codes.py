"""Exit codes through a real process: 0 ok, 1 a check failed (validate, explain), 2 bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import run_cli


def run_patched(patch: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh process after `patch` (Python) ran: a way to make a check fail for real."""
    code = f"import sys\n{patch}\nfrom llmcalc.cli import main\nsys.argv = ['llmcalc', *{list(args)!r}]\nmain()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("args", [["params", "-p", "gpt2"], ["--version"], ["--help"], ["kv", "-h"],
                                  ["fit", "-p", "mixtral-8x7b", "--gpu", "h100-sxm", "--seq", "32768"]])
def test_ok_is_zero(args):
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args", [["params"], ["kv", "-p", "gpt2", "--seq", "4x"], ["explain"], ["nosuch"],
                                  ["latency", "-p", "gpt2"], ["memory", "-p", "gpt2", "--dp", "2"]])
def test_bad_input_is_two(args):
    r = run_cli(*args)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)


@pytest.mark.parametrize("args, line", [
    (["kv", "-p", "llama2-7b", "-p", "mistral-7b"], "--preset: given twice ('llama2-7b', 'mistral-7b'); give it once"),
    (["kv", "-p", "gpt2", "--batch=1", "-b2"], "--batch: given twice ('1', '2')"),
    (["serve", "-p", "gpt2", "--gpu", "h100-sxm", "--slo-ttft", "2", "--slo-ttft", "1"], "--slo-ttft: given twice")])
def test_an_option_of_one_value_given_twice_is_refused(args, line):
    """click keeps the last of an option given twice: `kv -p llama2-7b -p mistral-7b` answered for mistral-7b alone.
    An option that takes several (compare's --preset, plan's --price) still does."""
    r = run_cli(*args)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert line in r.stderr, r.stderr
    assert run_cli("compare", "-p", "llama2-7b", "-p", "mistral-7b").returncode == 0


def test_version_names_the_distribution():
    assert run_cli("--version").stdout.startswith("llmcalc ")


def test_validate_exits_one_when_a_row_fails():
    pytest.importorskip("torch")
    # a tolerance no estimate can meet: the peak-memory row fails, so validate must exit 1
    failing = run_patched("import llmcalc.views.validate as v; v.PEAK_TOLERANCE = -1.0",
                          "validate", "-p", "gpt2", "--batch", "1", "--seq", "16")
    assert failing.returncode == 1, (failing.stdout, failing.stderr)
    assert "1 row(s) fail" in failing.stdout


def test_validate_lora_exits_one_when_a_row_fails():
    pytest.importorskip("torch")
    args = ("validate", "-p", "gpt2", "--train", "--lora", "4", "--batch", "1", "--seq", "16")
    failing = run_patched("import llmcalc.views.validate as v; v.TRAIN_PEAK_TOLERANCE = -1.0", *args)
    assert failing.returncode == 1, (failing.stdout, failing.stderr)
    assert "1 row(s) fail" in failing.stdout


def test_explain_exits_one_when_a_total_does_not_match():
    ok = run_patched("", "explain", "kv", "-p", "gpt2")
    assert ok.returncode == 0, ok.stderr
    patch = ("import llmcalc.costs.kv as kv\nplain = kv.kv_cache\n"
             "kv.kv_cache = lambda *a, **k: plain(*a, **k).model_copy(update={'total_bytes': 1})")
    failing = run_patched(patch, "explain", "kv", "-p", "gpt2")
    assert failing.returncode == 1, (failing.stdout, failing.stderr)
    assert "matches `llmcalc kv`: no" in failing.stdout


def test_validate_checks_its_input_before_asking_for_torch():
    """Without torch, bad input is still named (exit 2), and the missing torch is said last."""
    block = "sys.modules['torch'] = None"  # `import torch` now raises ImportError
    r = run_patched(block, "validate", "-p", "no-such-model")
    assert r.returncode == 2 and "unknown preset" in r.stderr, r.stderr
    r = run_patched(block, "validate", "-p", "gpt2", "--seq", "2048")
    assert r.returncode == 2 and "--seq" in r.stderr, r.stderr
    r = run_patched(block, "validate", "-p", "gpt2")
    assert r.returncode == 2 and "needs PyTorch" in r.stderr, r.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell's redirections")
@pytest.mark.parametrize("redirect", ["2>&-", "2>/dev/full", ">/dev/full 2>&-"])
def test_bad_input_is_two_even_when_stderr_cannot_be_written(redirect):
    """Writing the error line on a closed or full stderr raised inside the handler: the interpreter ended with 1
    ("a check failed"). The line is dropped and the exit code stays 2."""
    import os

    if redirect.count("/dev/full") and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    args = "kv -p llama2-7b" if redirect.startswith(">") else "kv -p nope"
    r = subprocess.run(f"{sys.executable} -m llmcalc {args} {redirect}", shell=True, timeout=120)
    assert r.returncode == 2


def test_an_error_line_cuts_a_long_value_and_escapes_control_characters():
    """A value of 131,000 characters was echoed whole in its error line, and ESC in a value reached the terminal."""
    r = run_cli("kv", "-p", "llama2-7b", "--kv-dtype", "x" * 131_000)
    assert r.returncode == 2 and len(r.stderr) < 1000 and "… (131,00" in r.stderr  # its quotes counted too
    r = run_cli("presets", "q\x1b[2J" + "q" * 300)
    assert r.returncode == 2 and "\x1b" not in r.stderr and len(r.stderr.splitlines()) == 1
