"""Capture sits below tuning: nothing it imports, at module level or inside a function, is tuning's."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "aitune"
TUNING = "aitune.torch.tuning"
PERFORMANCE = "aitune.torch.performance"


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import statement sits (a lazy import is still an arrow)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from aitune.torch import tuning`
    return found


def reaching(path: Path, layer: str) -> list[str]:
    return sorted(name for name in imported_modules(path) if name == layer or name.startswith(layer + "."))


def test_no_capture_module_imports_tuning():
    files = sorted((PACKAGE / "torch" / "performance").glob("*.py"))

    assert files
    assert {path.name: reaching(path, TUNING) for path in files if reaching(path, TUNING)} == {}


def test_the_calibration_service_imports_neither_capture_nor_tuning():
    service = PACKAGE / "torch" / "calibration.py"

    assert reaching(service, TUNING) == reaching(service, PERFORMANCE) == []


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from aitune.torch.tuning.api import record\n")

    assert reaching(lazy, TUNING) == ["aitune.torch.tuning.api", "aitune.torch.tuning.api.record"]
