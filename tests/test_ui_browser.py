"""The page in a real browser: a headless Chromium (the system's package) driven by Playwright loads it, fills each
view's form, and checks every figure shown against the JSON the command line prints for the command the page
shows; the URL reproduces the view; a bad value gets the command line's line beside its field; a figure opens its
formula; the page is keyboard-usable, labels every control, asks no other host and logs no console error.

Screenshots of each view go to $LLMCALC_UI_SCREENSHOTS when it is set (README.md's is one of them)."""

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import page_server, run_cli

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip("no Chromium: install the system's package (apt-get install chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="no Playwright: pip install playwright")
pytest.importorskip("starlette", reason="no starlette: pip install 'llmcalc-cost[ui]'")
from playwright.sync_api import sync_playwright  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHOTS = os.environ.get("LLMCALC_UI_SCREENSHOTS")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

VIEWS = [  # view, model preset, what the test types into the form
    ("params", "deepseek-v3", {}),
    ("kv", "llama2-7b", {"--batch": "64", "--seq": "32768"}),
    ("memory", "llama3-8b", {"--batch": "8", "--seq": "8k", "--kv-dtype": "fp8"}),
    ("flops", "qwen3-30b-a3b", {"--seq": "2048"}),
    ("latency", "llama3-8b", {"--gpu": "h100-sxm", "--batch": "4"}),
    ("fit", "gpt-oss-20b", {"--gpu": "h100-sxm", "--seq": "32k"}),
    ("compare", "llama2-7b", {"args": "gqa mla"}),
    ("sweep", "llama3-8b", {"--gpu": "h100-sxm", "--seq": "1k..16k", "--batch": "1,8"}),
    ("serve", "llama3-8b", {"--gpu": "h100-sxm", "--requests": "100", "--rate": "4"}),
    ("plan", "llama3-8b", {"--requests": "100"}),
    ("train", "llama3-8b", {"--gpu": "h100-sxm", "--gpus": "8", "--batch": "64", "--zero": "1", "--micro-batch": "1"}),
    ("explain", "llama3-8b", {"args": "memory", "--batch": "2"}),
]


@pytest.fixture(scope="module")
def server():
    with page_server() as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


class Page:
    """A browser tab on the page that records console errors and every host it asks."""

    def __init__(self, browser, base: str):
        self.base = base
        self.tab = browser.new_page(viewport={"width": 1366, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.tab.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.tab.on("pageerror", lambda e: self.errors.append(str(e)))
        self.tab.on("request", lambda r: self.requests.append(r.url))

    def open(self, url: str = "/"):
        self.tab.goto(self.base + url if url.startswith("/") else url)
        return self.settled()

    def settled(self, state: str = "answered"):
        """The page once the answer to its newest question is shown: `state` (answered, or error)."""
        self.tab.wait_for_selector("body[data-state=answered], body[data-state=error]", timeout=60_000)
        got = self.tab.get_attribute("body", "data-state")
        assert got == state, f"{got}: {self.tab.text_content('#error')}"
        return self

    def figures(self) -> dict[str, str]:
        pairs = self.tab.locator("button.figure").evaluate_all(
            "els => els.map(e => [e.dataset.path, e.dataset.value])")
        return dict(pairs)

    def command_line(self) -> list[str]:
        return shlex.split(self.tab.input_value("#command-line"))

    def close(self):
        assert not self.errors, self.errors
        assert all(u.startswith(self.base) or u.startswith("data:") for u in self.requests), self.requests
        self.tab.close()


def leaves(data, prefix="", in_row=False):
    """path ↦ number for every number the page shows as a figure: in objects and lists of objects, a row of
    which is one line of a table (a list of numbers, or a list within a row, is shown as text)."""
    out = {}
    if isinstance(data, dict):
        for k, v in data.items():
            out |= leaves(v, f"{prefix}.{k}" if prefix else k, in_row)
    elif isinstance(data, list) and data and all(isinstance(x, dict) for x in data) and not in_row:
        for i, v in enumerate(data):
            out |= leaves(v, f"{prefix}.{i}", True)
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        out[prefix] = data
    return out


def cli_report(argv: list[str], cwd=None):
    r = run_cli(*argv, "--format", "json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def fill(page: Page, view: str, preset: str, values: dict[str, str]):
    page.tab.click(f"#tab-{view}")
    page.tab.fill("#preset", preset)
    for key, value in values.items():
        field = page.tab.locator("#args" if key == "args" else f"[id='opt{key}']")
        if field.evaluate("e => { const d = e.closest('details'); return d && !d.open; }"):
            field.evaluate("e => e.closest('details').querySelector('summary').click()")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    return page.settled()


@pytest.mark.parametrize(("view", "preset", "values"), VIEWS, ids=[v[0] for v in VIEWS])
def test_each_view_shows_the_command_lines_figures_and_its_url_reproduces_it(browser, server, view, preset,
                                                                            values):
    page = Page(browser, server).open()
    fill(page, view, preset, values)
    argv = page.command_line()
    assert argv[:2] == ["llmcalc", view] and preset in argv
    for key, value in values.items():
        assert set(value.split()) <= set(argv) if key == "args" else argv[argv.index(key) + 1] == value, (key, argv)
    shown = page.figures()
    expected = leaves(cli_report(argv[1:]))
    assert shown.keys() == expected.keys()
    for path, value in shown.items():
        assert json.loads(value) == expected[path], path  # exact: ints past 2^53 included
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.tab.screenshot(path=str(Path(SHOTS) / f"{view}.png"))
    again = Page(browser, server).open(page.tab.url)
    assert again.command_line() == argv and again.figures() == shown
    again.close()
    page.close()


def test_exact_integers_past_two_to_the_53(browser, server):
    page = fill(Page(browser, server).open(), "flops", "deepseek-v3", {"--seq": "128k", "--batch": "64"})
    value = page.figures()["prefill_flops"]
    assert int(value) > 2**53 and int(value) == cli_report(page.command_line()[1:])["prefill_flops"]
    page.close()


def test_bad_value_gets_the_command_lines_line_beside_its_field(browser, server):
    page = Page(browser, server).open()
    page.tab.click("#tab-kv")
    page.settled()
    page.tab.fill("[id='opt--batch']", "-3")
    page.settled("error")
    cli = run_cli(*page.command_line()[1:])
    assert cli.returncode == 2
    assert cli.stderr == f"error: {page.tab.text_content('[id=err--batch]')}\n"
    assert page.tab.get_attribute("[id='opt--batch']", "aria-describedby") == "err--batch"
    page.tab.fill("[id='opt--batch']", "4")
    page.settled()
    assert page.tab.text_content("[id=err--batch]") == ""
    page.close()


def test_clicking_a_figure_shows_its_formula(browser, server):
    page = fill(Page(browser, server).open(), "kv", "llama2-7b", {"--batch": "2", "--seq": "1024"})
    page.tab.click("button.figure[data-path=total_bytes]")
    page.tab.wait_for_selector("#explain:not([hidden]) table")
    text = page.tab.text_content("#explain")
    assert "2 · L · H_kv · h · B · S · bytes" in text and "2 · 32 · 32 · 128 · 2 · 1024 · 2" in text
    page.close()


def test_a_pasted_config_is_the_command_lines_hf_config(browser, server, tmp_path):
    config = {"model_type": "qwen2", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 3,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 5000,
              "max_position_embeddings": 4096, "tie_word_embeddings": True}
    page = Page(browser, server).open()
    page.tab.click("#tab-kv")
    page.tab.check("input[name=source][value=file]")
    page.tab.fill("#file-text", json.dumps(config))
    page.settled()
    argv = page.command_line()
    assert argv[argv.index("--hf-config") + 1] == "config.json"
    (tmp_path / "config.json").write_text(json.dumps(config))
    expected = leaves(cli_report(argv[1:], cwd=tmp_path))
    assert {k: json.loads(v) for k, v in page.figures().items()} == expected
    again = Page(browser, server).open(page.tab.url)  # the pasted text is in the URL too
    assert again.figures() == page.figures()
    again.close()
    page.close()


def test_keyboard_and_labels(browser, server):
    page = Page(browser, server).open()
    page.tab.focus("#tab-memory")
    page.tab.keyboard.press("Enter")
    page.settled()
    assert page.tab.get_attribute("#tab-memory", "aria-selected") == "true"
    unlabelled = page.tab.locator("input, select, textarea").evaluate_all(
        "els => els.filter(e => e.type !== 'hidden' && !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))"
        ".map(e => e.id || e.name)")
    assert unlabelled == []
    page.close()
