"""``report`` and ``validate``: one saved profile rendered (text, Markdown, JSON, HTML) or checked."""

from __future__ import annotations

from pathlib import Path

from aitune.cli.console import console
from aitune.cli.edge import fail


def report_profile(profile: Path, *, output_format: str, output: Path | None) -> None:
    """``profile`` rendered as text on the terminal, or as Markdown, canonical JSON or HTML on stdout or ``output``."""
    from aitune.report import dumps, json_form, load

    if output_format not in ("md", "text", "json", "html"):
        fail(f"unknown --format {output_format!r}; choose md, text, json or html.")
    if output_format == "text" and output is not None:
        fail("-o writes md, json or html; drop -o to see the text report, or add --format html.")
    if output is not None:
        from aitune.cli.outputs import refuse_overwriting_inputs

        refuse_overwriting_inputs({"-o": output}, [profile])
    doc = load(profile)
    if output_format == "text":
        from aitune.cli.render import profile_view

        console.print(profile_view(doc))
        return
    from aitune.cli.outputs import emit  # what writes files is not loaded to print the text report

    if output_format == "md":
        from aitune.report import render_markdown

        emit(render_markdown(doc).encode(), output)
    elif output_format == "json":
        emit(dumps(json_form(doc)), output)
    else:
        from aitune.cli.pages import profile_page

        emit(profile_page(doc).encode(), output)


def validate_profile(profile: Path, *, as_json: bool) -> bool:
    """Check ``profile`` against the schema and its invariants and say every problem with its JSON path; whether
    it is valid."""
    from aitune.report import read_json, written_by
    from aitune.report import validate as problems_of
    from aitune.report.io import check_profile_header
    from aitune.report.key_averages import AITUNE
    from aitune.report.model import as_profile
    from aitune.report.safe_text import visible

    raw = read_json(profile)
    check_profile_header(raw, profile)
    problems = problems_of(raw)
    if as_json:
        from aitune.cli import outputs

        outputs.print_json({"path": str(profile), "valid": not problems, "problems": problems})
    elif problems:
        for problem in problems:  # one line each, however narrow the terminal: tools grep these
            console.print(visible(f"{profile}: {problem}"), markup=False, soft_wrap=True)
        console.print(f"{len(problems)} problem(s).")
    else:
        record = as_profile(raw)
        author = written_by(record)
        label = "profile" if author == AITUNE else f"{author} profile"
        verdict = f"{profile}: valid {label} (schema_version {record.schema_version})."
        console.print(visible(verdict), markup=False, soft_wrap=True)
    return not problems
