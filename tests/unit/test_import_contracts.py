"""The plugin surface is enforced: adapters/ and tools/ reach the core only through gateway.sdk,
and `lint-imports` refuses a plugin that imports a core module directly."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_core_package_but_the_sdk_is_forbidden_to_plugins() -> None:
    (forbidden,) = [c for c in _contracts() if c["type"] == "forbidden"]
    packages = {
        f"gateway.{p.name}" for p in (ROOT / "gateway").iterdir() if (p / "__init__.py").exists()
    }
    # A list of module names in pyproject.toml (tomllib's data is untyped).
    forbidden_modules = cast(list[str], forbidden["forbidden_modules"])
    assert set(forbidden_modules) == packages - {"gateway.sdk"}
    assert sorted(p.name for p in (ROOT / "gateway").glob("*.py")) == ["__init__.py"]


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_plugins_deep_import_is_refused(tmp_path: Path) -> None:
    for name in ("gateway", "adapters", "tools"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint(tmp_path).returncode == 0

    (tmp_path / "adapters" / "telegram" / "deep.py").write_text(
        '"""A plugin module that reaches past the sdk."""\n\n'
        "from gateway.sessions.queue import SessionQueue\n\n"
        "__all__ = ['SessionQueue']\n",
        encoding="utf-8",
    )
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "Plugins import the core only through gateway.sdk BROKEN" in result.stdout
    assert "adapters.telegram.deep -> gateway.sessions.queue" in result.stdout


# Single-underscore attributes of the standard library and of Python that are documented API.
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_exit", "_missing_"}


def _own_names(tree: ast.AST) -> set[str]:
    """Names a module defines itself: its functions, classes, and the attributes it assigns."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _private_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    own = _own_names(tree) | PUBLIC_UNDERSCORED
    where = path.relative_to(ROOT)
    found = []
    for node in ast.walk(tree):
        imports: list[tuple[int, str]] = []  # (line, module)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imports = [(node.lineno, node.module)]
        elif isinstance(node, ast.Import):
            imports = [(node.lineno, alias.name) for alias in node.names]
        for line, module in imports:
            if any(part.startswith("_") and part != "__future__" for part in module.split(".")):
                found.append(f"{where}:{line} imports {module}")
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in own
            # A subclass reads what its base class (of this project) set.
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"{where}:{node.lineno} reads {ast.unparse(node)}")
    return found


def test_no_plugin_or_core_module_uses_a_librarys_private_api() -> None:
    """No import of a private module (`telegram._utils`), and no private attribute the module
    does not define itself (aiohttp's `site._server`, PTB's `exc._retry_after`): a library
    may change those in any release."""
    found = [
        use
        for package in ("gateway", "adapters", "tools")
        for path in sorted((ROOT / package).rglob("*.py"))
        for use in _private_uses(path)
    ]
    assert found == []
