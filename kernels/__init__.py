"""CUDA sources of hyperapp and their loader.

Each algorithm has one ``.cu`` file here, shipped as package data. :func:`get_kernel` reads it with
:mod:`importlib.resources`, prepends ``#line 1 "<file>"`` so compiler errors point at the real file,
injects compile-time constants as ``#define`` lines, and compiles it with :class:`cupy.RawModule`
(template kernels through their name expressions). Modules are built lazily (never at import) and
cached per device and specialisation; CuPy also keeps its own on-disk cache of the compiled cubins, so
a second process does not recompile.

No kernel is specialised on the data's shape: band counts and sizes are runtime arguments, and where a
kernel needs a size at compile time (registers) it is a template instantiated from a small fixed set
(padded sizes), so ``prepare-gpu`` compiles every module any cube will need once per installation
(:func:`hyperapp.batch.prepare_gpu.kernel_variants`). Only constants that never vary with the data (block
sizes, tunables) are ``#define``s.
"""

from __future__ import annotations

import functools
from importlib import resources


def kernel_source(name: str) -> str:
    """Text of ``kernels/<name>.cu``."""
    return resources.files(__name__).joinpath(f"{name}.cu").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=64)
def _module(name: str, defines: tuple[tuple[str, object], ...], device_id: int, name_expressions: tuple):
    import cupy

    header = "".join(f"#define {k} {v}\n" for k, v in defines)
    code = header + f'#line 1 "{name}.cu"\n' + kernel_source(name)
    mod = cupy.RawModule(
        code=code,
        options=("-std=c++17", "--use_fast_math"),
        name_expressions=name_expressions or None,
    )
    mod.compile()
    return mod


def get_module(name: str, defines: dict | None = None, name_expressions=()):
    """Compiled :class:`cupy.RawModule` of ``kernels/<name>.cu`` for these ``#define``s (cached)."""
    import cupy

    key = tuple(sorted((defines or {}).items()))
    return _module(name, key, cupy.cuda.runtime.getDevice(), tuple(name_expressions))


def get_kernel(name: str, function: str, defines: dict | None = None, name_expressions=()):
    """Compiled kernel ``function`` from ``kernels/<name>.cu``.

    Parameters
    ----------
    name : str
        The ``.cu`` file's stem.
    function : str
        The ``extern "C"`` name or a template name expression.
    defines : dict, optional
        Compile-time constants (``{"NB": 64}`` becomes ``#define NB 64``); each distinct set is a
        separate cached module.
    """
    return get_module(name, defines, name_expressions).get_function(function)
