"""The house stays in order: no import circles, every file on the map (docs/architecture.md), imports pointing
down its layers (the map's order), torch only in torch/.

Imports are read from the source with `ast`, at every level: a function-level (lazy) import and one under
``TYPE_CHECKING`` are arrows too, since each makes one file depend on the other.
"""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "aitune"
MAP = ROOT / "docs" / "architecture.md"

TORCH_FREE = (
    "analysis",
    "report",
    "compare",
    "suggest",
    "history",
    "viewer",
    "errors",
    "markers",
    "profiler_lines",
    "cpuinfo",
)
"""Folders and foundation files a maintainer runs without torch (`cli/` imports `aitune.torch` lazily, for
capture and tune only; `test_torch_free.py` imports them all with torch blocked)."""

KNOWN_CIRCLES: list[set[str]] = []


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The package's modules that ``module`` imports anywhere in its source; ``from a import b`` names ``a.b``
    when that is a module, else ``a``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from filter(None, (_owner(alias.name, modules) for alias in node.names))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                name = f"{base}.{alias.name}"
                owner = name if name in modules else _owner(base, modules)
                if owner:
                    yield owner


def _owner(name: str, modules: dict[str, Path]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {
        module: {target for target in imported(module, path, modules) if target != module}
        for module, path in modules.items()
    }


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = {stack.pop()}
                    while node not in group:
                        group.add(stack.pop())
                    if len(group) > 1:
                        found.append(group)
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in stack:
                low[node] = min(low[node], index[target])
    return found


def mapped_files(text: str) -> set[str]:
    """Paths (from the repository root) of the ``.py`` files the map's tree names: a ``name/`` that starts a
    line opens that folder for the lines indented deeper; any ``x.py`` or ``dir/x.py`` on a line is in the
    innermost folder open there."""
    tree = text.split("```text\n", 1)[1].split("```", 1)[0]
    folders: list[tuple[int, str]] = []
    found = set()
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        first = line.split()[0] if line.strip() else ""
        if first.endswith("/"):
            folders.append((indent, first))
        folder = "".join(name for _, name in folders)
        found |= {folder + name for name in re.findall(r"[\w/]+\.py\b", line)}
    return found


def map_order(text: str, folder: str) -> dict[str, int]:
    """The parts of ``folder`` (``aitune/``, ``aitune/torch/``) by the row of the map's tree that names them, the
    lowest layer first: a child folder by its own line, child files by the line that lists them (files on one line
    share a layer); lines indented deeper than the children describe, and name no part."""
    tree = text.split("```text\n", 1)[1].split("```", 1)[0]
    folders: list[tuple[int, str]] = []
    order: dict[str, int] = {}
    child_indent = None
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        first = line.split()[0] if line.strip() else ""
        if "".join(name for _, name in folders) == folder and child_indent in (None, indent):
            child_indent = indent
            names = [first] if first.endswith("/") else re.findall(r"\b\w+\.py\b", line)
            layer = max(order.values(), default=-1) + 1
            order |= {name.removesuffix("/").removesuffix(".py"): layer for name in names}
        if first.endswith("/"):
            folders.append((indent, first))
    return order


def upward_imports(graph: dict[str, set[str]], package: str, order: dict[str, int]) -> list[str]:
    """Imports between two parts of ``package`` (``aitune.torch``) that run to a part the map places above the
    importer (a higher layer), and parts the map does not place; the package's own face re-exports and is skipped."""

    def part(module: str) -> str | None:
        return module.removeprefix(package + ".").split(".")[0] if module.startswith(package + ".") else None

    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = part(module), part(target)
            if low is None or high is None or low == high:
                continue
            if low not in order or high not in order:
                found.append(f"{module} imports {target}: place {low if low not in order else high} on the map")
            elif order[high] > order[low]:
                found.append(f"{module} imports {target}, which the map places above it")
    return found


def test_no_module_of_the_package_imports_itself_back_through_others():
    found = circles(import_graph())

    unexpected = [sorted(group) for group in found if group not in KNOWN_CIRCLES]
    gone = [sorted(group) for group in KNOWN_CIRCLES if group not in found]
    assert not unexpected, f"import circles (move what both sides need below them): {unexpected}"
    assert not gone, f"these circles are gone: delete them from KNOWN_CIRCLES: {gone}"


def test_the_circle_finder_sees_a_lazy_import_and_a_type_only_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from aitune import errors\n"
        "def later():\n    from .markers import REGION_SPAN_PREFIX\n",
        encoding="utf-8",
    )

    assert set(imported("aitune.probe", probe, module_names())) == {"aitune.errors", "aitune.markers"}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_the_map_reader_places_each_file_in_the_folder_its_line_is_indented_under():
    text = """```text
aitune/
  errors.py                  the error family
  report/        the document
    io.py markdown.py        reading, writing; a view
                             described at length, mentioning builder.py
  torch/         torch
    performance/ capture.py
    loop.py
```
"""

    assert mapped_files(text) == {
        "aitune/errors.py",
        "aitune/report/io.py",
        "aitune/report/markdown.py",
        "aitune/report/builder.py",
        "aitune/torch/performance/capture.py",
        "aitune/torch/loop.py",
    }


