"""CUDA sources of hyperapp and their loader.

Each algorithm has one ``.cu`` file here, shipped as package data with the ``.cuh`` headers that
several of them share. :func:`get_kernel` reads it with :mod:`importlib.resources`, expands its quoted
includes of the package's headers (:func:`kernel_source`), prepends ``#line 1 "<file>"`` so compiler
errors point at the real file and line, injects compile-time constants as ``#define`` lines, and
compiles it with :class:`cupy.RawModule` (template kernels through their name expressions). Modules are built lazily (never at import) and
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
import re
from importlib import resources

#: a line ``#include "file"`` (a quoted include, optionally followed by a ``//`` comment)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*(//.*)?$')


def _packaged(file: str) -> bool:
    """Whether ``file`` is a plain file name (no folder) of a file shipped in this package."""
    return "/" not in file and "\\" not in file and resources.files(__name__).joinpath(file).is_file()


def _expand(file: str, outer: tuple[str, ...]) -> str:
    text = resources.files(__name__).joinpath(file).read_text(encoding="utf-8")
    parts = []
    for i, line in enumerate(text.splitlines(keepends=True), start=1):
        m = _INCLUDE.match(line.rstrip("\r\n"))
        if m is None or not _packaged(m.group(1)):
            parts.append(line)
            continue
        header = m.group(1)
        if header in outer + (file,):
            raise ValueError(f"kernels/{file}: line {i}: #include \"{header}\" includes itself")
        body = _expand(header, outer + (file,))
        parts += [f'#line 1 "{header}"\n', body if body.endswith("\n") else body + "\n",
                  f'#line {i + 1} "{file}"\n']
    return "".join(parts)


def kernel_source(name: str) -> str:
    """Text of ``kernels/<name>.cu``, its includes of the package's headers expanded.

    A line ``#include "file"`` whose ``file`` is a plain file name of this package (``quadform_common.cuh``)
    becomes ``#line 1 "file"``, the file's own text (its includes expanded in turn) and ``#line N+1
    "<name>.cu"`` (N: the include's line), so that NVRTC's errors name the real file and line. Any other
    include (``<...>``, a file not in the package, a path with a folder) is left as it is, for NVRTC to
    resolve or to report; a file that includes itself, directly or through others, raises ValueError.
    The caller prepends ``#line 1 "<name>.cu"`` (:func:`get_module` does).
    """
    return _expand(f"{name}.cu", ())


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


def allow_shared(kernel, nbytes: int) -> None:
    """Let ``kernel`` (a :class:`cupy.RawKernel`) launch with ``nbytes`` of dynamic shared memory. Past 48 KB
    a launch needs the opt-in attribute, and that 48 KB counts the kernel's static shared memory too: a test
    of ``nbytes > 48 KB`` alone let launches within the static part of it fail with an invalid argument (the
    FFBP's training kernel at 224 and 230 bands). The attribute only grows: one kernel serves every band
    count, and lowering it for a narrower cube would fail the next launch for a wider one."""
    if kernel.max_dynamic_shared_size_bytes < nbytes:
        kernel.max_dynamic_shared_size_bytes = nbytes
