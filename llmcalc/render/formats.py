"""JSON, YAML and CSV: the report's fields as they are (exact ints, UTF-8 text)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence

from pydantic import BaseModel

from llmcalc.errors import UserError
from llmcalc.render.text import CONTROLS

ROW_CONTEXT = ("model", "batch", "seq", "gen", "gpu", "kv_dtype", "mode", "device", "reference", "preset")
"""A report's scalar fields that lead each of its CSV rows."""


def write_data(report: BaseModel | Sequence[BaseModel], fmt: str) -> None:
    """JSON (indented) or YAML (block style, fields in order, Unicode as is). A preset in full is written as
    YAML that `--config` loads, and a GPU in full as YAML that `--gpu` loads: its fields as the file writes
    them, the derived figures as comments above them (FILE_DOCUMENTS)."""
    data = report_data(report)
    if fmt == "json":
        sys.stdout.write(strict_json(data, ascii=not unicode_out()))
        return
    require_finite(data)
    document = FILE_DOCUMENTS.get(type(report).__name__)
    if document is not None:
        sys.stdout.write(document(report))
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=unicode_out()))


def unicode_out() -> bool:
    """Whether standard output writes any text (its encoding UTF-8); else (LC_ALL=C without Python's UTF-8 mode,
    PYTHONIOENCODING=ascii) JSON and YAML escape what it cannot, and the command line has made the stream write
    `?` for a table's ×, Σ or ≈ rather than fail (llmcalc/cli/__init__.py)."""
    from llmcalc.render.text import writes_unicode

    return writes_unicode(sys.stdout)


def report_data(report: BaseModel | Sequence[BaseModel]):
    """The report (or list of reports) as JSON-ready data: what --format json writes."""
    return [r.model_dump(mode="json") for r in report] if isinstance(report, list) else report.model_dump(mode="json")


def strict_json(data, indent: int = 2, ascii: bool = False) -> str:
    """`data` as JSON that RFC 8259 allows, one line per field (`indent`; Unicode as is unless `ascii`), with a
    final newline: a NaN or an infinity is refused (require_finite names its field), never written as the
    non-standard NaN / Infinity. Every JSON the CLI writes goes through here."""
    require_finite(data)
    return json.dumps(data, indent=indent, ensure_ascii=ascii, allow_nan=False) + "\n"


def require_finite(data, where: str = "") -> None:
    """Every float in `data` (a report dumped to JSON types) finite, else a UserError naming the first one that
    is not: the last line of defence behind the inputs' own checks, for JSON, YAML and CSV alike."""
    if isinstance(data, float) and not math.isfinite(data):
        raise UserError(f"the result {where or 'value'} is {data}, not a number JSON allows (an input that is not "
                        "finite, or so far outside any real range that it overflowed); give finite inputs of a "
                        "realistic size")
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        require_finite(value, f"{where}.{key}" if where else str(key))


def spec_document(r) -> str:
    """A preset as a spec file: `name`, `source` and every field, led by comments with what follows from it."""
    import yaml

    kv = (f"# KV cache: {r.kv_elements_per_token:,} elements, {r.kv_bytes_per_token:,} bytes (bf16) per token, "
          "all layers" if r.kv_bytes_per_token is not None else "# KV cache: not modelled for this model")
    head = [f"# {r.name}: {r.total:,} parameters, {r.active:,} active per token", kv,
            "# save this and edit it, then: llmcalc params --config FILE.yaml"]
    body = yaml.safe_dump({"name": r.name, "source": r.source} | r.spec, sort_keys=False, width=120,
                          allow_unicode=True)
    return "\n".join(head) + "\n" + body


def gpu_document(r) -> str:
    """A GPU in full as a GPU file: every field as presets/gpus/NAME.yaml writes it, led by comments with what
    follows from it."""
    import yaml

    head = [f"# {r.name}: {r.memory_bytes:,} bytes of memory at {r.bandwidth_bytes_per_s / 1e12:.2f} TB/s; "
            f"bf16 ridge point {r.ridge_point:.0f} FLOPs per byte",
            "# units: peak_tflops dense TFLOP/s (int8: TOPS); memory_gib GiB; *_gbs GB/s (10^9), both directions",
            "# together; *_latency_us microseconds; price_per_hour USD per GPU-hour",
            "# the bundled presets' comments (presets/gpus/) give the source of each figure",
            "# save this, give it a name of its own and edit it, then: llmcalc latency -p llama3-8b --gpu FILE.yaml"]
    return "\n".join(head) + "\n" + yaml.safe_dump(r.spec, sort_keys=False, width=120, allow_unicode=True)


