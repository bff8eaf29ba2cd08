"""A command reads each document's derived views once (`aitune.report.memo`): drawing a report or compare's pair
page finds a document's headline rows once per domain, and runs suggest once per document, however many sections
read them."""

from pathlib import Path

import pytest

from aitune.cli import pages
from aitune.cli.compare import compare_pair
from aitune.cli.report import report_profile
from aitune.report import headline, load
from aitune.report.model import given

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
BEFORE = SAMPLES / "tuned-pipeline" / "before" / "profile.json"
AFTER = SAMPLES / "tuned-pipeline" / "after" / "profile.json"
SCENARIOS = SAMPLES / "scenarios-batch.profile.json"


def asked(monkeypatch, module, name) -> list[tuple]:
    """Each computation ``module.name`` makes from here on: the document it read and what was asked of it."""
    calls: list[tuple] = []
    original = getattr(module, name)

    def counting(doc, *args, **kwargs):
        calls.append((doc, *args, *kwargs.values()))  # the document itself: kept alive, its id stays its own
        return original(doc, *args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def repeated(calls: list[tuple]) -> list[tuple]:
    """The computations asked again of the same document with the same arguments."""
    seen: list[tuple] = []
    again = []
    for doc, *rest in calls:
        if any(doc is other and rest == other_rest for other, *other_rest in seen):
            again.append((id(doc), *rest))
        seen.append((doc, *rest))
    return again


def frozen(calls: list[tuple]) -> list[tuple]:
    return [(doc, domain, frozenset(keep)) for doc, domain, keep in calls]


def test_the_pair_page_finds_each_documents_headline_once_and_suggests_once(monkeypatch, tmp_path, capsys):
    rows = asked(monkeypatch, headline, "_found_rows")
    suggested = asked(monkeypatch, pages, "suggest")
    compare_pair(
        BEFORE,
        AFTER,
        scenario=None,
        domain=None,
        fail_if_slower=None,
        html=tmp_path / "pair.html",
        keep=False,
        history_db=None,
        as_json=False,
    )
    assert "Speedup" in (tmp_path / "pair.html").read_text()
    assert rows, "the page reads the headline"
    assert repeated(frozen(rows)) == []
    assert len({id(doc) for doc, *_ in rows}) == 2  # the two documents read, no copies of them
    assert len(suggested) == 1
    assert repeated(suggested) == []


@pytest.mark.parametrize("output_format", ["md", "html"])
@pytest.mark.parametrize("profile", [BEFORE, SCENARIOS], ids=["one-input", "scenarios"])
def test_a_report_finds_each_views_headline_once(monkeypatch, tmp_path, output_format, profile):
    rows = asked(monkeypatch, headline, "_found_rows")
    suggested = asked(monkeypatch, pages, "suggest")
    report_profile(profile, output_format=output_format, output=tmp_path / f"report.{output_format}")
    assert rows
    assert repeated(frozen(rows)) == []
    scenarios = len(given(load(profile).scenarios, [])) or 1
    assert len({id(doc) for doc, *_ in rows}) == scenarios  # one view per scenario, shared by every reader
    assert repeated(suggested) == []


def test_outside_a_command_every_call_reads_the_document_as_it_is_now():
    doc = load(BEFORE)
    residual_before = headline.headline_rows(doc)[-1].times_us[0]
    doc.runs[0].residual.cpu_time_us += 1000.0  # an edit between two readings, as tests make
    assert headline.headline_rows(doc)[-1].times_us[0] == pytest.approx(residual_before + 1000.0)
