"""Writers for score maps and masks: ENVI, GeoTIFF, PNG and NPY, every one atomic.

ENVI output goes through Spectral Python's ``envi.save_image`` and carries the source cube's map info
and coordinate system (a map grid from another source as ENVI map info and WKT; no wavelengths: a score
map has one band). GeoTIFF goes through rasterio (GDAL) with the cube's CRS and affine transform; a
swath with a geometry lookup table is orthorectified through it first (:mod:`hyperapp.io.georef`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from hyperapp.core.cube import Cube
from hyperapp.core.errors import InputError, OutputError
from hyperapp.io.atomic import atomic_paths

FORMATS = ("envi", "tiff", "png", "npy")
#: the classes of a 0/1 mask (truth, detections) written as an ENVI classification file: its header says
#: ``file type = ENVI Classification``, so a job's glob over a folder tells the masks from the cubes
MASK_CLASSES = {"class names": ["Unclassified", "target"], "class lookup": [0, 0, 0, 255, 0, 0]}


def _stem(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p.with_suffix("") if p.suffix.lower() in (".hdr", ".img", ".tif", ".tiff", ".png", ".npy") else p


def _single_band_header(image: np.ndarray, meta: dict) -> dict:
    """ENVI header fields of a single-band (rows, cols) image stored as BSQ, little-endian."""
    import spectral.io.envi as envi

    return {"samples": image.shape[1], "lines": image.shape[0], "bands": 1, "header offset": 0,
            "file type": "ENVI Standard", "data type": envi.dtype_to_envi[image.dtype.char], "interleave": "bsq",
            "byte order": 0, **meta}


def _write_header(hdr: Path, image: np.ndarray, meta: dict) -> Path:
    """The ENVI header of a single-band BSQ data file already in place beside it."""
    import spectral.io.envi as envi

    with atomic_paths(hdr) as (tmp,):
        try:
            envi.write_envi_header(str(tmp), _single_band_header(image, meta))
        except OSError as exc:
            raise OutputError(f"cannot write ({exc.strerror or exc})", hdr) from exc
    return hdr


def write_envi_cube(path: str | os.PathLike, data: np.ndarray, interleave: str = "bil", byteorder: int = 0) -> Path:
    """``data`` (rows, cols, bands) as an ENVI cube ``<stem>.hdr`` + ``<stem>.img`` in ``interleave``
    (``bil``, ``bsq`` or ``bip``) and byte order (0 little-endian, 1 big), through Spectral Python; returns
    the header path. Used for test and warm-up scenes, so it writes in place (not staged)."""
    import spectral.io.envi as envi

    stem = _stem(path)
    hdr = stem.with_suffix(".hdr")
    envi.save_image(str(hdr), data, dtype=data.dtype, force=True, ext=".img", interleave=interleave,
                    byteorder=byteorder)
    return hdr


def write_envi(path: str | os.PathLike, image: np.ndarray, cube: Cube | None = None, description: str = "",
               classes: dict | None = None, nan_is_nodata: bool = False, band_names: list[str] | None = None) -> Path:
    """Write a 2-D (or 3-D) image as ENVI ``<stem>.hdr`` + ``<stem>.img``; returns the header path.

    ``classes`` (``{"class names": [...], "class lookup": [...]}``) writes an ENVI classification file
    instead (``file type = ENVI Classification``), as ENVI's own classifiers write theirs.
    ``nan_is_nodata``: the image's NaN are pixels without data (scores of the cube's no-data pixels),
    said in the header as its ``data ignore value`` (GDAL and ENVI then leave them out). ``band_names``:
    the header's ``band names``.
    """
    import spectral.io.envi as envi

    stem = _stem(path)
    hdr, dat = stem.with_suffix(".hdr"), stem.with_suffix(".img")
    meta: dict = {"description": description or f"hyperapp output {stem.name}"}
    if nan_is_nodata:
        meta["data ignore value"] = "NaN"
    if band_names:
        meta["band names"] = list(band_names)
    if cube is not None:
        if cube.map_info:
            meta["map info"] = cube.map_info
        if cube.coordinate_system:
            meta["coordinate system string"] = cube.coordinate_system
        if not cube.map_info:  # a map grid read from elsewhere (a GeoTIFF, a product's grid): as ENVI map info and WKT
            from hyperapp.core.geo import MapGrid
            from hyperapp.io.georef import envi_map_info

            if isinstance(getattr(cube, "geo", None), MapGrid):
                mi, wkt = envi_map_info(cube.geo)
                if mi:
                    meta["map info"], meta["coordinate system string"] = mi, wkt
    if (isinstance(image, np.memmap) and image.ndim == 2 and not classes and image.dtype.isnative
            and image.flags.c_contiguous and Path(image.filename).resolve() == dat.resolve()):
        # the data were written in place (a streamed run's scores): only the header is missing
        image.flush()
        return _write_header(hdr, image, meta)
    img = np.asarray(image)
    if img.ndim == 2:
        img = img[:, :, None]
    with atomic_paths(hdr, dat) as (thdr, tdat):
        # spectral names the data file after the header; write beside the temp header, then move
        tmp_hdr = thdr.with_name(thdr.name.replace(".part.hdr", "") + ".hdr")
        tmp_img = tmp_hdr.with_suffix(".img")
        try:
            if classes:
                lookup = list(classes["class lookup"])
                envi.save_classification(str(tmp_hdr), img, dtype=img.dtype, ext=".img", force=True,
                                         metadata=meta, interleave="bsq", byteorder=0,
                                         class_names=list(classes["class names"]),
                                         class_colors=[lookup[i:i + 3] for i in range(0, len(lookup), 3)])
            elif img.shape[2] == 1 and img.dtype.char in envi.dtype_to_envi:
                # one band: the data file is the image's bytes in row order. NumPy's tofile writes them
                # from the array and lets go of the interpreter meanwhile, where save_image first copies
                # them into a bytes object holding it (a batch's write stage runs beside its compute stage)
                band = np.ascontiguousarray(img[:, :, 0], img.dtype.newbyteorder("<"))
                band.tofile(tdat)
                envi.write_envi_header(str(thdr), _single_band_header(band, meta))
                return hdr  # atomic_paths moves both files into place on the way out
            else:
                envi.save_image(str(tmp_hdr), img, dtype=img.dtype, ext=".img", force=True, metadata=meta,
                                interleave="bsq", byteorder=0)
            os.replace(tmp_hdr, thdr)
            os.replace(tmp_img, tdat)
        except OSError as exc:
            for t in (tmp_hdr, tmp_img):
                t.unlink(missing_ok=True)
            raise OutputError(f"cannot write ({exc.strerror or exc})", hdr) from exc
    return hdr


def write_igm(path: str | os.PathLike, swath, shape: tuple[int, int]) -> Path:
    """ENVI's input geometry (IGM) file of a swath: each pixel's WGS84 longitude and latitude (degrees; two
    float64 bands), what ENVI's Georeference from IGM and GDAL's geolocation arrays take, so that the
    swath's rasters written beside it (scores, mask, labels) can be placed on Earth, as an ENVI user
    expects of a swath product's outputs."""
    from hyperapp.core.geo import lonlat

    rr, cc = np.mgrid[0:shape[0], 0:shape[1]]
    lon, lat = lonlat(swath, rr, cc, nearest=True)
    return write_envi(path, np.stack([np.asarray(lon, np.float64), np.asarray(lat, np.float64)], axis=2), None,
                      "hyperapp input geometry (IGM): WGS84 longitude and latitude of each pixel's centre, degrees",
                      band_names=["Longitude", "Latitude"])


