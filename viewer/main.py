"""Served entry of the viewer: `panel serve viewer/ [--args --runs-dir DIR]` (or set AITUNE_VIEWER_RUNS_DIR)."""

import os
import sys
from pathlib import Path

import panel as pn

from aitune.viewer.app import build_page, runs_dir_from

DEFAULT_RUNS_DIR = Path(__file__).resolve().parent.parent / "sample_traces"

runs_dir = runs_dir_from(sys.argv[1:], os.environ, DEFAULT_RUNS_DIR)
build_page(runs_dir, pn.state.session_args or {}).servable(title="aitune viewer")
