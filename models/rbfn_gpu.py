"""GPU inference of the RBFN: the fused CUDA kernel, tiled scoring of cubes larger than GPU memory, and
the score's image-wide passes started on a second stream while the fit still runs (:class:`EarlyPasses`).

The kernel (``kernels/rbfn.cu``) is a template over a small fixed set of shapes: the whitened
dimensions padded to one of :data:`K4_SET`, the hidden neurons to one of :data:`NH_SET`, diagonal
whitening and normalisation. The band count is a runtime argument, so a cube of a new sensor needs no
compilation (:func:`kernel_variants` lists what ``prepare-gpu`` compiles once per installation). The
network's parameters (padded with zeros) go up in one buffer the kernel stages into shared memory.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import device_attributes, kept_stream
from hyperapp.kernels import allow_shared, get_module

WARPS = 4
MAX_REGISTER_VALUES = 96  # z[K4] + d[NH] kept in registers
DIRECT_MIN_BANDS = 128  # wider pixels skip the shared-memory staging (see default_variant)
#: the whitened dimensions' padded sizes (dense whitening) and the hidden layer's: every network is scored
#: by the instantiation of the next sizes up (pads are zero, a padded neuron's output weight is 0)
K4_SET = (8, 16, 32, 64)
NH_SET = (4, 8, 16, 32, 48, 64, 80)
#: (variant, K4, NH, DIAG, NORM) of what a default RBFN may launch on any cube: whitened PCA-16 (PCA-8 and
#: less below 9 bands, which never take the direct kernel), 32 neurons, normalised spectra; and the
#: thesis's scaling (per-band, not normalised; ``prepare-gpu`` runs it with the default 32 neurons)
DEFAULT_SHAPES = (("staged", 16, 32, 0, 1), ("direct", 16, 32, 0, 1), ("staged", 8, 32, 0, 1),
                  ("staged", 0, 32, 1, 0))


def _pad(v: int, sizes: tuple[int, ...]) -> int | None:
    return next((s for s in sizes if s >= v), None)


def _dims(model) -> tuple[int, int, int, int, int]:
    """(bands, padded whitened dimensions (0 for diagonal whitening), padded neurons, diagonal, normalise);
    a padded size is None where the network is larger than every instantiation."""
    nb = int(model.n_bands_)
    nh = _pad(int(model.centres_.shape[0]), NH_SET)
    diag = 1 if model.diagonal_ else 0
    k4 = 0 if diag else _pad(int(model.centres_.shape[1]), K4_SET)
    return nb, k4, nh, diag, 1 if model.normalize else 0


def _nbp(nb: int) -> int:
    return (nb + 3) // 4 * 4


def _stride(nb: int) -> int:
    """Floats per staged pixel row: the row rounded up to 4, then to 4 modulo 8 (conflict-free float4 reads)."""
    p = _nbp(nb)
    return p + 4 if p % 8 == 0 else p + 8


def _param_floats(nb: int, k4: int, nh: int, diag: int) -> int:
    nbp = _nbp(nb)
    if diag:
        return nh * nbp + 2 * nbp + 2 * nh + 4
    return nbp * k4 + nh * k4 + k4 + 2 * nh + 4


def _smem_bytes(model, variant: str = "staged") -> int:
    nb, k4, nh, diag, _ = _dims(model)
    params = _param_floats(nb, k4, nh, diag) * 4
    return params if variant == "direct" else params + 2 * WARPS * 32 * _stride(nb) * 4  # two tiles per warp


def fused_fits(model) -> bool:
    """Whether the network fits the fused kernel (an instantiation, registers, and shared memory: the
    staged kernel's tiles, or for dense whitening only its parameters, :func:`default_variant`)."""
    nb, k4, nh, diag, _ = _dims(model)
    if nh is None or k4 is None:
        return False
    return nh + k4 <= MAX_REGISTER_VALUES and _smem_bytes(model, default_variant(model)) <= _smem_limit()


def _smem_limit() -> int:
    return int(device_attributes().get("MaxSharedMemoryPerBlockOptin", 48 * 1024))


def _expression(variant: str, k4: int, nh: int, diag: int, norm: int) -> str:
    b = ("false", "true")
    if variant == "direct":
        return f"hyperapp_rbfn_score_direct<{k4}, {nh}, {b[norm]}>"
    return f"hyperapp_rbfn_score<{k4}, {nh}, {b[diag]}, {b[norm]}>"


def kernel_variants() -> list[tuple[str, tuple[str, ...]]]:
    """(module, name expressions) of every instantiation a default network needs on any cube: what
    ``prepare-gpu`` compiles."""
    return [("rbfn", (_expression(*shape),)) for shape in DEFAULT_SHAPES]


#: (instantiation, device) -> [kernel, the dynamic shared memory it is allowed]
_KERNELS: dict[tuple, list] = {}


def default_variant(model) -> str:
    """``"direct"`` (no pixel staging) for dense whitening of wide pixels (or where the staged tiles would
    not fit in shared memory), else ``"staged"``."""
    nb, k4, nh, diag, _ = _dims(model)
    if diag:
        return "staged"
    wide = nb > DIRECT_MIN_BANDS or (k4 is not None and nh is not None and _smem_bytes(model) > _smem_limit())
    return "direct" if wide else "staged"


def _kernel(model, variant: str = "staged"):
    """(kernel, dynamic shared memory, device parameter buffer); each instantiation is its own module
    (compiled once, then from CuPy's on-disk cache)."""
    nb, k4, nh, diag, norm = _dims(model)
    expr = _expression(variant, k4, nh, diag, norm)
    smem = _smem_bytes(model, variant)
    import cupy

    key = (expr, cupy.cuda.runtime.getDevice())
    entry = _KERNELS.get(key)
    if entry is None:
        entry = _KERNELS[key] = [get_module("rbfn", None, (expr,)).get_function(expr), 0]
    # one kernel serves every band count, so its shared-memory allowance only ever grows (lowering it
    # for a narrower cube made the next launch for a wider one fail with an invalid argument)
    if smem > entry[1]:
        allow_shared(entry[0], smem)
        entry[1] = smem
    return entry[0], smem, _upload(model, nb, k4, nh, diag)


def _same(a, b) -> bool:
    """Whether two parameter tokens name the same fitted arrays (identity) and the same bias."""
    return a is not None and all(x is y for x, y in zip(a[:-1], b[:-1])) and a[-1] == b[-1]


def _host_values(model) -> tuple[np.ndarray, ...]:
    """(weights, centres, gamma, mean, projection) on the host: the fit's own host values where it left
    them (``_host_mirror``, for these very arrays), else one copy of all five."""
    from hyperapp.kernels.pack import to_host_together

    arrays = (model.weights_, model.centres_, model.gamma_, model.mean_, model.proj_)
    mirror = model.__dict__.get("_host_mirror")
    if mirror is not None and all(x is y for x, y in zip(mirror[0], arrays)):
        return mirror[1]
    return tuple(v.astype(np.float32) for v in to_host_together(list(arrays), np.float64))


def _upload(model, nb: int, k4: int, nh: int, diag: int):
    """The device buffer of the network's parameters in the kernel's layout (``kernels/rbfn.cu``), laid
    out on the host and copied up once per fitted model (kept with the model)."""
    import cupy

    # the fitted arrays themselves, compared by identity (a fit makes new ones), and the bias by value:
    # the token holds them alive, so no later model's arrays can take their ids or device pointers
    token = (model.weights_, model.centres_, model.gamma_, model.mean_, model.proj_, float(model.bias_))
    cached = model.__dict__.get("_gpu_params")
    if cached is not None and _same(cached[0], token) and cached[2] == (nb, k4, nh, diag):
        return cached[1]
    w, centres, gamma, mean, proj = _host_values(model)
    nbp = _nbp(nb)
    m = centres.shape[0]
    width = nbp if diag else k4
    U = np.zeros((nh, width), np.float32)
    U[:m, : centres.shape[1]] = centres
    g = np.zeros(nh, np.float32)
    g[:m] = gamma
    wp = np.zeros(nh, np.float32)
    wp[:m] = w
    bias = np.array([model.bias_, 0, 0, 0], np.float32)
    if diag:
        a = np.zeros(nbp, np.float32)
        a[:nb] = np.diag(proj)
        shift = np.zeros(nbp, np.float32)
        shift[:nb] = -(mean.astype(np.float32) * a[:nb])
        parts = [U.ravel(), a, shift]
    else:
        A = np.zeros((nbp, k4), np.float32)
        A[:nb, : proj.shape[1]] = proj
        shift = np.zeros(k4, np.float32)
        shift[: proj.shape[1]] = -(mean.astype(np.float32) @ proj.astype(np.float32))
        parts = [A.ravel(), U.ravel(), shift]
    host = np.concatenate(parts + [g, wp, bias]).astype(np.float32, copy=False)
    assert host.size == _param_floats(nb, k4, nh, diag)
    params = cupy.asarray(host)
    model.__dict__["_gpu_params"] = (token, params, (nb, k4, nh, diag))
    return params


def score_fused(model, P, variant: str | None = None):
    """Scores of the (n, bands) float32 CuPy pixels with the fused kernel (``variant``: "staged" or
    "direct"; by default the one measured faster for this shape, :func:`default_variant`)."""
    import cupy

    P = cupy.ascontiguousarray(P, dtype=cupy.float32)
    n = P.shape[0]
    out = cupy.empty(n, dtype=cupy.float32)
    if n == 0:
        return out
    variant = variant or default_variant(model)
    kern, smem, params = _kernel(model, variant)
    attrs = device_attributes()
    if variant == "direct":
        per_sm = max(1, min(16, int(attrs["MaxSharedMemoryPerMultiprocessor"]) // (smem + 1024)))
        blocks = int(min((n + 127) // 128, attrs["MultiProcessorCount"] * per_sm))
        kern((blocks,), (128,), (P, np.int64(n), np.int32(P.shape[1]), params, out), shared_mem=smem)
        return out
    ntiles = (n + 31) // 32
    # a persistent grid: exactly as many blocks as fit on the GPU at once, so each warp walks many tiles
    # and its double buffer stays full (a grid of one block per 4 tiles left each warp 2 tiles and the
    # copy of the next tile rarely overlapped anything)
    per_sm = max(1, min(8, int(attrs["MaxSharedMemoryPerMultiprocessor"]) // (smem + 1024)))
    blocks = int(min((ntiles + WARPS - 1) // WARPS, attrs["MultiProcessorCount"] * per_sm))
    kern((blocks,), (WARPS * 32,), (P, np.int64(n), np.int32(P.shape[1]), np.int32(_stride(P.shape[1])), params, out),
         shared_mem=smem)
    return out


#: multiprocessors an early pass leaves to the fit still running beside it, as a share of the device's: the
#: fit's own small kernels (the background's k-means is one block, the output layer's a few) then find
#: room at once instead of waiting for the pass's persistent blocks to end
EARLY_SPARE_SHARE = 1 / 16
#: the passes start early on images of at least this many values (pixels x bands): at 2048 x 2048 x 128 (2^29)
#: the click took 17.9 ms with them against 22.4 ms without; at 1024 x 1024 x 64 (2^26), once the fit takes the
#: last click's work (rbfn_reuse), 14.92 against 13.43 ms (their launches and their hold on the multiprocessors
#: slow the fit more than the 0.45 ms pass saves); the threshold lies between, where nothing was measured
EARLY_MIN_VALUES = 1 << 27

def _side_stream():
    """The process's second stream on the current device, made once (non-blocking: the legacy default
    stream, which fits use, does not wait for it nor it for that one). One for every thread: the window
    runs each job on a new thread, and a stream a job would leave its own memory-pool arena behind."""
    return kept_stream("early passes", per_thread=False)


def _event_on(stream):
    import cupy

    e = cupy.cuda.Event(disable_timing=True)
    e.record(stream)
    return e


class EarlyPasses:
    """The score's image-wide passes that depend on the whitening alone (the coherence input's ACE and the
    anomaly input's RX, :func:`~hyperapp.models.classic.quad_rows`), started on a second stream as soon
    as a fit knows its whitenings, so that they run while the fit places its centres and solves its output
    layer (host work and small kernels: at 2048 x 2048 x 128 about as long as the two passes), and the
    click's score stage is then the network's pass alone.

    ``jobs``: name -> ``quad_rows``' arguments after the pixels. Memory: the results are allocated on the
    fitting stream before the passes start, and the arrays the passes read are held, until that stream
    has waited for the passes (:meth:`take`, or :meth:`discard` where they are not taken: a refit, another
    image, a model dropped): no block either stream uses can be handed out while the passes still use it.
    """

    def __init__(self, P, jobs: dict):
        import cupy

        from hyperapp.models.classic import quad_rows

        main, side = cupy.cuda.get_current_stream(), _side_stream()
        self._held = None
        self._out = {name: cupy.empty(P.shape[0], cupy.float32) for name in jobs}  # (the fitting stream's)
        side.wait_event(_event_on(main))  # (the whitenings, P and the results' memory are ready by then)
        spare = max(1, round(int(device_attributes().get("MultiProcessorCount", 80)) * EARLY_SPARE_SHARE))
        self._held = (P, jobs)
        self._key = image_key(P)
        try:
            with side:
                for name, args in jobs.items():
                    quad_rows(P, *args, spare_sms=spare, out=self._out[name])
        finally:  # (a pass that failed to start: what did start is waited for all the same)
            self._done = _event_on(side)

    def result(self, name: str):
        """The array pass ``name`` writes (complete once :attr:`done` has happened)."""
        return self._out[name]

    @property
    def done(self):
        """The event after the passes, on the second stream."""
        return self._done

    def take(self, P) -> dict:
        """The passes' results for pixels ``P`` (the current stream waits for them), or {} where ``P`` is
        not the image they were started on (the passes are then discarded)."""
        if image_key(P) != self._key:
            self.discard()
            return {}
        out = self._out
        self.discard()
        return out

    def discard(self) -> None:
        """Let go of the passes: the current stream waits for them first, so nothing they read or write is
        reused before they end."""
        if self._held is None:
            return
        import cupy

        cupy.cuda.get_current_stream().wait_event(self._done)
        self._out, self._held = {}, None

    def __del__(self):
        try:
            self.discard()
        except Exception:  # (at the interpreter's exit CuPy may be gone)
            pass


def image_key(P) -> tuple:
    """What identifies pixels ``P`` on the device: their memory, shape, strides and type."""
    return (int(P.data.ptr), tuple(P.shape), tuple(P.strides), str(P.dtype))