def _placed(image: np.ndarray, cube) -> tuple[np.ndarray, object, str]:
    """``image`` on the grid it is written on, that grid (a MapGrid, or None: not georeferenced) and the
    words saying so: a map grid's cube as it is, a swath with a GLT orthorectified onto the GLT's grid
    (:func:`hyperapp.io.georef.orthorectify`), any other swath unplaced."""
    from hyperapp.core.geo import MapGrid
    from hyperapp.io.georef import geo_of, geotiff_placement, has_glt, orthorectify

    geo = geo_of(cube)
    words = geotiff_placement(cube)
    if isinstance(geo, MapGrid):
        return image, geo, words
    if has_glt(geo):
        return orthorectify(image, geo), geo.grid, words
    return image, None, words


def _write_tiff(out: Path, image: np.ndarray, grid, description: str, colormap: np.ndarray | None = None) -> Path:
    """``image`` (rows, cols[, bands]) as a (Geo)TIFF through rasterio, atomically: with ``grid``'s CRS
    and transform where it is a MapGrid, NaN as no-data in floats, ``colormap`` ((n, 3) uint8 colours of
    codes 0..n-1) as its palette."""
    import warnings

    import rasterio
    from rasterio.errors import NotGeoreferencedWarning
    from rasterio.transform import Affine

    a = np.asarray(image)
    bands = a[None] if a.ndim == 2 else np.moveaxis(a, 2, 0)
    if a.dtype == bool:
        bands = bands.astype(np.uint8)
    profile = {"driver": "GTiff", "height": bands.shape[1], "width": bands.shape[2], "count": bands.shape[0],
               "dtype": bands.dtype.name, "compress": "deflate"}
    if bands.dtype.kind == "f":
        profile["nodata"] = float("nan")
    if grid is not None:
        profile["crs"] = rasterio.crs.CRS.from_user_input(grid.crs)
        profile["transform"] = Affine.from_gdal(*grid.transform)
    with atomic_paths(out) as (tmp,):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NotGeoreferencedWarning)  # said in the description instead
                with rasterio.open(tmp, "w", **profile) as dst:
                    if colormap is not None:  # (before the pixels: the TIFF is then a palette image)
                        dst.write_colormap(1, {i: (*map(int, c), 255) for i, c in enumerate(colormap)})
                    dst.update_tags(TIFFTAG_IMAGEDESCRIPTION=description)
                    dst.write(bands)
        except (OSError, rasterio.errors.RasterioError) as exc:
            raise OutputError(f"cannot write ({getattr(exc, 'strerror', None) or exc})", out) from exc
    return out


