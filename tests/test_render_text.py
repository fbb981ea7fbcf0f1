"""Text renderings of figures (llmcalc/render/text.py): a time reads in the unit a person would say it in."""

import pytest

from llmcalc.render.text import seconds


@pytest.mark.parametrize("t,shown", [(3e-10, "0.30 ns"), (5.1e-3, "5.10 ms"), (59.0, "59.00 s"), (119.9, "119.90 s"),
                                     (1676.83, "27.95 min"), (7199.0, "119.98 min"), (162895.54, "45.25 h"),
                                     (3 * 86400.0, "3.00 days")])
def test_a_time_is_shown_in_minutes_hours_or_days_once_it_is_long(t, shown):
    """`calibrate --device cpu`'s profile once printed '1676.83 s … total 162895.54 s'."""
    assert seconds(t) == shown
