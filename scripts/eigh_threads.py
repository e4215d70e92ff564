"""A 64 x 64 ``eigh`` on the host with the BLAS threads as loaded and with one (serial_host_blas),
after some CuPy work: the host-side cost that made live clicks differ between GPU hosts."""

import statistics
import time

import numpy as np

from hyperapp.core.backend import serial_host_blas

rng = np.random.default_rng(0)
A = rng.normal(size=(4000, 64))
C = A.T @ A
try:
    import cupy

    x = cupy.ones((1 << 20, 64), cupy.float32)
    (x.T @ x).get()
except ImportError:
    pass


def t(fn, n=50):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out), max(out)


print("eigh 64x64, BLAS threads as loaded: median {:.3f} ms, max {:.3f}".format(*t(lambda: np.linalg.eigh(C))))
with serial_host_blas:
    print("eigh 64x64, one BLAS thread:       median {:.3f} ms, max {:.3f}".format(*t(lambda: np.linalg.eigh(C))))
print("after: as loaded again:             median {:.3f} ms, max {:.3f}".format(*t(lambda: np.linalg.eigh(C))))