def write_geotiff(path: str | os.PathLike, image: np.ndarray, cube: Cube, description: str = "") -> Path:
    """Write a 2-D image as a GeoTIFF (through rasterio) carrying the cube's CRS and transform.

    A cube on a map grid (ENVI map info, a GeoTIFF, a product's grid) gives its grid; a swath with a
    geometry lookup table (EMIT) is orthorectified through it onto the GLT's grid; a swath without one
    is written without georeferencing, said in the TIFF's description
    (:func:`hyperapp.io.georef.geotiff_placement`). A cube with no location is refused.
    """
    from hyperapp.io.georef import geo_of

    if geo_of(cube) is None:
        raise InputError("the cube has no map info or location: GeoTIFF needs a georeferenced cube; use ENVI, PNG "
                         "or NPY", getattr(cube, "path", None))
    out = _stem(path).with_suffix(".tif")
    img, grid, words = _placed(np.asarray(image), cube)
    return _write_tiff(out, img, grid, f"{description or 'hyperapp output ' + out.stem}; {words}")


def write_png(path: str | os.PathLike, image: np.ndarray) -> Path:
    """Write a mask (0/1 -> 0/255) or a score map (stretched to 0..255) as an 8-bit PNG."""
    from PIL import Image

    a = np.asarray(image)
    if a.dtype == bool or (np.issubdtype(a.dtype, np.integer) and a.max(initial=0) <= 1):
        u8 = (a > 0).astype(np.uint8) * 255
    else:
        f = a.astype(np.float64)
        finite = np.isfinite(f)
        lo, hi = (np.percentile(f[finite], [1, 99]) if finite.any() else (0.0, 1.0))
        u8 = np.clip((np.nan_to_num(f, nan=lo) - lo) / max(hi - lo, 1e-12) * 255, 0, 255).astype(np.uint8)
    out = _stem(path).with_suffix(".png")
    with atomic_paths(out) as (tmp,):
        try:
            Image.fromarray(u8).save(tmp, format="PNG")
        except OSError as exc:
            raise OutputError(f"cannot write ({exc.strerror or exc})", out) from exc
    return out


#: the one class palette of every class and cluster map (and its spectra) without a colour of its own:
#: picked Glasbey-style (each colour the farthest in CIELAB from those before it) from bright colours,
#: far from the window's target red, truth cyan, mask green, background blue, black and white; the
#: first eight are at least 45 apart (CIELAB delta E), and at least 59 from the false alarms' magenta
#: (magenta and purple come last: cluster 0 in magenta read as a false alarm). Class 12 on is picked the
#: same way by :func:`class_colour`, so no two of the first :data:`PALETTE_SIZE` classes share a colour.
CLASS_COLOURS = [(192, 160, 0), (32, 128, 64), (160, 96, 128), (0, 128, 160), (192, 255, 160), (224, 255, 0),
                 (255, 160, 128), (255, 64, 128), (255, 160, 255), (128, 128, 96), (160, 0, 255), (255, 0, 192)]
#: distinct class colours before they repeat (a map of more classes than this cannot be told apart by eye)
PALETTE_SIZE = 256
#: what the window draws in colours of their own: target and background marks, mask, truth, false alarms,
#: black, white
_KEPT_COLOURS = [(255, 40, 40), (40, 120, 255), (0, 230, 0), (0, 255, 255), (255, 0, 255), (0, 0, 0), (255, 255, 255)]

CLASS_FORMATS = ("envi", "tiff", "png")


