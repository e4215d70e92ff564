"""What a click loads or waits on besides its own work: CuPy's module loads (a compile, or a read from the
kernel cache on disk), Python's garbage collections and the growth of CuPy's memory pool, recorded while a
click runs (``python -m hyperapp.bench.window_click ... --trace``). A first click with none of them that
still takes longer than its second waits on something else (docs/performance.md)."""

from __future__ import annotations

import gc
import time
import traceback
from contextlib import contextmanager

#: CuPy's functions through which every kernel not yet loaded in this process passes (cupy/cuda/compiler.py)
_LOADERS = ("_compile_module_with_cache", "compile_with_cache")


class ClickTrace:
    """Records, between :meth:`during` calls' entry and exit, the events named in the module's docstring
    into :attr:`events` (each a dict with the click's name, the event's kind and its milliseconds or MiB).
    :meth:`install` hooks CuPy and the garbage collector once; events outside a click are not kept."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self._click: str | None = None
        self._gc_t = 0.0

    def install(self) -> ClickTrace:
        gc.callbacks.append(self._on_gc)
        try:
            import cupy.cuda.compiler as compiler
        except ImportError:  # a CPU-only install: collections only
            return self
        for name in _LOADERS:
            if hasattr(compiler, name):
                setattr(compiler, name, self._timed_loader(getattr(compiler, name)))
        return self

    @contextmanager
    def during(self, click: str):
        """Record the events of ``click`` (and its memory pool's growth) while the block runs."""
        pool = _pool()
        before = pool.total_bytes() if pool is not None else 0
        self._click = click
        try:
            yield
        finally:
            self._click = None
            if pool is not None and pool.total_bytes() > before:
                self.events.append({"click": click, "kind": "memory pool grew",
                                    "mib": round((pool.total_bytes() - before) / 2**20, 1)})

    def _timed_loader(self, load):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            module = load(*args, **kwargs)
            if self._click is not None:
                source = args[0] if args and isinstance(args[0], str) else ""
                kernel = next((ln.strip()[:90] for ln in source.splitlines() if "__global__" in ln), "")
                caller = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in traceback.extract_stack()
                          if "hyperapp" in f.filename][-3:]
                self.events.append({"click": self._click, "kind": "module loaded", "kernel": kernel,
                                    "ms": round((time.perf_counter() - t) * 1e3, 2), "from": caller})
            return module
        return timed

    def _on_gc(self, phase: str, info: dict) -> None:
        if self._click is None:
            return
        if phase == "start":
            self._gc_t = time.perf_counter()
        else:
            self.events.append({"click": self._click, "kind": "garbage collection",
                                "generation": info["generation"],
                                "ms": round((time.perf_counter() - self._gc_t) * 1e3, 2)})


def _pool():
    """CuPy's default memory pool, or None without CuPy."""
    try:
        import cupy
    except ImportError:
        return None
    return cupy.get_default_memory_pool()
