"""What the user picked: parameters only, no data and no behaviour."""

from __future__ import annotations

import param


class Selection(param.Parameterized):
    """The viewer's choices; views read them, widgets write them."""

    domain = param.Selector(default="cpu", objects=["cpu", "device"], doc="time domain of the region charts")
    run = param.Integer(default=0, bounds=(0, None), doc="measured run shown in the timeline")
    timeline_side = param.Selector(default="before", objects=["before", "after"], doc="profile the timeline reads")
    tree_run = param.Integer(default=None, allow_None=True, doc="run whose region tree is shown; None = median run")
    rank = param.Integer(default=None, allow_None=True, doc="rank whose regions the Ranks tab lists; None = all")
    rank_quantity = param.String(default=None, allow_None=True, doc="what the per-rank chart draws; None = run time")
