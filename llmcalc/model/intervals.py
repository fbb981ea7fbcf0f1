"""Error bands of llmcalc's times (presets/bands/intervals.yaml, written by benchmarks/accuracy/bands.py from the
published runs; docs/intervals.md): for a command, an engine or time model, and a figure, the range of measured /
predicted that the table subset of the published runs showed, and how often it held on the held-out subset."""

from typing import Annotated

from pydantic import Field

from llmcalc.model.base import Frozen, NonNegInt

Ratio = Annotated[float, Field(gt=0, le=1e6)]


class Band(Frozen):
    """[low, high] of the time ratio measured / predicted (a throughput's: predicted / measured)."""

    low: Ratio
    high: Ratio
    expected_coverage: Annotated[float, Field(gt=0, le=1)]
    """The chance a new run like the table's falls in the band: (n + 1 − 2i)/(n + 1) for the i-th smallest and
    largest of n table ratios (benchmarks/accuracy/bands.py)."""
    table_rows: NonNegInt
    held_out_rows: NonNegInt
    held_out_inside: NonNegInt

    def of_time(self, t: float) -> list[float]:
        """The range a measured time of predicted `t` fell in."""
        return [t * self.low, t * self.high]

    def of_rate(self, x: float) -> list[float]:
        """The range a measured throughput of predicted `x` fell in."""
        return [x / self.high, x / self.low]

    def held(self) -> str:
        """How often the band held on the held-out runs, in words."""
        if not self.held_out_rows:
            return "no held-out run to check it on"
        return (f"held on {self.held_out_inside} of {self.held_out_rows} held-out runs, built to hold "
                f"{self.expected_coverage:.0%}")


class Bands(Frozen):
    """Every band: bands[command][engine or time model][figure]."""

    coverage: Annotated[float, Field(gt=0, lt=1)]
    """The share of new runs a band is built to hold (split conformal prediction over the table subset)."""
    bands: dict[str, dict[str, dict[str, Band]]]

    def find(self, command: str, key: str, figure: str, fallback: str | None = None) -> Band | None:
        """The band of `figure` for `command` under `key` (an engine, a time model), else under `fallback`."""
        by = self.bands.get(command, {})
        return by.get(key, {}).get(figure) or (by.get(fallback, {}).get(figure) if fallback else None)

    @property
    def label(self) -> str:
        return f"{self.coverage:.0%}"
