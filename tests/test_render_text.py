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


def _long_table(rows: int, title: str = "kv: a long sweep of batch sizes and context lengths"):
    """A table as the renderers build them: a whole first column, value columns (one that breaks into its parts),
    a two-line header, a styled cell, a cell holding markup's bracket, wide characters."""
    from llmcalc.render.tables import styled, table

    cells = [[f"{i}", f"{i * 1024:,}", f"{i * 1.37:.2f} GiB ×{i % 7 + 0.5}", "[fits]" if i % 3 else "no",
              styled("FAIL", "bold red") if i % 11 == 0 else "pass", "一二三" if i % 5 == 0 else "abc"]
             for i in range(rows)]
    return table(title, ["batch", "seq", "KV\nper GPU", "fits", "check", "name"], cells, wrap=[2], names=[5])


@pytest.mark.parametrize("width", [120, 58, 50, 44])  # as built, broken, lighter box, both
@pytest.mark.parametrize("color, encoding", [(None, "utf-8"), ("truecolor", "utf-8"), (None, "ascii")])
def test_a_long_tables_rows_are_laid_out_as_rich_lays_them_out(width, color, encoding):
    """A table of LONG_ROWS rows or more has its body laid out by llmcalc/render/long_tables.py (rich took 1–3 ms a
    row: 26 s to print a sweep of 10,000 points, 2.7 s now): the characters and styles printed are rich's own, in
    every form `fitted` gives (as built, its value cells broken, the lighter box), in colour or not, and in the
    ASCII box rich draws for a file that cannot take its lines."""
    import io

    from rich.console import Console

    from llmcalc.render.long_tables import LONG_ROWS, print_long
    from llmcalc.render.tables import fitted

    class File(io.StringIO):
        pass

    File.encoding = encoding

    def console():
        return Console(file=File(), width=width, color_system=color, force_terminal=color is not None,
                       highlight=False, emoji=False)

    form = fitted(_long_table(LONG_ROWS + 7), width)
    assert form is not None, width
    ours, theirs = console(), console()
    assert print_long(ours, form)
    theirs.print(form)
    assert ours.file.getvalue() == theirs.file.getvalue()
    assert ("\x1b[1;31m" in ours.file.getvalue()) == (color is not None)  # the styled cell, in colour


def test_a_short_table_or_one_whose_text_wraps_is_left_to_rich():
    import io

    from rich.console import Console

    from llmcalc.render.long_tables import LONG_ROWS, print_long
    from llmcalc.render.tables import table

    out = Console(file=io.StringIO(), width=100)
    assert not print_long(out, _long_table(LONG_ROWS - 1))
    assert not print_long(out, table("t", ["a", "note"], [["1", "words that wrap"]] * LONG_ROWS, text=[1]))
    assert not print_long(out, "a line of text")
    assert out.file.getvalue() == ""
