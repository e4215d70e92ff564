"""Writers for score maps and masks: ENVI, GeoTIFF, PNG and NPY, every one atomic.

ENVI output goes through Spectral Python's ``envi.save_image`` and carries the source cube's map info
and coordinate system (no wavelengths: a score map has one band). GeoTIFF goes through ``tifffile``
rather than rasterio: tifffile is a small pure-Python wheel, while rasterio brings a GDAL build of
tens of megabytes, and all hyperapp needs is the three GeoTIFF tags (pixel scale, tie point, GeoKey
directory) that follow directly from ENVI's ``map info``.
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
               classes: dict | None = None, nan_is_nodata: bool = False) -> Path:
    """Write a 2-D (or 3-D) image as ENVI ``<stem>.hdr`` + ``<stem>.img``; returns the header path.

    ``classes`` (``{"class names": [...], "class lookup": [...]}``) writes an ENVI classification file
    instead (``file type = ENVI Classification``), as ENVI's own classifiers write theirs.
    ``nan_is_nodata``: the image's NaN are pixels without data (scores of the cube's no-data pixels),
    said in the header as its ``data ignore value`` (GDAL and ENVI then leave them out).
    """
    import spectral.io.envi as envi

    stem = _stem(path)
    hdr, dat = stem.with_suffix(".hdr"), stem.with_suffix(".img")
    meta: dict = {"description": description or f"hyperapp output {stem.name}"}
    if nan_is_nodata:
        meta["data ignore value"] = "NaN"
    if cube is not None:
        if cube.map_info:
            meta["map info"] = cube.map_info
        if cube.coordinate_system:
            meta["coordinate system string"] = cube.coordinate_system
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


_UTM_DATUM_EPSG = {"WGS-84": (32600, 32700), "NAD-83": (26900, None), "NAD-27": (26700, None)}


def geotiff_tags(map_info: list[str]) -> list[tuple]:
    """tifffile ``extratags`` for a GeoTIFF from ENVI map info.

    ENVI map info is ``{projection, ref x (1-based), ref y, easting, northing, x size, y size,
    [zone, North|South,] datum, ...}``.
    """
    try:
        proj = map_info[0].strip()
        ref_x, ref_y = float(map_info[1]) - 1.0, float(map_info[2]) - 1.0  # ENVI pixels count from 1
        east, north = float(map_info[3]), float(map_info[4])
        dx, dy = float(map_info[5]), float(map_info[6])
    except (IndexError, ValueError) as exc:
        raise InputError(f"cannot turn map info into GeoTIFF tags: {map_info!r}") from exc
    tags: list[tuple] = [
        (33550, "d", 3, (dx, dy, 0.0), False),  # ModelPixelScaleTag
        (33922, "d", 6, (ref_x, ref_y, 0.0, east, north, 0.0), False),  # ModelTiepointTag
    ]
    keys = [1, 1, 0, 0]  # GeoKeyDirectory header; entries appended below

    def key(k, loc, count, val):
        keys.extend([k, loc, count, val])

    key(1025, 0, 1, 1)  # GTRasterTypeGeoKey = PixelIsArea
    if proj.upper().startswith("UTM") and len(map_info) >= 10:
        zone = int(float(map_info[7]))
        south = map_info[8].strip().lower().startswith("s")
        datum = map_info[9].strip()
        base = _UTM_DATUM_EPSG.get(datum, (None, None))[1 if south else 0]
        key(1024, 0, 1, 1)  # GTModelTypeGeoKey = Projected
        if base:
            key(3072, 0, 1, base + zone)  # ProjectedCSTypeGeoKey = EPSG code
    elif proj.lower().startswith("geographic"):
        key(1024, 0, 1, 2)  # Geographic
        key(2048, 0, 1, 4326)
    else:
        key(1024, 0, 1, 1)
    keys[3] = (len(keys) - 4) // 4
    tags.append((34735, "H", len(keys), tuple(keys), False))
    return tags


def write_geotiff(path: str | os.PathLike, image: np.ndarray, cube: Cube) -> Path:
    """Write a 2-D image as a GeoTIFF; the cube must have map info."""
    import tifffile

    if not cube.map_info:
        raise InputError("the cube has no map info: GeoTIFF needs a georeferenced cube; use ENVI, PNG or NPY", cube.path)
    out = _stem(path).with_suffix(".tif")
    tags = geotiff_tags(cube.map_info)
    with atomic_paths(out) as (tmp,):
        try:
            tifffile.imwrite(tmp, np.asarray(image), extratags=tags, photometric="minisblack")
        except OSError as exc:
            raise OutputError(f"cannot write ({exc.strerror or exc})", out) from exc
    return out


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
        import tifffile

        out = _stem(path).with_suffix(".tif")
        tags = geotiff_tags(cube.map_info) if cube is not None and cube.map_info else []
        size = 256 if dtype == np.uint8 else 65536
        cmap = np.zeros((3, size), np.uint16)
        cmap[:, : k + 1] = lut.T.astype(np.uint16) * 257
        with atomic_paths(out) as (tmp,):
            try:
                tifffile.imwrite(tmp, code, photometric="palette", colormap=cmap, extratags=tags)
            except OSError as exc:
                raise OutputError(f"cannot write ({exc.strerror or exc})", out) from exc
        return out
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
