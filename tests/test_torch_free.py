"""The torch-free core imports and works where torch is not installed."""

import subprocess
import sys


def test_analysis_and_report_import_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import aitune.analysis, aitune.report, aitune.markers, aitune.errors\n"
        "from aitune.report import build_profile, render_markdown\n"
        "run = {'ph': 'X', 'cat': 'user_annotation', 'name': 'aitune::run::0', 'ts': 0, 'dur': 10}\n"
        "doc = build_profile({'traceEvents': [run], 'aitune': {'config': {'measured_runs': 1}}})\n"
        "print(render_markdown(doc).splitlines()[0])\n"
    )

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout == "# aitune performance profile\n"


def test_compare_suggest_gains_the_loop_report_bundle_merge_the_history_and_the_cli_import_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import aitune.compare, aitune.suggest, aitune.compare.gains, aitune.compare.loop_report, aitune.cli\n"
        "import aitune.report.bundle\n"
        "import aitune.report.merge, aitune.report.cache\n"
        "import aitune.history.store, aitune.history.gate, aitune.history.exchange, aitune.history.html\n"
        "import aitune.history.sources, aitune.cli.history, aitune.cli.history_views\n"
        "print(sorted(name for name in sys.modules if name.startswith('torch')))\n"
    )

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout == "['torch']\n"  # only the blocked entry itself
