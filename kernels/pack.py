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
    not read (float16; a complex array's real part) takes CuPy's casts and concatenate instead."""
    xp = get_namespace(*arrays)
    if xp is np or any(a.dtype not in _PACK_CODES for a in arrays):
        # the same 8-byte slots through CuPy's casts: each array cast to float64 or int64 and read as its bits,
        # so that integers stay exact beside floats (a plain concatenate would promote them to float64)
        def bits(a):
            kind = np.float64 if a.dtype.kind in "fc" else np.uint64 if a.dtype == np.uint64 else np.int64
            return xp.ascontiguousarray(a.astype(kind)).reshape(-1).view(xp.uint64)

        return _slots_as_values(to_host(xp.concatenate([bits(a) for a in arrays])), arrays)
    from hyperapp.kernels import get_kernel

    srcs = [a if a.flags.c_contiguous else xp.ascontiguousarray(a) for a in arrays]
    n = sum(int(a.size) for a in srcs)
    if n == 0:
        return _slots_as_values(np.zeros(0, np.uint64), arrays)
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
    return _slots_as_values(out.get(), arrays)


def _slots_as_values(host: np.ndarray, arrays: list) -> list[np.ndarray]:
    """The host buffer of 8-byte slots split into the arrays' flat values: floats read as float64, uint64
    as it is, every other integer (and bool) as int64."""
    parts, i = [], 0
    for a in arrays:
        seg = host[i:i + a.size]
        i += a.size
        parts.append(seg.view(np.float64) if a.dtype.kind in "fc" else seg if a.dtype == np.uint64
                     else seg.view(np.int64))
    return parts