FILE_DOCUMENTS = {"PresetReport": spec_document, "GPUReport": gpu_document}
"""Reports whose YAML is the file the CLI loads back (a spec for --config, a GPU for --gpu), by report type."""


def csv_rows(report: BaseModel | Sequence[BaseModel]) -> list[dict]:
    """The report as flat dicts, each led by a `row` column: `item` for a row of its table, `summary` for its
    headline. A list of rows is its items as they are. A report's main list of rows (its first field that is a
    list of models, e.g. `breakdown`) gives one `item` per row, each led by the report's scalar fields that
    identify it (model, batch, seq, ...), then one `summary` row of the report's own fields: its scalars, and its
    nested mappings as `outer.inner` columns (every field but its lists and `formula`). A report with no such list
    is that `summary` row alone. A scenario file's results (`llmcalc run`): one row per scenario (scenario_row)."""
    if isinstance(report, list) and report and type(report[0]).__name__ == "ScenarioResult":
        return [{"row": "item"} | scenario_row(r.model_dump(mode="json")) for r in report]
    if isinstance(report, list):
        return [{"row": "item"} | _flat(r.model_dump(mode="json")) for r in report]
    data = report.model_dump(mode="json")
    summary = {"row": "summary"} | _flat({k: v for k, v in data.items() if not isinstance(v, list) and k != "formula"})
    key = _row_list(report)
    if key is None:
        return [summary]
    keep = {k: v for k, v in data.items() if k in ROW_CONTEXT and not isinstance(v, (list, dict))}
    return [{"row": "item"} | keep | _flat(row) for row in data[key]] + [summary]


def _row_list(report: BaseModel) -> str | None:
    """The name of the report's first field declared as a list of models (its table), or None."""
    from typing import get_args, get_origin

    for name, field in type(report).model_fields.items():
        args = get_args(field.annotation)
        if (get_origin(field.annotation) is list and args and isinstance(args[0], type)
                and issubclass(args[0], BaseModel)):
            return name
    return None


def scenario_row(result: dict) -> dict:
    """One scenario of `llmcalc run` as one row: its index, name and command (and error, if it failed), then its
    report's scalar fields, a nested mapping as `outer.inner` columns; the report's lists (its rows, its notes)
    and its formula are left out. A report field named as one of the scenario's columns gets a `report.` prefix."""
    row = {k: result[k] for k in ("index", "name", "command")} | ({"error": result["error"]} if result["error"] else {})
    report = result["report"] or {}
    for k, v in _flat({k: v for k, v in report.items() if not isinstance(v, list) and k != "formula"}).items():
        row[f"report.{k}" if k in row or k == "error" else k] = v
    return row


def _flat(row: dict) -> dict:
    """Nested mappings become `outer.inner` columns; lists become `;`-joined text."""
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out |= {f"{k}.{kk}": vv for kk, vv in _flat(v).items()}
        elif isinstance(v, list):
            out[k] = ";".join(map(str, v))
        else:
            out[k] = v
    return out


def write_csv(report: BaseModel | Sequence[BaseModel]) -> None:
    """RFC 4180 CSV with a header of every column seen, in first-seen order (`row` first; a cell a row does not
    have is empty)."""
    import csv

    rows = csv_rows(report)
    require_finite(rows)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    w = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows({k: _cell(v) for k, v in r.items()} for r in rows)


def _cell(value: object) -> object:
    """A text cell as a spreadsheet may open it: control characters as escapes but a line break (csv quotes that;
    a bare carriage return it would not, breaking the row), and text that a spreadsheet would run as a formula
    (=, +, -, @ first, not a number) behind a quote mark. Numbers are written as they are."""
    if not isinstance(value, str):
        return value
    value = value.translate(CONTROLS)
    if value[:1] in ("=", "+", "-", "@"):
        try:
            float(value)
        except ValueError:
            return "'" + value
    return value
