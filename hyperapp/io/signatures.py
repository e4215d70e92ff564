"""Target and undesired signatures from spectral libraries and ROI classes, ready for a detection run.

The CLI's ``detect --target-spectra``, a job step's ``target_spectra = "lib.sli"`` and the window's library
dock all call :func:`signature_kwargs`, whose result goes straight into
:func:`hyperapp.detect.run.run_detection` (``target_spectra``, ``undesired_spectra``, ``signature_info``).
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.errors import InputError


def roi_class_means(cube, classes: np.ndarray, exclude: tuple[int, ...] = ()) -> tuple[list[str], np.ndarray]:
    """Mean spectrum of each ROI class (an integer map, 0 = none) of ``cube``: (names, (k, bands))."""
    classes = np.asarray(classes)
    if classes.shape != (cube.rows, cube.cols):
        raise InputError(f"the ROI class map is {classes.shape}, the image is {(cube.rows, cube.cols)}")
    values = [int(v) for v in np.unique(classes) if v > 0 and int(v) not in exclude]
    if not values:
        raise InputError("the ROI class map marks no pixel")
    rows = np.flatnonzero(classes.any(axis=1))
    block = cube.read(slice(int(rows.min()), int(rows.max()) + 1))  # only the rows holding marks
    sub = classes[rows.min():rows.max() + 1]
    means = []
    for v in values:
        px = block[sub == v].astype(np.float64)
        px = px[np.isfinite(px).all(axis=1)]
        if not px.shape[0]:
            raise InputError(f"ROI class {v} has no pixel with data")
        means.append(px.mean(axis=0))
    return [f"class {v}" for v in values], np.array(means)


def signature_kwargs(cube, target_spectra=None, spectra=None, undesired_spectra=(), undesired_names=None,
                     undesired_classes=None, libraries=None) -> dict:
    """``run_detection`` keyword arguments for targets from a library and undesired signatures from
    libraries and/or ROI classes; empty when none is given.

    Parameters
    ----------
    cube : Cube
    target_spectra : path or SpectralLibrary, optional
    spectra : str or list, optional
        Which of the target library's spectra ("name,name"); all when None.
    undesired_spectra : sequence of paths or SpectralLibrary
    undesired_names : str or list, optional
        Which spectra of the undesired libraries (all when None).
    undesired_classes : int (rows, cols) array, optional
        ROI classes whose mean spectra are undesired signatures.
    libraries : :class:`hyperapp.io.speclib.ResampledLibraries`, optional
        Reads and resamples each library once for many cubes of one wavelength grid (a batch job).
    """
    from hyperapp.io.speclib import cube_level, library_targets, resample_library

    resampled = libraries or resample_library

    out: dict = {}
    info: dict = {}
    level = None
    if target_spectra is not None:
        level = cube_level(cube)
        t = library_targets(target_spectra, cube, spectra, level, resampled)
        out["target_spectra"] = t.spectra
        info.update(targets="library", target_names=t.names, target_notes=t.notes,
                    target_library=str(getattr(target_spectra, "path", None) or target_spectra))
    elif spectra:
        raise InputError("--spectra picks spectra of a library: give --target-spectra too")
    U, names, notes = [], [], []
    for lib in undesired_spectra or ():
        if level is None:
            level = cube_level(cube)
        u = library_targets(lib, cube, undesired_names, level, resampled)
        U.append(u.spectra)
        names += u.names
        notes += u.notes
    if undesired_classes is not None:
        n, m = roi_class_means(cube, undesired_classes)
        U.append(m)
        names += [f"ROI {x}" for x in n]
    if U:
        out["undesired_spectra"] = np.concatenate(U)
        info.update(undesired_names=names, undesired_notes=sorted(set(notes)))
    if info:
        out["signature_info"] = info
    return out
