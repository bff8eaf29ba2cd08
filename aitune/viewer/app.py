"""The viewer page: pickers and upload on the side, the views in tabs, composed from one store.

`build_page` is what ``viewer/main.py`` serves; it takes the runs folder and the URL's query
arguments so it can be built and tested without a server.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

import panel as pn
import param

from aitune.compare.loop_report import AFTER_FOLDER
from aitune.viewer import views
from aitune.viewer.overview import Overview, TunedRegions
from aitune.viewer.selection import Selection
from aitune.viewer.sources import MAX_FILE_BYTES
from aitune.viewer.store import SIDES, ProfileStore
from aitune.viewer.targets import TuningTargets
from aitune.viewer.trends import HistoryTrends

RUNS_DIR_ENV = "AITUNE_VIEWER_RUNS_DIR"
NONE = "(none)"
COMPARE_THREADS = 2  # Panel runs threaded onload callbacks (the compare) only with a thread pool
CSS = """
.aitune-problem { background: #fdecea; color: #611a15; padding: 8px 12px; border-radius: 4px; }
.aitune-text { white-space: pre-wrap; }
.aitune-cards { display: flex; flex-wrap: wrap; gap: 8px; }
.aitune-card { border: 1px solid #ddd; border-radius: 4px; padding: 6px 10px; min-width: 150px; }
.aitune-card-label { font-size: 0.8em; color: #555; }
.aitune-card div:last-child { font-size: 1.2em; font-weight: 600; }
"""


def runs_dir_from(argv: Sequence[str], environ: Mapping[str, str], default: Path) -> Path:
    """The runs folder: ``--runs-dir DIR`` (after ``panel serve … --args``), else the env variable, else default."""
    arguments = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    arguments.add_argument("--runs-dir", type=Path, nargs="?")  # without its DIR: as if not given
    runs_dir = arguments.parse_known_args(argv)[0].runs_dir
    return runs_dir if runs_dir is not None else Path(environ.get(RUNS_DIR_ENV, default))


def query_value(args: Mapping[str, Sequence[bytes | str]], key: str) -> str | None:
    """One URL query argument as text (Bokeh hands them over as lists of bytes); None when absent."""
    values = args.get(key) or []
    if not values:
        return None
    value = values[0]
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def default_pair(names: Sequence[str]) -> tuple[str | None, str | None]:
    """What to open without a URL: a before/after pair when the folder has one, else the first file.

    A before is a file named ``before*`` or one in a ``before/`` folder (a tune folder's); its after
    is the same file of that folder's ``after/`` when there is one, else the first ``after`` found.
    """
    before = next((name for name in names if _side_of(name) == "before"), names[0] if names else None)
    if before is None or _side_of(before) != "before":
        return before, None
    twin = (Path(before).parent.parent / AFTER_FOLDER / Path(before).name).as_posix()
    after = twin if twin in names else next((name for name in names if _side_of(name) == "after"), None)
    return before, after


def _side_of(name: str) -> str | None:
    path = Path(name)
    return next((side for side in SIDES if path.name.startswith(side) or path.parent.name == side), None)


def open_initial(store: ProfileStore, args: Mapping[str, Sequence[bytes | str]]) -> None:
    """Open the URL's ``?before=&after=`` names when given (refusing names outside the runs folder), else a default.
    (``?history=NAME`` opens the History tab on that database of the runs folder: `aitune.viewer.trends`.)"""
    before, after = query_value(args, "before"), query_value(args, "after")
    if before is None and after is None:
        before, after = default_pair(store.available())
    if before or after:
        store.open_names(before, after)


def pickers(store: ProfileStore) -> pn.Column:
    """Two selects over the runs folder and an Open button; they follow what the store shows (uploads too)."""
    before = pn.widgets.Select(label="Before")
    after = pn.widgets.Select(label="After")
    count = pn.pane.Markdown()

    def refresh(*_: object) -> None:
        names = store.available()
        options = {NONE: NONE, **views.labelled(names)}
        for side, select in (("before", before), ("after", after)):
            shown = getattr(store, side)
            select.param.update(options=options, value=shown.name if shown and shown.name in names else NONE)
        count.object = f"**Runs folder:** {len(names)} profiles"

    refresh()
    store.param.watch(refresh, ["before", "after"])
    button = pn.widgets.Button(label="Open", color="primary")
    button.on_click(lambda _: store.open_names(*(None if w.value == NONE else w.value for w in (before, after))))
    return pn.Column(count, before, after, button)


def scenario_picker(store: ProfileStore) -> pn.widgets.Select:
    """Which scenario of multi-scenario profiles to show; hidden when the profiles have one input each."""
    picker = pn.widgets.Select(label="Scenario", width=300)

    def refresh(*_: object) -> None:
        names = store.scenarios()
        chosen = store.scenario if store.scenario in names else next(iter(names), None)
        picker.param.update(options=views.labelled(names), value=chosen, visible=bool(names))

    def choose(event: param.parameterized.Event) -> None:
        # The browser's empty select reports "" rather than None: only a listed name is a choice.
        if event.new in store.scenarios():
            store.scenario = event.new

    picker.param.watch(choose, "value")
    refresh()
    store.param.watch(refresh, ["before", "after"])
    return picker


def uploader(store: ProfileStore) -> pn.Column:
    """Drag-and-drop or pick one or two files; the browser refuses files over the size limit before sending."""
    dropper = pn.widgets.FileDropper(
        multiple=True,
        max_files=2,
        max_file_size=f"{MAX_FILE_BYTES // 2**20}MB",
        css_classes=["profile-upload"],
    )

    def opened(event: object) -> None:
        if dropper.value:
            store.open_uploads({name: _as_bytes(data) for name, data in dropper.value.items()})

    dropper.param.watch(opened, "value")
    return pn.Column("**Upload** one profile, or two (before, then after)", dropper)


def compare_after_load(store: ProfileStore, selection: Selection) -> None:
    """Run `aitune.compare` in a thread once the page is shown, and again whenever the pair or domain changes."""

    def run(*_: object) -> None:
        store.compare_now(selection.domain)

    store.param.watch(run, ["before", "after", "scenario"])
    selection.param.watch(run, ["domain"])
    pn.state.onload(run, threaded=True)


def build_page(runs_dir: Path, args: Mapping[str, Sequence[bytes | str]]) -> pn.Row:
    """The whole page for one browser session."""
    pn.extension("tabulator", "filedropper", raw_css=[CSS], notifications=False, nthreads=COMPARE_THREADS)
    store = ProfileStore(runs_dir=runs_dir)
    selection = Selection()
    open_initial(store, args)
    domain = pn.widgets.RadioButtonGroup.from_param(selection.param.domain, color="light")
    context = {"store": store, "selection": selection}
    history = HistoryTrends(store=store, history=query_value(args, "history"))
    tabs = pn.Tabs(
        ("Regions", views.RegionShares(**context)),
        ("Suggestions", TuningTargets(**context)),
        ("Region tree", views.RegionTree(**context)),
        ("Run timing", views.RunTiming(**context)),
        ("Phases", views.Phases(**context)),
        ("Ranks", views.Ranks(**context)),
        ("Operators", views.Operators(**context)),
        ("Memory", views.Memory(**context)),
        ("Efficiency", views.Efficiency(**context)),
        ("Warnings", views.Warnings(**context)),
        ("Timeline", views.Timeline(**context)),
        ("History", history),
        dynamic=True,
        sizing_mode="stretch_width",
    )
    history.opened = lambda: setattr(tabs, "active", 0)  # a pair picked in the history: show its regions
    if history.history is not None:  # ?history=NAME opens on its trend
        tabs.active = len(tabs) - 1
    compare_after_load(store, selection)
    sidebar = pn.Column(pickers(store), scenario_picker(store), uploader(store), "**Time domain**", domain, width=320)
    main = pn.Column(
        views.Problem(**context), Overview(**context), TunedRegions(**context), tabs, sizing_mode="stretch_width"
    )
    return pn.Row(sidebar, main, sizing_mode="stretch_width", name="aitune viewer")


def _as_bytes(data: bytes | str) -> bytes:
    # FileDropper decodes text/* uploads to str; JSON arrives as bytes, but be tolerant.
    return data.encode("utf-8") if isinstance(data, str) else data
