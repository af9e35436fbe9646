"""constraints.txt: the exact version of every package the course installs, requirements.txt's
and requirements-dev.txt's pins and everything they pull in (the server stack under Streamlit:
starlette, uvicorn, protobuf, pillow, requests, urllib3, ...), as installed in the working venv.

    .venv/bin/python -m deploy.pins > constraints.txt     # after changing requirements*.txt

``./lab`` and deploy/Dockerfile install with ``-r requirements.txt -c constraints.txt``, so a new
machine gets the versions that were tested, not whatever is newest that day.
tests/test_deploy_files.py checks that every package the app imports, and all that those need,
is pinned here at the installed version.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ("requirements.txt", "requirements-dev.txt")
CONSTRAINTS = ROOT / "constraints.txt"
# The code that runs in an app process or runs the cluster: what it imports must be pinned.
RUNTIME = ("app.py", "app_pages", "classroom", "course", "lesson_model", "server", "deploy")


def top_requirements(files=REQUIREMENTS) -> list[str]:
    """The distributions requirements*.txt name (canonical names)."""
    names = []
    for name in files:
        for line in (ROOT / name).read_text("utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                names.append(canonicalize_name(Requirement(line).name))
    return names


def closure(names) -> set[str]:
    """``names`` and every distribution they require on this platform (installed ones: a
    requirement whose marker excludes this machine is left out), canonical names."""
    env = {**default_environment(), "extra": ""}
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(canonicalize_name(req.name))
    return seen


def imported_modules(paths=RUNTIME) -> set[str]:
    """Top-level names of the modules the runtime code imports anywhere (lazy imports in
    functions too), outside the standard library and this project."""
    own = {p.stem if p.suffix else p.name for p in ROOT.iterdir() if p.suffix in ("", ".py")}
    found: set[str] = set()
    for entry in paths:
        path = ROOT / entry
        for file in ([path] if path.is_file() else sorted(path.rglob("*.py"))):
            for node in ast.walk(ast.parse(file.read_text("utf-8"), str(file))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in own and m != "__future__"}


def imported_distributions(paths=RUNTIME) -> dict[str, set[str]]:
    """{distribution: modules of it that the runtime code imports}; a module no installed
    distribution provides is under "" (a missing package)."""
    providers = metadata.packages_distributions()
    out: dict[str, set[str]] = {}
    for module in imported_modules(paths):
        for dist in providers.get(module, [""]):
            out.setdefault(canonicalize_name(dist) if dist else "", set()).add(module)
    return out


def pinned(path: Path = CONSTRAINTS) -> dict[str, str]:
    """constraints.txt as {distribution: version}."""
    pins = {}
    for line in path.read_text("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line)
            if not match:
                raise ValueError(f"{path.name}: not an exact pin: {line!r}")
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def installed(name: str) -> str:
    """The installed version without a local label (torch's "+cpu": the wheel index says which)."""
    return metadata.version(name).split("+", 1)[0]


def render() -> str:
    names = closure(top_requirements()) | set(imported_distributions()) - {""}
    lines = [line for line in __doc__.strip().splitlines()]
    out = ["# " + line if line else "#" for line in lines]
    for name in sorted(names):
        try:
            out.append(f"{name}=={installed(name)}")
        except metadata.PackageNotFoundError:
            continue
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