def _cielab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of sRGB uint8 colours (n, 3): the space where distance is how different colours look."""
    c = np.asarray(rgb, np.float64) / 255.0
    c = np.where(c > 0.04045, ((c + 0.055) / 1.055) ** 2.4, c / 12.92)
    xyz = c @ np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]).T
    xyz /= np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


@functools.lru_cache(maxsize=1)
def _palette() -> tuple[tuple[int, int, int], ...]:
    """:data:`CLASS_COLOURS`, then bright colours of a 12-level RGB grid, each the farthest in CIELAB from every
    colour before it and from the kept colours, up to :data:`PALETTE_SIZE`."""
    levels = np.r_[np.arange(0, 256, 24), 255]
    grid = np.stack(np.meshgrid(levels, levels, levels, indexing="ij"), -1).reshape(-1, 3)
    lab = _cielab(grid)
    bright = (lab[:, 0] >= 45) & (lab[:, 0] <= 92)  # away from black and white: seen on dark and light scenes
    grid, lab = grid[bright], lab[bright]
    near = np.full(len(grid), np.inf)  # each candidate's distance to the nearest colour taken so far
    for c in list(CLASS_COLOURS) + _KEPT_COLOURS:
        near = np.minimum(near, np.linalg.norm(lab - _cielab(np.array([c])), axis=1))
    out = list(CLASS_COLOURS)
    while len(out) < PALETTE_SIZE:
        j = int(np.argmax(near))
        out.append(tuple(int(v) for v in grid[j]))
        near = np.minimum(near, np.linalg.norm(lab - lab[j], axis=1))
    return tuple(out)


def class_colour(i: int) -> tuple[int, int, int]:
    """Colour of class (or cluster) ``i`` counted from 0: distinct for the first :data:`PALETTE_SIZE`."""
    pal = _palette()
    return pal[i % len(pal)]


def write_classification(path: str | os.PathLike, labels: np.ndarray, names: list[str],
                         colours: list[tuple[int, int, int]] | None = None, cube: Cube | None = None,
                         fmt: str = "envi") -> Path:
    """Write a class map (``labels``: 0..k-1 per pixel, -1 unclassified) with its names and colours.

    The file holds ``label + 1`` (0 = Unclassified, as ENVI's classification files do): ``envi`` an ENVI
    classification file (``class names``, ``class lookup``), ``tiff`` a palette TIFF (a GeoTIFF when the
    cube has map info), ``png`` a colour PNG.
    """
    lab = np.asarray(labels)
    k = len(names)
    if lab.size and int(lab.max(initial=-1)) >= k:
        raise InputError(f"the class map holds class {int(lab.max())} but only {k} class names were given")
    colours = list(colours) if colours else [class_colour(i) for i in range(k)]
    code = (lab.astype(np.int64) + 1).clip(0)
    dtype = np.uint8 if k < 255 else np.uint16
    code = code.astype(dtype)
    lut = np.zeros((k + 1, 3), np.uint8)
    lut[1:] = np.asarray(colours[:k], np.uint8).reshape(-1, 3)
    if fmt == "envi":
        return write_envi(path, code, cube, "hyperapp class map", classes={
            "class names": ["Unclassified", *[str(n) for n in names]],
            "class lookup": [int(v) for v in lut.reshape(-1)]})
    if fmt == "png":
        from PIL import Image

        out = _stem(path).with_suffix(".png")
        with atomic_paths(out) as (tmp,):
            try:
                Image.fromarray(lut[code.astype(np.int64)]).save(tmp, format="PNG")
            except OSError as exc:
                raise OutputError(f"cannot write ({exc.strerror or exc})", out) from exc
        return out
    if fmt == "tiff":
        out = _stem(path).with_suffix(".tif")
        code, grid, words = _placed(code, cube)  # (0, Unclassified, where an orthorectified grid has no pixel)
        return _write_tiff(out, code, grid, f"hyperapp class map; {words}", colormap=lut)
    raise InputError(f"unknown class map format {fmt!r}; choose one of {', '.join(CLASS_FORMATS)}")


def write_npy(path: str | os.PathLike, image: np.ndarray) -> Path:
    out = _stem(path).with_suffix(".npy")
    with atomic_paths(out) as (tmp,):
        try:
            with open(tmp, "wb") as fh:
                np.save(fh, np.asarray(image))
        except OSError as exc:
            raise OutputError(f"cannot write ({exc.strerror or exc})", out) from exc
    return out


def write_image(path: str | os.PathLike, image: np.ndarray, fmt: str, cube: Cube | None = None) -> Path:
    """Write ``image`` in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "envi":
        return write_envi(path, image, cube)
    if fmt == "tiff":
        if cube is None:
            raise InputError("GeoTIFF output needs the source cube's map info")
        return write_geotiff(path, image, cube)
    if fmt == "png":
        return write_png(path, image)
    if fmt == "npy":
        return write_npy(path, image)
    raise InputError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
