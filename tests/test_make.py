"""The set-up commands (Makefile, pyproject.toml): `make demo` installs what the demo runs, `make
install` / `make test` add the pinned test stack to the same .venv, either after the other; the
editable install is a plain path entry, without setuptools' warning for flat layouts."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# A stand-in for `python3 -m venv DIR`: a venv whose pip and gymwatch only log how they were called.
FAKE_PY = """#!/bin/sh
[ "$1 $2" = "-m venv" ] || exit 2
mkdir -p "$3/bin"
for tool in pip gymwatch python; do
  printf '#!/bin/sh\\necho "%s $*" >> "%s/calls.log"\\n' "$tool" "$3" > "$3/bin/$tool"
  chmod +x "$3/bin/$tool"
done
"""


def make(venv: Path, fake: Path, *goals: str) -> list[str]:
    """Run make in the repo against a fake venv; the pip / gymwatch calls it made."""
    log = venv / "calls.log"
    before = log.read_text().splitlines() if log.exists() else []
    res = subprocess.run(["make", "-s", "-C", str(REPO), f"VENV={venv}", f"PY={fake}", *goals],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return (log.read_text().splitlines() if log.exists() else [])[len(before):]


@pytest.fixture
def fake_py(tmp_path: Path) -> Path:
    fake = tmp_path / "fake-python3"
    fake.write_text(FAKE_PY)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


def test_make_demo_installs_what_the_demo_runs_and_make_install_adds_the_test_stack(tmp_path, fake_py):
    venv = tmp_path / "v1"
    assert make(venv, fake_py, "demo") == ["pip install -q --upgrade pip", "pip install -q -e .", "gymwatch demo"]
    assert make(venv, fake_py, "install") == ["pip install -q -e .[test]"]     # the same venv, the test stack added
    assert make(venv, fake_py, "demo") == ["gymwatch demo"]                    # nothing to install again
    assert make(venv, fake_py, "install") == []


def test_make_demo_after_make_install_installs_nothing(tmp_path, fake_py):
    venv = tmp_path / "v2"
    assert make(venv, fake_py, "install") == ["pip install -q --upgrade pip", "pip install -q -e .[test]"]
    assert make(venv, fake_py, "demo") == ["gymwatch demo"]


@pytest.mark.timeout(240)
def test_the_editable_install_is_a_path_entry_without_a_warning(tmp_path):
    """setuptools installs a flat layout that does not name its package root through an import
    hook and warns at every install ("Please be careful with folders in your working directory
    ..."); pyproject.toml names the root, so the install is a plain .pth path entry."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "gymwatch", project / "gymwatch", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    # -v: the build's own output, which a newer pip shows even with -q (make install upgrades pip)
    res = subprocess.run([str(venv / "bin" / "pip"), "install", "-v", "--no-deps", "--disable-pip-version-check",
                          "-e", str(project)], capture_output=True, text=True, timeout=200, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    said = res.stdout + res.stderr
    assert "Building editable for gymwatch" in said
    assert "Editable installation" not in said and "Please be careful" not in said and "meta path finder" not in said
    pth = list((venv / "lib").glob("python3*/site-packages/__editable__.gymwatch-*.pth"))
    assert len(pth) == 1 and pth[0].read_text().strip() == str(project)
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import gymwatch.sim; print(gymwatch.sim.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert where.stdout.strip() == str(project / "gymwatch" / "sim" / "__init__.py"), where.stderr
