"""A model fitted on another scene (the CLI's --train-from, a job step's train, the window's File > Train)."""

from __future__ import annotations

from pathlib import Path

from hyperapp.core.backend import Timer, get_backend
from hyperapp.core.errors import InputError
from hyperapp.core.progress import NULL_PROGRESS, Progress
from hyperapp.detect.budget import _refuse_whole_image_over_budget, needs_streaming
from hyperapp.detect.run import _check_inputs, _estimator, _fit, _load_labelled
from hyperapp.models.registry import get_method


def train_on_scene(scene: str | Path, method: str, targets: str | Path, background: str | Path | None = None, *,
                   dataset: str | None = None, bands=None, all_bands: bool = False, params: dict | None = None,
                   device: str = "auto", expected_bands: int | None = None, memory: float | None = None,
                   progress: Progress = NULL_PROGRESS):
    """``method`` fitted on another scene, to score other cubes with: the one meaning of "train on another
    scene" (the CLI's ``--train-from``, a job step's ``train``).

    The scene is opened as a run opens its cube (less the header's bad bands unless ``all_bands``, on
    ``bands``), its marked pixels read, and the model fitted as :func:`run_detection` fits it (streamed
    for a pixel detector when the scene exceeds the memory budget); nothing is scored.

    Parameters
    ----------
    scene : path
        The training scene.
    method : str
        A name from :data:`hyperapp.models.registry.METHODS`.
    targets, background : path
        The scene's marked pixels (a mask or ``row,col`` clicks; for FFBP, the truth mask its window
        networks learn from) and, optionally, background clicks.
    dataset : str, optional
        The HDF5 dataset or MATLAB variable of ``scene``.
    bands, all_bands :
        Which bands train (:meth:`hyperapp.core.cube.Cube.run_bands`): those of the cubes the model scores.
    params : dict, optional
        Method options.
    device : str
        Where to fit (``auto``, ``cpu``, ``gpu``).
    expected_bands : int, optional
        The band count of the cube the model will score: a scene with another count is an
        :class:`InputError` naming it.
    memory : float, optional
        Host memory budget in GB (:func:`memory_budget`).
    progress : Progress

    Returns
    -------
    The fitted model.
    """
    from hyperapp.io import open_cube, read_labels
    from hyperapp.io.masks import check_background, require_marks

    cube = open_cube(scene, dataset).run_bands(all_bands, bands)
    if expected_bands is not None and cube.bands != expected_bands:
        raise InputError(f"the training scene has {cube.bands} bands, the cube has {expected_bands}", scene)
    shape = (cube.rows, cube.cols)
    m = get_method(method)
    backend = get_backend(device)
    marked = read_labels(targets, shape)
    require_marks(marked, targets)
    bg = read_labels(background, shape) if background else None
    check_background(bg, marked, background)
    y, _, _, _, _ = _check_inputs(m, cube, marked, bg,
                            truth=None, far=None, threshold=None, model=None, mnf=None, target_spectra=None,
                            undesired_spectra=None)
    _refuse_whole_image_over_budget(cube, m, None, memory)
    if m.kind == "pixel" and needs_streaming(cube, backend, memory):
        from hyperapp.detect.streamed import fit_streamed

        return fit_streamed(cube, method, y, params=params, backend=backend, progress=progress)
    timer = Timer(backend)
    px = _load_labelled(cube, y, backend, timer, None, progress)
    est, params = _estimator(m, None, params, None, None, px, timer)
    est = _fit(m, est, px, params, None, None, timer, progress.sub(0.45, 1.0))
    progress(1.0, "trained")
    return est
