"""The bundled error bands (presets/bands/intervals.yaml), read with the safe loader."""

from __future__ import annotations

from llmcalc.inputs.files import PRESETS, read_yaml, validated
from llmcalc.model.intervals import Bands


def load_bands() -> Bands:
    """presets/bands/intervals.yaml."""
    path = PRESETS / "bands" / "intervals.yaml"
    return validated(Bands, read_yaml(path, "intervals file"), "presets/bands/intervals.yaml",
                     "benchmarks/accuracy/bands.py --write")