def test_every_file_of_the_package_is_on_the_map():
    named = mapped_files(MAP.read_text(encoding="utf-8"))
    files = {
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"  # a package's face: the map names the folder
    }

    missing = sorted(files - named)
    assert not missing, f"name these files in docs/architecture.md, each with its one idea: {missing}"
    stale = sorted(path for path in named - files if path.startswith("aitune/"))
    assert not stale, f"docs/architecture.md names files that do not exist: {stale}"


def test_the_map_orders_a_folders_parts_by_their_lines_and_sees_an_import_running_up_it():
    text = """```text
aitune/
  torch/         torch
    devices.py precision.py                  foundations, described at length
                                             over two lines that mention loop.py
    graphs/      records
      graph_spec.py
    tuning/      the engine
    loop.py
```
"""

    order = map_order(text, "aitune/torch/")
    graph = {
        "aitune.torch.loop": {"aitune.torch.tuning.api", "aitune.torch.devices"},
        "aitune.torch.precision": {"aitune.torch.devices"},
        "aitune.torch.graphs.graph_spec": {"aitune.torch.tuning.tuner", "aitune.torch.jit.session"},
        "aitune.torch": {"aitune.torch.loop"},
    }

    assert order == {"devices": 0, "precision": 0, "graphs": 1, "tuning": 2, "loop": 3}
    assert upward_imports(graph, "aitune.torch", order) == [
        "aitune.torch.graphs.graph_spec imports aitune.torch.jit.session: place jit on the map",
        "aitune.torch.graphs.graph_spec imports aitune.torch.tuning.tuner, which the map places above it",
    ]


def test_every_import_between_the_top_level_stages_points_down_the_layers_of_the_map():
    order = map_order(MAP.read_text(encoding="utf-8"), "aitune/")

    offenders = upward_imports(import_graph(), "aitune", order)

    assert not offenders, f"imports that run back up (move what both need below them): {offenders}"


def test_every_import_between_the_parts_of_torch_points_down_its_layers():
    order = map_order(MAP.read_text(encoding="utf-8"), "aitune/torch/")

    offenders = upward_imports(import_graph(), "aitune.torch", order)

    assert not offenders, f"imports that run back up inside torch/ (move what both need below them): {offenders}"


def test_capture_and_the_calibration_service_sit_below_tuning_so_capture_never_needs_it():
    order = map_order(MAP.read_text(encoding="utf-8"), "aitune/torch/")

    assert order["calibration"] < order["performance"] < order["tuning"]


def test_the_torch_free_folders_never_import_torch_not_even_lazily():
    offenders = [
        f"{module} imports {target}"
        for module, targets in _imports_with_outside_ones().items()
        if _stage(module) in TORCH_FREE
        for target in targets
        if target.split(".")[0] == "torch" or target.startswith("aitune.torch")
    ]

    assert not offenders, f"torch-free code that imports torch: {offenders}"


def _stage(module: str) -> str:
    """``aitune.report.io`` → ``report``; ``aitune.errors`` → ``errors``; ``aitune`` → ``""``."""
    return [*module.split("."), ""][1]


def _imports_with_outside_ones() -> dict[str, set[str]]:
    """Each module's imports by dotted name, other packages' included (``torch``, ``torch.nn``)."""
    modules = module_names()
    found = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        found[module] = names | set(imported(module, path, modules))
    return found
