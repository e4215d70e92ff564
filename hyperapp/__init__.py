"""hyperapp: find targets in hyperspectral images, on the GPU, fast enough to feel live."""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"

# In a source checkout (PYTHONPATH=<repo>, as on the GPU machine) the top-level models/ and kernels/
# folders are what the wheel installs as hyperapp.models and hyperapp.kernels; let the import system
# find them there too. An installed wheel has them inside this package and never takes this branch.
_here = _Path(__file__).resolve().parent
if not (_here / "models").is_dir() and (_here.parent / "models" / "__init__.py").is_file():
    __path__.append(str(_here.parent))  # type: ignore[name-defined]  # noqa: F821
