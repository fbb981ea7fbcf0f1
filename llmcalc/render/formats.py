"""JSON, YAML and CSV: the report's fields as they are (exact ints, UTF-8 text)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence

from pydantic import BaseModel

from llmcalc.errors import UserError

ROW_CONTEXT = ("model", "batch", "seq", "gen", "gpu", "kv_dtype", "mode", "device", "reference", "preset")
"""A report's scalar fields that lead each of its CSV rows."""


def write_data(report: BaseModel | Sequence[BaseModel], fmt: str) -> None:
    """JSON (indented) or YAML (block style, fields in order, Unicode as is). A preset in full is written as
    YAML that `--config` loads: its spec, the derived figures as comments above it."""
    data = [r.model_dump(mode="json") for r in report] if isinstance(report, list) else report.model_dump(mode="json")
    if fmt == "json":
        sys.stdout.write(strict_json(data))
        return
    require_finite(data)
    if type(report).__name__ == "PresetReport":
        sys.stdout.write(spec_document(report))
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True))


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


def csv_rows(report: BaseModel | Sequence[BaseModel]) -> list[dict]:
    """The report's table rows as flat dicts: a list of rows as it is; a report's main list of rows
    (its first list of models, e.g. `breakdown`) each led by the report's scalar fields that
    identify it (model, batch, seq, ...); a report with no such list as one row of its scalars."""
    if isinstance(report, list):
        return [_flat(r.model_dump(mode="json")) for r in report]
    data = report.model_dump(mode="json")
    lists = [k for k, v in data.items() if isinstance(v, list) and v and isinstance(v[0], dict)]
    scalars = {k: v for k, v in data.items() if not isinstance(v, (list, dict)) and k != "formula"}
    if not lists:
        return [scalars]
    key = lists[0]
    keep = {k: v for k, v in scalars.items() if k in ROW_CONTEXT}
    return [keep | _flat(row) for row in data[key]] if isinstance(getattr(report, key)[0], BaseModel) else [scalars]


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
    """RFC 4180 CSV with a header of every column seen, in first-seen order."""
    import csv

    rows = csv_rows(report)
    require_finite(rows)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    w = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
