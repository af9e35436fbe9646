"""The folder layout is the architecture (docs/DESIGN.md, "Layers"): each rule here is one
line of that section, and fails on the import that breaks it.

Layers, lowest first; a module may import its own layer and the ones below, never above:

    lesson_model      the decoder and its analyses (torch, transformers; no Streamlit, no plotly)
    server resources  the process's shared things: models and run cache, script slots,
                      training queue, heap, warm-up status, the runtime facts the classroom needs
    course words      course.i18n, course.text, course.tokens, course.nav: catalogs, escaping,
                      token labels and the course map (plain functions; no Streamlit at import)
    course.figures    pure figure builders: numbers in, figure out (plotly; no Streamlit)
    course            the lesson page kit: scaffold, state, i18n, text, theme, cached computations, notices
    classroom         the frame around a lesson (shell) and the teaching features
    app_pages         one script per lesson
    entry             app.py (the router), server.serve and server.warmup (the process's start)

tools/ (websocket and browser clients) serve bench/ and tests/ only.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("lesson_model", "course", "classroom", "server", "tools", "app_pages")
SERVER_RESOURCES = {"server.heap", "server.models", "server.training_queue", "server.status", "server.session"}
COURSE_WORDS = {"course.i18n", "course.text", "course.tokens", "course.nav"}
ENTRY = {"app", "server.warmup", "server.serve"}
LAYERS = ["lesson_model", "server resources", "course words", "course.figures", "course", "classroom", "app_pages",
          "entry"]


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, pathlib.Path]:
    found = {"app": ROOT / "app.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


MODULES = project_modules()


def layer(module: str) -> str | None:
    if module in ENTRY:
        return "entry"
    if module in SERVER_RESOURCES:
        return "server resources"
    if module in COURSE_WORDS:
        return "course words"
    for prefix in ("lesson_model", "course.figures", "course", "classroom", "app_pages"):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return None          # tools/, and server modules not yet placed (a test below fails on those)


def imports(path: pathlib.Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function, as dotted names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}     # from course import state
    return names


def project_imports(path: pathlib.Path) -> set[str]:
    """The project modules ``path`` imports (``from course import state`` -> course.state)."""
    return {name for name in imports(path) if name in MODULES}


def test_every_module_has_a_layer_or_is_a_tool():
    unplaced = [m for m in MODULES if layer(m) is None and not m.startswith("tools")
                and m not in ("course", "classroom", "server", "tools", "app_pages")]
    assert unplaced == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) is not None))
def test_a_module_imports_only_its_own_layer_and_lower(module):
    own = LAYERS.index(layer(module))
    upward = [m for m in project_imports(MODULES[module])
              if layer(m) is not None and LAYERS.index(layer(m)) > own]
    assert upward == [], f"{module} ({layer(module)}) imports a higher layer"


def test_only_bench_and_tests_use_tools():
    users = [m for m, path in MODULES.items() if not m.startswith("tools")
             and any(i.startswith("tools") for i in project_imports(path))]
    assert users == []


def test_lesson_model_imports_no_ui_library_and_nothing_above_it():
    for module, path in MODULES.items():
        if module.startswith("lesson_model"):
            top = {name.split(".")[0] for name in imports(path)}
            assert not top & {"streamlit", "plotly", "course", "classroom", "server", "tools", "app_pages"}, module


def test_lesson_model_and_its_analyses_import_without_streamlit_or_plotly():
    code = ("import sys, lesson_model, lesson_model.analysis, lesson_model.speculative; "
            "import pkgutil, importlib; "
            "[importlib.import_module('lesson_model.analysis.' + m.name) "
            " for m in pkgutil.iter_modules(lesson_model.analysis.__path__)]; "
            "bad = [m for m in ('streamlit', 'plotly') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# What a figure builder may not know about: Streamlit, the session, the page kit's drawing, the server.
FIGURES_MAY_NOT_IMPORT = ("streamlit", "course.state", "course.theme", "course.lesson", "course.model",
                          "course.controls", "course.cache", "classroom", "server")


def test_figures_import_no_streamlit_and_no_session_state():
    for module, path in MODULES.items():
        if module.startswith("course.figures"):
            bad = [name for name in imports(path)
                   if any(name == b or name.startswith(b + ".") for b in FIGURES_MAY_NOT_IMPORT)]
            assert bad == [], module


def test_figures_load_without_streamlit():
    """Not even through a helper they import (course.i18n loads Streamlit only when asked for the session's language)."""
    code = ("import sys, pkgutil, importlib, course.figures; "
            "[importlib.import_module('course.figures.' + m.name) for m in pkgutil.iter_modules(course.figures.__path__)]; "
            "import course.notices; "
            "[importlib.import_module('course.notices.' + m.name) for m in pkgutil.iter_modules(course.notices.__path__)]; "
            "bad = [m for m in sys.modules if m == 'streamlit' or m.startswith('streamlit.')]; "
            "print(bad[:5]); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_only_server_touches_streamlit_internals():
    """streamlit.runtime and streamlit.web belong to server/; the wire format (streamlit.proto) to tools/."""
    for module, path in MODULES.items():
        for name in imports(path):
            if name.startswith(("streamlit.runtime", "streamlit.web")):
                assert module.startswith("server."), (module, name)
            if name.startswith("streamlit.proto"):
                assert module.startswith("tools."), (module, name)
    for path in [*ROOT.glob("*.py"), *(ROOT / "app_pages").glob("*.py")] + [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        if not str(path.relative_to(ROOT)).startswith(("server", "tools")):
            assert "_stcore" not in text and "get_script_run_ctx" not in text, path


def test_no_two_modules_import_each_other_even_through_others():
    graph = {m: project_imports(path) - {m} for m, path in MODULES.items()}
    # Tarjan's strongly connected components: a component of more than one module is a circle.
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    # A package's __init__ importing its own modules is not a circle of two modules.
    circles = [c for c in circles if not all(m in PACKAGES or "." not in m for m in c)]
    assert circles == []


def test_package_exports_do_not_shadow_analysis_modules():
    import pkgutil

    import lesson_model.analysis as analysis
    modules = {m.name for m in pkgutil.iter_modules(analysis.__path__)}
    assert not modules & set(analysis.__all__)


_DOC = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[A-Z][A-Z_]+\.md)\b")


def test_no_file_refers_to_a_document_that_is_not_in_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    names = {pathlib.PurePosixPath(p).name for p in tracked} | set(tracked)
    missing = []
    for rel in tracked:
        if not rel.endswith((".py", ".md", ".toml", ".ini", ".json")) or rel.startswith("assets/"):
            continue
        text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
        missing += [(rel, doc) for doc in _DOC.findall(text) if doc not in names and pathlib.PurePosixPath(doc).name not in names]
    assert missing == []


def test_the_readmes_layout_matches_the_tree():
    """Every folder the README's Layout block names exists, and every top-level folder of the
    repository (and every package under course/) is named there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    named = {line.split()[0].rstrip("/") for line in block.splitlines() if line and not line.startswith(" ")}
    assert all((ROOT / name).exists() for name in named), sorted(n for n in named if not (ROOT / n).exists())
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    top = {p.split("/")[0] for p in tracked if "/" in p and not p.startswith(".")}
    subpackages = {"/".join(p.split("/")[:2]) for p in tracked if p.startswith("course/") and p.count("/") >= 2}
    assert (top | subpackages) - named == set()


def _statements(path: pathlib.Path) -> list[ast.stmt]:
    return ast.parse(path.read_text(encoding="utf-8")).body


@pytest.mark.parametrize("page", sorted(p.stem for p in (ROOT / "app_pages").glob("*.py")))
def test_a_page_is_a_render_function_over_pure_helpers(page):
    """docs/DESIGN.md, "A lesson page": at module level only the docstring, imports, constants
    and functions; the body in render(), called on the last line; no cached function defined in
    the page (course/cache/<page>.py holds them, where the warm-up can reach them)."""
    body = _statements(ROOT / "app_pages" / f"{page}.py")
    allowed = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    stray = [node.lineno for node in body[1:-1] if not isinstance(node, allowed)]
    assert stray == [], f"app_pages/{page}.py runs code at module level (lines {stray})"
    for node in body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):      # constants only: no calls into the app
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            assert not names & {"st", "page", "lm", "state"}, f"app_pages/{page}.py line {node.lineno}"
    last = body[-1]
    assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and getattr(last.value.func, "id", "") == "render"
    renders = [n for n in body if isinstance(n, ast.FunctionDef) and n.name == "render"]
    assert len(renders) == 1
    source = (ROOT / "app_pages" / f"{page}.py").read_text(encoding="utf-8")
    assert "cache_data" not in source and "cache_resource" not in source and "state.detached" not in source
