"""The plugin surface is enforced: adapters/ and tools/ reach the core only through gateway.sdk,
and `lint-imports` refuses a plugin that imports a core module directly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

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
    assert set(forbidden["forbidden_modules"]) == packages - {"gateway.sdk"}  # type: ignore[arg-type]
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
