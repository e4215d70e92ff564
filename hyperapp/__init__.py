"""hyperapp: find targets in hyperspectral images, on the GPU, fast enough to feel live.

``hyperapp.models``, ``hyperapp.kernels`` and ``hyperapp.sample_cubes`` live in the repository's
top-level ``models/``, ``kernels/`` and ``sample_cubes/`` folders; the build maps them into this package
(``setup.py``). Work from a checkout through an install, ``pip install -e .``, never through
``PYTHONPATH``: the checkout and the installed wheel then import exactly the same way.
"""

from __future__ import annotations

import os

__version__ = "0.1.0"

#: CuPy's CUB block reductions compile one kernel per thread-block size, chosen from the length reduced, so
#: a cube of a band count never seen compiled on its first run; CuPy's own reductions compile once per type.
#: Set before any CuPy import (this package's is the first); a user's own CUPY_ACCELERATORS is kept.
os.environ.setdefault("CUPY_ACCELERATORS", "")
