"""The architecture is checked, not claimed: the layers' import contracts (import-linter, in
pyproject.toml), no import cycle between the project's modules (imports inside functions counted), and
the science running without Qt."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hyperapp
import hyperapp.kernels
import hyperapp.models

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _package_tree(dest: Path) -> Path:
    """The installed package as one folder tree (``hyperapp.models`` and ``hyperapp.kernels`` live in
    their own folders in a checkout), as import-linter reads a package from the file system."""
    top = dest / "hyperapp"
    ignore = shutil.ignore_patterns("__pycache__", "*.cu", "*.img", "*.hdr", "*.h5", "*.png", "*.csv")
    shutil.copytree(hyperapp.__path__[0], top, ignore=ignore)
    for sub in (hyperapp.models, hyperapp.kernels):
        target = top / sub.__name__.rpartition(".")[2]
        if not (target / "__init__.py").exists():
            shutil.copytree(sub.__path__[0], target, ignore=ignore, dirs_exist_ok=True)
    return dest


def _modules(tree: Path) -> dict[str, Path]:
    mods = {}
    for p in (tree / "hyperapp").rglob("*.py"):
        parts = list(p.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project's modules ``name`` imports anywhere in its file (at the top or inside functions)."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                out.add(t)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycle_counting_imports_inside_functions(tmp_path):
    mods = _modules(_package_tree(tmp_path))
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle_hidden_in_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_layer_contracts_hold(tmp_path):
    """``lint-imports`` with the project's contracts, on the installed package's tree."""
    pytest.importorskip("importlinter")
    tree = _package_tree(tmp_path / "tree")
    r = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
                        "sys.exit(lint_imports_command())", "--config", str(PYPROJECT), "--no-cache"],
                       cwd=tree, capture_output=True, text=True, env={"PYTHONPATH": str(tree), "PATH": ""})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken" in r.stdout


def test_a_broken_layer_fails_the_contract(tmp_path):
    """The contract can fail: a core module importing the detection service breaks it."""
    pytest.importorskip("importlinter")
    tree = _package_tree(tmp_path / "tree")
    bad = tree / "hyperapp" / "core" / "errors.py"
    bad.write_text(bad.read_text() + "\nfrom hyperapp.detect import run  # noqa\n")
    r = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
                        "sys.exit(lint_imports_command())", "--config", str(PYPROJECT), "--no-cache"],
                       cwd=tree, capture_output=True, text=True, env={"PYTHONPATH": str(tree), "PATH": ""})
    assert r.returncode != 0 and "broken" in r.stdout
