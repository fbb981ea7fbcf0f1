"""Text renderings of figures (llmcalc/render/text.py): a time reads in the unit a person would say it in; what
users and files write reaches the terminal as text, never as its control sequences."""

import json
import os
import subprocess
import sys

import pytest

from llmcalc.render.text import seconds


@pytest.mark.parametrize("t,shown", [(3e-10, "0.30 ns"), (5.1e-3, "5.10 ms"), (59.0, "59.00 s"), (119.9, "119.90 s"),
                                     (1676.83, "27.95 min"), (7199.0, "119.98 min"), (162895.54, "45.25 h"),
                                     (3 * 86400.0, "3.00 days")])
def test_a_time_is_shown_in_minutes_hours_or_days_once_it_is_long(t, shown):
    """`calibrate --device cpu`'s profile once printed '1676.83 s … total 162895.54 s'."""
    assert seconds(t) == shown


def test_a_value_cell_breaks_between_its_parts_only():
    from llmcalc.render.tables import parts

    assert parts("2.00 GiB ×0.625") == ["2.00 GiB", "×0.625"]
    assert parts("524.29 K ×1") == ["524.29 K", "×1"]
    assert parts("21 (1.31× mean)") == ["21", "(1.31× mean)"]


def test_a_line_of_text_never_breaks_between_a_number_and_its_unit():
    from rich.console import Console
    from rich.text import Text

    from llmcalc.render.wrap import units_kept

    line = "llama2-7b KV cache, 64 × 32,768 tokens in bf16: 1,099,511,627,776 bytes (1.10 TB, 1.00 TiB)"
    console = Console(width=80)
    assert [x.plain.rstrip() for x in Text(line).wrap(console, 80)][0].endswith("(1.10")  # rich alone
    lines = [x.plain.rstrip() for x in units_kept(Text(line)).wrap(console, 80)]
    assert lines == ["llama2-7b KV cache, 64 × 32,768 tokens in bf16: 1,099,511,627,776 bytes",
                     "(1.10 TB, 1.00 TiB)"]


def test_numbers_of_one_expression_share_their_thousands_separators():
    """'11274289152 + 5635768320 = 16,910,057,472' and '(2251.80 TB' beside '2,251,799,813,685,248 bytes'."""
    from llmcalc.render.report_tables import grouped
    from llmcalc.render.text import nbytes_text

    assert grouped("11274289152 + 5635768320") == "11,274,289,152 + 5,635,768,320"
    assert grouped("0.5 · 1024 + x2048 + 1e-3") == "0.5 · 1,024 + x2048 + 1e-3"
    assert nbytes_text(2_251_799_813_685_248, "both") == "2,251,799,813,685,248 bytes (2,251.80 TB, 2,048.00 TiB)"


def test_a_name_with_control_characters_reaches_the_terminal_as_escapes(tmp_path):
    """A scenario named with ESC sequences (a colour, a window title) was printed raw in `run`'s table: the
    terminal obeyed them. Control characters are shown as escapes; the JSON keeps the name as written."""
    path = tmp_path / "s.yaml"
    path.write_text('scenarios: [{name: "x\\e[31mRED\\e]0;title\\a", command: kv, options: {preset: gpt2}}]\n')
    r = subprocess.run([sys.executable, "-m", "llmcalc", "run", str(path)], capture_output=True, text=True,
                       timeout=300, env=os.environ | {"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "x\\x1b[31mRED\\x1b]0;title\\x07" in r.stdout
    j = subprocess.run([sys.executable, "-m", "llmcalc", "run", str(path), "-f", "json"], capture_output=True,
                       text=True, timeout=300)
    assert json.loads(j.stdout)[0]["name"] == "x\x1b[31mRED\x1b]0;title\x07"
