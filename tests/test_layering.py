"""The science never imports the screen: models, kernels, io and the core run without Qt."""

import subprocess
import sys

CODE = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('PySide6', 'pyqtgraph', 'shiboken6'):
            raise ImportError('Qt blocked: ' + name)
sys.meta_path.insert(0, Block())
import hyperapp.cli, hyperapp.detect.run, hyperapp.io, hyperapp.core.cube, hyperapp.core.backend, hyperapp.io.samples
import hyperapp.bench, hyperapp.bench.cases, hyperapp.kernels
import hyperapp.models.classic, hyperapp.models.registry, hyperapp.models.evaluation
from hyperapp.cli import main
sys.exit(main(['--headless', 'info', sys.argv[1]]))
"""


def test_headless_path_imports_no_qt(land_hdr, tmp_path):
    r = subprocess.run([sys.executable, "-c", CODE, str(land_hdr)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "128 rows" in r.stdout
