"""Whether a cube fits the memory budget (host or GPU), or is scored in tiles or streamed in two passes."""

from __future__ import annotations

from hyperapp.core.cube import Cube
from hyperapp.core.errors import InputError

#: a cube whose float32 pixels exceed this fraction of the GPU's free memory is scored in tiles
GPU_FRACTION = 0.5


def needs_tiling(cube: Cube, backend) -> bool:
    """Whether the cube is too large to hold on the GPU at once."""
    if not backend.is_gpu:
        return False
    from hyperapp.core.backend import gpu_free_bytes

    return cube.rows * cube.cols * cube.bands * 4 > GPU_FRACTION * gpu_free_bytes(backend.xp)


def memory_budget(limit: float | None = None) -> int:
    """Bytes of host memory a run may hold: ``limit`` (GB) when given, else half of the memory
    available now (``MemAvailable``; 4 GB where it cannot be read)."""
    if limit is not None:
        if limit <= 0:
            raise InputError(f"--memory must be a positive number of GB, got {limit}")
        return int(limit * 2**30)
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 4 << 30


def whole_image_error(cube: Cube, what: str) -> InputError:
    """The one-line refusal of a method that needs every pixel at once (a window or local detector, a
    detector in MNF space) on a cube whose float32 pixels exceed the memory budget."""
    return InputError(f"{what} needs the whole image in memory, and this cube's "
                      f"{cube.rows * cube.cols * cube.bands * 4 / 2**30:.1f} GB of pixels exceed the memory budget: "
                      "raise --memory, or crop the cube", cube.path)


def _refuse_whole_image_over_budget(cube: Cube, m, mnf, memory: float | None) -> None:
    """A window detector, or any detector in MNF space, cannot stream: over the host budget it is refused
    before the load rather than exhausting the host's memory."""
    if (m.kind != "pixel" or mnf is not None) and cube.rows * cube.cols * cube.bands * 4 > memory_budget(memory):
        raise whole_image_error(cube, f"{m.name} in MNF space (--mnf)" if mnf is not None else m.name)


def needs_streaming(cube: Cube, backend, memory: float | None = None) -> bool:
    """Whether the cube's float32 pixels exceed the host budget (or half the GPU's free memory): then
    :func:`run_detection` streams it in two passes instead of holding it."""
    nbytes = cube.rows * cube.cols * cube.bands * 4
    if nbytes > memory_budget(memory):
        return True
    return needs_tiling(cube, backend)
