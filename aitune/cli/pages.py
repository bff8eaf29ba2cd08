"""The HTML pages the commands write (`report --format html`, `compare --html`, `bundle --html`): which sections, in
what order. Each section is drawn by the stage that owns its figures (`aitune.report.html`,
`aitune.suggest.html`, `aitune.compare.html`); this module only lays them out on one page.
"""

from __future__ import annotations

from aitune.compare import ProfileDiff
from aitune.compare.html import pair_sections
from aitune.compare.loop_report import LoopReport
from aitune.report.document import scenario_names
from aitune.report.html import MAX_SCENARIOS, Section, headlines, overview, region_tree, render_html, render_page
from aitune.report.memo import computed_once
from aitune.report.model import ProfileLike, as_profile
from aitune.report.safe_text import shown_name
from aitune.report.samples import select_scenario
from aitune.suggest import suggest
from aitune.suggest.html import suggestions_section


@computed_once()  # the sections and suggest read the same headline rows
def profile_page(doc: ProfileLike) -> str:
    """One profile: its own sections (`aitune.report.html.profile_sections`), then what suggest would tune."""
    return render_html(doc, extra=suggestion_sections(doc))


def suggestion_sections(doc: ProfileLike) -> list[Section]:
    """The suggestions of each scenario (of the document itself when it has none); none without measured runs."""
    if not as_profile(doc).runs:
        return []
    names = scenario_names(doc)
    sections = []
    for scenario in (names or [None])[:MAX_SCENARIOS]:
        section = suggestions_section(suggest(doc, scenario=scenario))
        prefix = "" if scenario is None else f"Scenario {shown_name(scenario)} · "
        sections.append(Section(prefix + section.title, section.body, section.kind))
    return sections


@computed_once()  # suggest and each side's sections read the same headline rows
def pair_page(
    before: ProfileLike,
    after: ProfileLike,
    diff: ProfileDiff,
    report: LoopReport | None = None,
    subtitle: str = "",
) -> str:
    """Two profiles: the speedup and every change (with a tune folder's gains), what to tune next, then each side."""
    sections = [*pair_sections(diff, report), *suggestion_sections(after)]
    for side, doc in (("Before", before), ("After", after)):
        sections += _side(side, select_scenario(doc, diff.scenario))
    title = "aitune tune folder" if report is not None else "aitune comparison"
    return render_page(title, sections, subtitle=subtitle)


def _side(side: str, doc: ProfileLike) -> list[Section]:
    own = [overview(doc), *headlines(doc), region_tree(doc)]
    return [Section(f"{side} · {part.title}", part.body, part.kind) for part in own if part.body]
