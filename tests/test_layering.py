"""DESIGN.md's layering: pages -> ui -> lesson_model, and lesson_model imports no UI library."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_lesson_model_and_its_analyses_import_without_streamlit_or_plotly():
    code = ("import sys, lesson_model, lesson_model.analysis, lesson_model.speculative; "
            "import pkgutil, importlib; "
            "[importlib.import_module('lesson_model.analysis.' + m.name) "
            " for m in pkgutil.iter_modules(lesson_model.analysis.__path__)]; "
            "bad = [m for m in ('streamlit', 'plotly') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_dependencies_point_one_way():
    for path in (ROOT / "lesson_model").rglob("*.py"):
        assert not _imports(path) & {"ui", "pages", "app_pages", "streamlit", "plotly"}, path
    for path in (ROOT / "ui").rglob("*.py"):
        assert not _imports(path) & {"pages", "app_pages"}, path


def test_package_exports_do_not_shadow_analysis_modules():
    import pkgutil
    import lesson_model.analysis as analysis
    modules = {m.name for m in pkgutil.iter_modules(analysis.__path__)}
    assert not modules & set(analysis.__all__)
