"""hyperapp: find targets in hyperspectral images, on the GPU, fast enough to feel live.

``hyperapp.models``, ``hyperapp.kernels`` and ``hyperapp.sample_cubes`` live in the repository's
top-level ``models/``, ``kernels/`` and ``sample_cubes/`` folders; the build maps them into this package
(``setup.py``). Work from a checkout through an install, ``pip install -e .``, never through
``PYTHONPATH``: the checkout and the installed wheel then import exactly the same way.
"""

from __future__ import annotations

__version__ = "0.1.0"
