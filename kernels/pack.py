"""Several small device arrays to the host in one launch and one copy: ``pack.cu``'s loader and launch.

On the live path every copy to the host is a round trip that waits for the device, and each small CuPy
operation costs the host tens of microseconds: :func:`to_host_together` gathers any number of arrays of
any of ten element types into one buffer with one launch of ``kernels/pack.cu`` per twelve of them, then
copies that once. NumPy arrays are taken as they are, so the same calls serve both backends.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace, to_host


def to_host_together(arrays: list, dtype=np.float64) -> list[np.ndarray]:
    """Several arrays of one device on the host through one copy (one synchronisation instead of one
    each: on the live path every copy is a round trip), each cast to ``dtype`` (None: float64 for floating
    values, int64 for integers and bools, exactly) and shaped as it was. On CuPy one launch of
    ``kernels/pack.cu`` gathers them first (:func:`_packed_to_host`); host arrays are taken as they are."""
    on_device = [a for a in arrays if not _on_host(a)]
    flat = _packed_to_host(on_device) if on_device else []
    out, i = [], 0
    for a in arrays:
        if _on_host(a):
            a = np.asarray(a)
            out.append(a if dtype is None else a.astype(dtype, copy=False))
            continue
        v = flat[i].reshape(a.shape)
        i += 1
        out.append(v if dtype is None else v.astype(dtype, copy=False))
    return out


def _on_host(a) -> bool:
    return isinstance(a, (np.ndarray, np.generic, int, float, bool))


def to_host_numbers(arrays: list) -> list:
    """The elements of several small device arrays (0-d ones, slices of a few) as Python numbers, in order,
    through one copy (:func:`to_host_together`): floats for floating values, ints for integers."""
    return [v for a in to_host_together(arrays, None) for v in a.reshape(-1).tolist()]


#: element types ``kernels/pack.cu`` reads, by its type code
_PACK_CODES = {np.dtype(t): i for i, t in enumerate(
    (np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64))}
_PACK_CODES[np.dtype(bool)] = 3
#: the sources one launch of ``kernels/pack.cu`` takes (its PACK_SLOTS)
_PACK_SLOTS = 12


def _packed_to_host(arrays: list) -> list[np.ndarray]:
    """The (flat) values of device arrays on the host, floats as float64 and integers as int64 (uint64 as
    it is): one launch of ``kernels/pack.cu`` per 12 arrays into one buffer, and one copy. A type it does
    not read (float16) takes CuPy's casts and concatenate instead."""
    xp = get_namespace(*arrays)
    if xp is np or any(a.dtype not in _PACK_CODES for a in arrays):
        kinds = [np.float64 if a.dtype.kind in "fc" else np.int64 for a in arrays]
        flat = to_host(xp.concatenate([a.astype(k, copy=False).ravel() for a, k in zip(arrays, kinds)]))
        return _split_flat(flat, arrays)
    from hyperapp.kernels import get_kernel

    srcs = [a if a.flags.c_contiguous else xp.ascontiguousarray(a) for a in arrays]
    n = sum(int(a.size) for a in srcs)
    if n == 0:
        return [np.zeros(0, np.float64 if a.dtype.kind == "f" else np.int64) for a in arrays]
    out = xp.empty(n, xp.uint64)
    kern = get_kernel("pack", "hyperapp_pack")
    start = 0
    for c in range(0, len(srcs), _PACK_SLOTS):
        chunk = srcs[c:c + _PACK_SLOTS]
        ptrs, ends, types, end = [], [], 0, 0
        for j, a in enumerate(chunk):
            end += int(a.size)
            ptrs.append(np.uint64(a.data.ptr))
            ends.append(np.int64(end))
            types |= _PACK_CODES[a.dtype] << (4 * j)
        ptrs += [np.uint64(0)] * (_PACK_SLOTS - len(chunk))
        ends += [np.int64(end)] * (_PACK_SLOTS - len(chunk))
        if end:
            kern((int(min(-(-end // 256), 1024)),), (256,), (out[start:], np.int64(end), np.uint64(types), *ptrs, *ends))
        start += end
    host = out.get()
    parts, i = [], 0
    for a in arrays:
        seg = host[i:i + a.size]
        i += a.size
        parts.append(seg.view(np.float64) if a.dtype.kind == "f" else seg if a.dtype == np.uint64 else seg.view(np.int64))
    return parts


def _split_flat(flat: np.ndarray, arrays: list) -> list[np.ndarray]:
    parts, i = [], 0
    for a in arrays:
        parts.append(flat[i:i + a.size])
        i += a.size
    return parts
