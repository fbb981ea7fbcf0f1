"""Option groups (llmcalc/cli/groups.py): a command names a group as one parameter; the group's options stand in
that place of the command's signature, and reach the command as one object."""

import inspect
from typing import Annotated, Optional

import pytest
import typer

from llmcalc.cli import groups
from llmcalc.errors import UserError


def test_a_group_stands_for_its_options_in_its_place():
    @groups.grouped
    def command(*, first: Annotated[int, typer.Option("--first")] = 1, layout: groups.Layout,
                last: Annotated[int, typer.Option("--last")] = 2):
        return first, layout, last

    assert list(inspect.signature(command).parameters) == ["first", "gpus", "tp", "pp", "dp", "ep", "last"]
    first, layout, last = command(first=3, gpus=8, tp=None, pp=2, dp=1, ep=1, last=4)
    assert (first, last) == (3, 4)
    assert (layout.gpus, layout.tp, layout.pp, layout.dp, layout.ep) == (8, None, 2, 1, 1)
    assert groups.workload(layout).layout.tp == 4  # gpus / (pp · dp)


def test_an_option_the_command_declares_itself_keeps_its_place_and_reaches_the_group():
    @groups.grouped
    def command(*, gpus: Annotated[Optional[int], typer.Option("--gpus", help="its own")] = None,
                layout: groups.Layout):
        return gpus, layout

    parameters = inspect.signature(command).parameters
    assert list(parameters) == ["gpus", "tp", "pp", "dp", "ep"]
    assert parameters["gpus"].annotation.__metadata__[0].help == "its own"
    gpus, layout = command(gpus=4, tp=None, pp=1, dp=1, ep=1)
    assert gpus == layout.gpus == 4


def test_a_command_without_groups_is_left_as_it_is():
    def command(*, first: int = 1):
        return first

    assert groups.grouped(command) is command


def test_the_workload_takes_the_groups_fields_then_the_commands_own():
    w = groups.workload(groups.Batch(batch=2, seq=8), groups.Weights(weights_dtype="int4", weights_format=None),
                        groups.Images(images=0, image_size=None), gen=3)
    assert (w.batch, w.seq, w.gen, w.weights_dtype) == (2, 8, 3, "int4")


def test_the_groups_are_converted_in_the_order_given():
    """A bad value is named in the order the command lists its groups, as one Workload(...) call named it."""
    weights = groups.Weights(weights_dtype=None, weights_format="foo=int4")
    layout = groups.Layout(gpus=8, tp=3, pp=1, dp=1, ep=1)
    with pytest.raises(UserError, match="foo"):
        groups.workload(weights, layout)
    with pytest.raises(UserError, match="gpus"):
        groups.workload(layout, weights)
