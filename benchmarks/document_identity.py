"""Documents unchanged by a refactor: the profile document (JSON, and its Markdown) of every committed trace
(sample_traces/, tests/data/) and of any trace given, made by this checkout and by another one, byte for byte.

Each checkout writes its documents in a process of its own (``PYTHONPATH`` set to it); the script then lists
every trace whose JSON or Markdown differs and exits 1 when one does.

    .venv/bin/python benchmarks/document_identity.py --against ../other-checkout [more.trace.json.gz ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ("sample_traces", "tests/data")


def write_documents(out: Path, traces: list[Path]) -> None:
    """The document of each trace as ``<n>.json`` (keys sorted) and ``<n>.md``, with the checkout on the path."""
    from aitune.report import build_profile, read_trace, render_markdown

    for number, path in enumerate(traces):
        doc = build_profile(read_trace(path), str(path.name))
        (out / f"{number}.json").write_text(json.dumps(doc, sort_keys=True, indent=1))
        (out / f"{number}.md").write_text(render_markdown(doc))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="the other checkout's root")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # a child's output folder
    parser.add_argument("traces", nargs="*", type=Path)
    options = parser.parse_args()
    if options.write is not None:
        write_documents(options.write, options.traces)
        return 0
    traces = sorted(path for folder in COMMITTED for path in (ROOT / folder).rglob("*trace.json*"))
    traces += [path.resolve() for path in options.traces]
    with tempfile.TemporaryDirectory() as folder:
        outputs = []
        for name, checkout in (("this", ROOT), ("other", options.against.resolve())):
            out = Path(folder) / name
            out.mkdir()
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            command = [sys.executable, __file__, "--write", str(out), *map(str, traces)]
            subprocess.run(command, check=True, env=env, cwd=checkout)
            outputs.append(out)
        differ = [
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({suffix})"
            for number, path in enumerate(traces)
            for suffix in ("json", "md")
            if (outputs[0] / f"{number}.{suffix}").read_bytes() != (outputs[1] / f"{number}.{suffix}").read_bytes()
        ]
    print(f"{len(traces)} traces; {len(differ)} documents differ" + "".join(f"\n  {line}" for line in differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
