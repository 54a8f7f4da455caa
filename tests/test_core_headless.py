"""The headless core and the report never import Textual (the TUI is a thin layer on top)."""

import subprocess
import sys

CODE = """
import pkgutil, importlib, sys
import gymwatch.core as core
for m in pkgutil.iter_modules(core.__path__):
    importlib.import_module('gymwatch.core.' + m.name)
import gymwatch.report, gymwatch.cli
from gymwatch.core.session import read_run
bad = sorted(k for k in sys.modules if k == 'textual' or k.startswith('textual.'))
print(bad)
"""


def test_core_does_not_import_textual():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
