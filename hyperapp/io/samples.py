"""Synthetic sample scenes, rebuilt bit-for-bit from a seed.

Two scenes ship in ``sample_cubes/`` (ENVI and HDF5, with truth masks and five example clicks), and the
same generators build larger ones for tests and benchmarks (``make_sea_scene(1024, 1024)``).

The model
---------
*Bands.* ``bands`` centres evenly spaced over 400-2500 nm, FWHM equal to the spacing.

*Materials.* Smooth reflectance spectra built from a continuum plus Gaussian absorption features:
vegetation (green peak at 550 nm, chlorophyll wells at 450/670 nm, red edge at 720 nm, water wells at
970/1200/1450/1940 nm), dry soil (rising continuum, clay feature at 2200 nm), asphalt (dark, flat),
concrete (bright, carbonate feature at 2340 nm), a target paint (green-grey with resin features at
1730 and 2310 nm) and a confuser paint that looks the same to the eye but has its features at 1700 and
2260 nm and 20 % less depth: a detector that only follows the visible colour confuses the two. The sea
scene uses water (blue-green, near zero past 900 nm), foam/glint (spectrally flat, bright), floating
seaweed (vegetation with water-damped NIR), wooden debris, and the targets: orange life rafts and
people in life-jackets (high red/NIR, low blue).

*Spatial structure.* Land: smooth random fields (Gaussian-filtered noise) pick a soil/vegetation mix per
pixel; roads are 2-3 pixel lines of asphalt; buildings are concrete rectangles; a smooth illumination
field scales everything by 0.85-1.15. Sea: water with smooth brightness variation, sun glint as a
wave-like pattern of flat additive reflectance, patches of seaweed and debris.

*Targets.* Square objects at full-pixel fill (2x2 to 5x5 px, their border pixels mixed at 50 %) and
single pixels at sub-pixel fill fractions 0.25-0.75, each mixed linearly with the local background;
confusers likewise (land). The truth mask marks pixels whose target fill is at least 0.2.

*Sensor.* Reflectance times a transmission curve (deep at the 1400 and 1900 nm water bands), plus
Gaussian noise with an SNR of about 150 at the continuum, much lower in the absorption bands; stored as
int16 reflectance x 10000, as many ENVI products do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage

SCALE = 10000.0  # int16 reflectance scale


@dataclass
class Scene:
    """A generated scene: int16 cube (rows, cols, bands), truth, example clicks and metadata."""

    name: str
    cube: np.ndarray
    truth: np.ndarray
    wavelengths: np.ndarray
    fwhm: np.ndarray
    clicks: np.ndarray  # (5, 2) row, col of example target pixels
    confusers: np.ndarray  # bool mask of confuser material (land), for tests
    fill: np.ndarray  # float target fill fraction per pixel


def wavelengths(bands: int) -> np.ndarray:
    return np.linspace(400.0, 2500.0, bands)


def _g(wl, centre, width, depth):
    return depth * np.exp(-0.5 * ((wl - centre) / width) ** 2)


def materials(wl: np.ndarray) -> dict[str, np.ndarray]:
    """Reflectance spectra (0..1) of every material on the band centres ``wl`` (nm)."""
    edge = 1.0 / (1.0 + np.exp(-(wl - 720.0) / 18.0))
    veg = 0.05 + 0.06 * np.exp(-0.5 * ((wl - 550) / 35) ** 2) + 0.40 * edge
    veg -= _g(wl, 450, 30, 0.02) + _g(wl, 670, 25, 0.03)
    veg -= edge * (_g(wl, 970, 40, 0.04) + _g(wl, 1200, 60, 0.08) + _g(wl, 1450, 80, 0.22) + _g(wl, 1940, 90, 0.25))
    veg += 0.08 * (wl > 1500) * np.exp(-((wl - 1650) / 250) ** 2)
    soil = 0.12 + 0.22 * (1 - np.exp(-(wl - 400) / 700)) - _g(wl, 2200, 40, 0.05) - _g(wl, 1420, 50, 0.03)
    asphalt = 0.07 + 0.03 * (wl - 400) / 2100 - _g(wl, 1730, 40, 0.005)
    concrete = 0.30 + 0.08 * np.tanh((wl - 500) / 300) - _g(wl, 2340, 40, 0.06) - _g(wl, 1900, 60, 0.03)
    paint = 0.10 + 0.07 * np.exp(-0.5 * ((wl - 560) / 60) ** 2) + 0.18 * (1 / (1 + np.exp(-(wl - 900) / 80)))
    confuser = paint.copy()
    paint = paint - _g(wl, 1730, 35, 0.09) - _g(wl, 2310, 45, 0.10) - _g(wl, 1200, 50, 0.04)
    confuser = confuser - _g(wl, 1700, 35, 0.072) - _g(wl, 2260, 45, 0.08) - _g(wl, 1150, 50, 0.032)
    water = 0.02 + 0.05 * np.exp(-0.5 * ((wl - 480) / 70) ** 2) + 0.01 * np.exp(-(wl - 400) / 200)
    water *= 1 / (1 + np.exp((wl - 750) / 40))
    water += 0.003
    foam = 0.25 + 0.0 * wl
    seaweed = 0.03 + 0.04 * np.exp(-0.5 * ((wl - 560) / 30) ** 2) + 0.12 * edge * np.exp(-(wl - 720) / 500)
    debris = 0.15 + 0.15 * (1 - np.exp(-(wl - 400) / 500)) - _g(wl, 2100, 60, 0.05)
    raft = 0.04 + 0.50 / (1 + np.exp(-(wl - 580) / 15)) - _g(wl, 1700, 40, 0.05) - _g(wl, 2300, 50, 0.06)
    jacket = 0.05 + 0.55 / (1 + np.exp(-(wl - 560) / 12)) - _g(wl, 1200, 60, 0.06) - 0.1 * (wl > 1400)
    sand = 0.20 + 0.25 * (1 - np.exp(-(wl - 400) / 500)) - _g(wl, 2200, 50, 0.03) - _g(wl, 1900, 70, 0.04)
    wet_sand = 0.55 * sand - 0.05 * (wl > 1300)
    roof = 0.22 + 0.04 * np.sin((wl - 400) / 300) - _g(wl, 1720, 40, 0.03) - _g(wl, 2300, 60, 0.04)
    drygrass = 0.10 + 0.25 * (1 - np.exp(-(wl - 450) / 450)) + 0.06 * edge - _g(wl, 2100, 60, 0.05)
    drygrass -= _g(wl, 1450, 70, 0.06) + _g(wl, 1930, 80, 0.07)
    out = dict(veg=veg, soil=soil, asphalt=asphalt, concrete=concrete, paint=paint, confuser=confuser,
               water=water, foam=foam, seaweed=seaweed, debris=debris, raft=raft, jacket=jacket, sand=sand,
               wet_sand=wet_sand, roof=roof, drygrass=drygrass)
    return {k: np.clip(v, 0.003, 1.0) for k, v in out.items()}


def transmission(wl: np.ndarray) -> np.ndarray:
    """Atmospheric transmission: deep at the 1400 and 1900 nm water bands."""
    return 1.0 - _g(wl, 1400, 45, 0.85) - _g(wl, 1880, 60, 0.9) - _g(wl, 940, 25, 0.3) - _g(wl, 1130, 30, 0.35)


def _field(rng, shape, sigma):
    f = ndimage.gaussian_filter(rng.standard_normal(shape), sigma, mode="wrap")
    return (f - f.mean()) / (f.std() + 1e-12)


def _place_targets(rng, shape, n_full, n_sub, taken, margin=3):
    """Fill fractions for n_full square objects and n_sub single sub-pixel ones, not touching ``taken``."""
    fill = np.zeros(shape)
    rows, cols = shape
    placed = 0
    tries = 0
    specs = [("full", int(rng.integers(2, 6))) for _ in range(n_full)] + [("sub", 1) for _ in range(n_sub)]
    while placed < len(specs) and tries < 10000:
        tries += 1
        kind, size = specs[placed]
        r = int(rng.integers(margin, rows - size - margin))
        c = int(rng.integers(margin, cols - size - margin))
        win = (slice(r - margin, r + size + margin), slice(c - margin, c + size + margin))
        if taken[win].any():
            continue
        if kind == "full":
            fill[r:r + size, c:c + size] = 1.0
            # mixed border: half the object reaches into the neighbouring ring
            ring = ndimage.binary_dilation(fill[win] > 0) & ~(fill[win] > 0)
            sub = fill[win]
            sub[ring & (rng.random(ring.shape) < 0.5)] = 0.5
        else:
            fill[r, c] = float(rng.choice([0.25, 0.4, 0.55, 0.75]))
        taken[win] = True
        placed += 1
    return fill


def _finish(rng, refl, wl):
    """Apply the sensor: transmission, noise at a realistic SNR, int16 quantisation."""
    t = np.clip(transmission(wl), 0.05, 1.0)
    signal = refl * t
    sigma = 0.0015 + signal.mean(axis=(0, 1)) / 150.0
    noisy = signal + rng.standard_normal(refl.shape) * sigma
    # return to apparent reflectance (divide by the nominal transmission), as a reflectance product would
    noisy = noisy / t
    return np.clip(np.round(noisy * SCALE), -32768, 32767).astype(np.int16)


def make_land_scene(rows: int = 128, cols: int = 128, bands: int = 64, seed: int = 7) -> Scene:
    """Fields, roads and buildings with paint targets and confusers (see the module docstring)."""
    rng = np.random.default_rng(seed)
    wl = wavelengths(bands)
    m = materials(wl)
    shape = (rows, cols)
    veg_frac = 1 / (1 + np.exp(-2.5 * _field(rng, shape, 10)))
    refl = veg_frac[..., None] * m["veg"] + (1 - veg_frac[..., None]) * m["soil"]
    refl *= (1 + 0.08 * _field(rng, shape, 3))[..., None]
    taken = np.zeros(shape, bool)
    # roads: a few straight 2-3 px lines
    rr, cc = np.mgrid[0:rows, 0:cols]
    for _ in range(3):
        ang = rng.uniform(0, np.pi)
        off = rng.uniform(0.2, 0.8) * rows
        width = rng.uniform(1.0, 1.6)
        d = np.abs((rr - rows / 2) * np.cos(ang) - (cc - cols / 2) * np.sin(ang) - (off - rows / 2))
        road = d < width
        refl[road] = m["asphalt"]
        taken |= road
    for _ in range(6):  # buildings
        h, w = int(rng.integers(4, 12)), int(rng.integers(4, 12))
        r, c = int(rng.integers(0, rows - h)), int(rng.integers(0, cols - w))
        refl[r:r + h, c:c + w] = m["concrete"]
        taken[r:r + h, c:c + w] = True
    n_full, n_sub = max(4, rows * cols // 2000), max(3, rows * cols // 3000)
    fill = _place_targets(rng, shape, n_full, n_sub, taken)
    conf = _place_targets(rng, shape, max(2, n_full // 2), max(2, n_sub // 2), taken)
    refl = refl * (1 - fill[..., None]) + fill[..., None] * m["paint"]
    refl = refl * (1 - conf[..., None]) + conf[..., None] * m["confuser"]
    refl *= (1 + 0.15 * np.tanh(_field(rng, shape, 25)))[..., None]
    cube = _finish(rng, refl, wl)
    truth = (fill >= 0.2).astype(np.uint8)
    return Scene("land", cube, truth, wl, np.full(bands, wl[1] - wl[0]), _clicks(rng, fill), conf >= 0.2, fill)


def make_sea_scene(rows: int = 128, cols: int = 128, bands: int = 64, seed: int = 11,
                   n_targets: int | None = None) -> Scene:
    """Open water with glint, seaweed and debris, and life rafts / people as targets."""
    rng = np.random.default_rng(seed)
    wl = wavelengths(bands)
    m = materials(wl)
    shape = (rows, cols)
    refl = np.broadcast_to(m["water"], shape + (bands,)) * (1 + 0.1 * _field(rng, shape, 8))[..., None]
    rr, cc = np.mgrid[0:rows, 0:cols]
    waves = np.sin(rr * 0.9 + 0.6 * np.sin(cc * 0.13)) * np.sin(cc * 0.35 + rr * 0.05)
    glint = np.clip(waves * 0.5 + 0.3 * _field(rng, shape, 2), 0, None) ** 3 * 0.04
    glint *= 1 / (1 + np.exp(-2 * _field(rng, shape, 20)))
    refl = refl + glint[..., None] * m["foam"]
    taken = np.zeros(shape, bool)
    area = rows * cols
    weed = (_field(rng, shape, 4) > 2.2)
    refl[weed] = 0.5 * refl[weed] + 0.5 * m["seaweed"]
    taken |= ndimage.binary_dilation(weed, iterations=2)
    debris = _place_targets(rng, shape, max(2, area // 6000), max(2, area // 8000), taken)
    refl = refl * (1 - debris[..., None]) + debris[..., None] * m["debris"]
    n = n_targets if n_targets is not None else max(4, area // 2500)
    fill = _place_targets(rng, shape, n - n // 3, n // 3, taken, margin=4)
    # half the objects are rafts, the rest people in jackets (a similar orange)
    lab, nlab = ndimage.label(fill > 0)
    kind = rng.random(nlab + 1) < 0.5
    spec = np.where(kind[lab][..., None], m["raft"], m["jacket"])
    refl = refl * (1 - fill[..., None]) + fill[..., None] * spec
    cube = _finish(rng, refl, wl)
    truth = (fill >= 0.2).astype(np.uint8)
    return Scene("sea", cube, truth, wl, np.full(bands, wl[1] - wl[0]), _clicks(rng, fill),
                 np.zeros(shape, bool), fill)


BACKGROUNDS = ("beach", "urban", "vegetation")


def make_background_scene(kind: str, rows: int = 128, cols: int = 128, bands: int = 64, seed: int = 0,
                          contrast: float = 0.3) -> Scene:
    """A scene of one background type, with full-pixel and sub-pixel paint targets (the detectors'
    quality check on backgrounds unlike the bundled ones).

    ``beach``: sea, a band of wet sand, dry sand, seaweed and debris along the shore; ``urban``: a grid
    of roofs (three materials) and roads with trees between; ``vegetation``: a mix of green vegetation,
    dry grass and soil varying at two scales. Targets sit on any background; the confuser paint is not
    used (the land scene has it). The target spectrum is ``contrast`` of the paint and the rest the
    scene's mean spectrum, so the targets are as hard to tell from the background as real ones (1: the
    paint itself, as in the land scene).
    """
    if kind not in BACKGROUNDS:
        raise ValueError(f"kind must be one of {', '.join(BACKGROUNDS)}")
    rng = np.random.default_rng(seed + {"beach": 101, "urban": 202, "vegetation": 303}[kind])
    wl = wavelengths(bands)
    m = materials(wl)
    shape = (rows, cols)
    rr, cc = np.mgrid[0:rows, 0:cols].astype(float)
    taken = np.zeros(shape, bool)
    if kind == "beach":
        shore = cols * 0.35 + 6 * _field(rng, (rows, 1), 8)[:, 0:1] + 2 * np.sin(rr / 9)
        d = cc - shore  # < 0 sea, 0..10 wet sand, > 10 dry sand
        wet = np.clip(1 - d / 10, 0, 1)
        sand = (wet[..., None] * m["wet_sand"] + (1 - wet[..., None]) * m["sand"])
        refl = np.where((d < 0)[..., None], m["water"] * (1 + 0.1 * _field(rng, shape, 6))[..., None], sand)
        refl = refl * (1 + 0.05 * _field(rng, shape, 3))[..., None]
        wrack = (np.abs(d - 12) < 2) & (_field(rng, shape, 2) > 0.8)
        refl[wrack] = 0.5 * refl[wrack] + 0.5 * m["seaweed"]
        taken |= wrack
        refl += (d < 0)[..., None] * np.clip(_field(rng, shape, 2), 0, None)[..., None] ** 2 * 0.01 * m["foam"]
    elif kind == "urban":
        block = 16
        br, bc = (rr // block).astype(int), (cc // block).astype(int)
        road = (rr % block < 3) | (cc % block < 3)
        roof_kind = rng.integers(0, 3, (rows // block + 1, cols // block + 1))[br, bc]
        roofs = np.stack([m["roof"], m["concrete"], 0.6 * m["asphalt"] + 0.4 * m["roof"]])
        refl = roofs[roof_kind] * (1 + 0.06 * _field(rng, shape, 4))[..., None]
        trees = (~road) & (_field(rng, shape, 3) > 1.0)
        refl[trees] = m["veg"] * (1 + 0.1 * rng.standard_normal((int(trees.sum()), 1)))
        refl[road] = m["asphalt"] * (1 + 0.05 * rng.standard_normal((int(road.sum()), 1)))
        taken |= trees
    else:
        g = 1 / (1 + np.exp(-2 * _field(rng, shape, 12) - _field(rng, shape, 2)))
        dry = 1 / (1 + np.exp(-2 * _field(rng, shape, 7)))
        refl = (g[..., None] * m["veg"] + (1 - g[..., None]) * (dry[..., None] * m["drygrass"]
                                                                  + (1 - dry[..., None]) * m["soil"]))
        refl *= (1 + 0.1 * _field(rng, shape, 2))[..., None]
    n_full, n_sub = max(4, rows * cols // 2000), max(4, rows * cols // 2500)
    fill = _place_targets(rng, shape, n_full, n_sub, taken)
    target = contrast * m["paint"] + (1 - contrast) * refl.reshape(-1, bands).mean(axis=0)
    refl = refl * (1 - fill[..., None]) + fill[..., None] * target
    refl *= (1 + 0.1 * np.tanh(_field(rng, shape, 25)))[..., None]
    cube = _finish(rng, refl, wl)
    truth = (fill >= 0.2).astype(np.uint8)
    return Scene(kind, cube, truth, wl, np.full(bands, wl[1] - wl[0]), _clicks(rng, fill),
                 np.zeros(shape, bool), fill)


CLASS_MATERIALS = ("veg", "soil", "asphalt", "concrete", "water", "debris", "seaweed", "paint")


@dataclass
class LabelledScene:
    """A generated multi-class scene: int16 cube, integer class map (1..n), class names, wavelengths."""

    name: str
    cube: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]
    wavelengths: np.ndarray


def make_classes_scene(rows: int = 128, cols: int = 128, bands: int = 64, n_classes: int = 6,
                       seed: int = 5) -> LabelledScene:
    """Fields of several materials with known class labels (for clustering and classification tests).

    The image is cut into irregular fields (a Voronoi partition of random seeds, its borders warped by a
    smooth random field); each field is one material of :data:`CLASS_MATERIALS`, whose spectrum varies
    inside the field (brightness and a little of a neighbouring material) as real fields do. The
    sensor model (transmission, noise, int16) is the same as the other scenes'.
    """
    if not 2 <= n_classes <= len(CLASS_MATERIALS):
        raise ValueError(f"n_classes must be between 2 and {len(CLASS_MATERIALS)}")
    rng = np.random.default_rng(seed)
    wl = wavelengths(bands)
    m = materials(wl)
    names = CLASS_MATERIALS[:n_classes]
    n_fields = max(3 * n_classes, rows * cols // 600)
    pts = rng.uniform(0, 1, size=(n_fields, 2)) * (rows, cols)
    rr, cc = np.mgrid[0:rows, 0:cols].astype(float)
    rr = rr + 4 * _field(rng, (rows, cols), 6)
    cc = cc + 4 * _field(rng, (rows, cols), 6)
    d = (rr[..., None] - pts[:, 0]) ** 2 + (cc[..., None] - pts[:, 1]) ** 2
    field_id = d.argmin(axis=2)
    field_class = np.concatenate([np.arange(n_classes), rng.integers(0, n_classes, n_fields - n_classes)])
    rng.shuffle(field_class)
    labels = field_class[field_id] + 1
    spectra = np.stack([m[k] for k in names])
    mix_with = rng.integers(0, n_classes, n_fields)[field_id]
    frac = 0.1 * (1 / (1 + np.exp(-_field(rng, (rows, cols), 4))))
    refl = (1 - frac[..., None]) * spectra[labels - 1] + frac[..., None] * spectra[mix_with]
    refl *= (1 + 0.1 * _field(rng, (rows, cols), 5))[..., None]
    cube = _finish(rng, refl, wl)
    return LabelledScene("classes", cube, labels.astype(np.int16), names, wl)


def _clicks(rng, fill) -> np.ndarray:
    """Five example target pixels a user might click (full-fill pixels first)."""
    cand = np.argwhere(fill >= 0.99)
    if len(cand) < 5:
        cand = np.argwhere(fill >= 0.2)
    pick = rng.choice(len(cand), size=min(5, len(cand)), replace=False)
    return cand[np.sort(pick)]


SAMPLES = {"land": make_land_scene, "sea": make_sea_scene}
INTERLEAVES = {"land": "bil", "sea": "bsq"}


def write_scene(scene: Scene, folder: str | Path, interleave: str = "bip") -> dict[str, Path]:
    """Write a scene as ENVI + HDF5 + truth (ENVI and PNG) + example clicks (CSV), deterministically."""
    import h5py
    import spectral.io.envi as envi

    from hyperapp.io.atomic import atomic_paths, atomic_write_text
    from hyperapp.io.writers import MASK_CLASSES, write_envi, write_png

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = scene.name
    meta = {
        "description": f"hyperapp synthetic {name} scene (hyperapp.io.samples, rebuilt bit-for-bit)",
        "wavelength": [f"{w:.2f}" for w in scene.wavelengths],
        "fwhm": [f"{w:.2f}" for w in scene.fwhm],
        "wavelength units": "Nanometers",
        "reflectance scale factor": f"{SCALE:.0f}",
        "default bands": [str(int(np.argmin(np.abs(scene.wavelengths - t))) + 1) for t in (640, 550, 460)],
        "sensor type": "hyperapp synthetic",
    }
    hdr = folder / f"{name}.hdr"
    with atomic_paths(hdr, folder / f"{name}.img") as (thdr, timg):
        tmp = thdr.with_name(f".{name}-tmp.hdr")
        envi.save_image(str(tmp), scene.cube, dtype=np.int16, ext=".img", force=True, metadata=meta,
                        interleave=interleave, byteorder=0)
        tmp.replace(thdr)
        tmp.with_suffix(".img").replace(timg)
    h5 = folder / f"{name}.h5"
    with atomic_paths(h5) as (th5,):
        with h5py.File(th5, "w", libver=("earliest", "v110"), track_order=False) as f:
            ds = f.create_dataset("cube", data=np.transpose(scene.cube, (2, 0, 1)), compression="gzip",
                                  compression_opts=6, shuffle=True, chunks=(8, 64, 64), track_times=False)
            ds.attrs["interleave"] = "bsq"
            ds.attrs["reflectance_scale_factor"] = SCALE
            f.create_dataset("wavelength", data=scene.wavelengths, track_times=False).attrs["units"] = "nm"
            f.create_dataset("fwhm", data=scene.fwhm, track_times=False)
            f.create_dataset("truth", data=scene.truth, track_times=False)
    write_envi(folder / f"{name}_truth", scene.truth, classes=MASK_CLASSES)
    write_png(folder / f"{name}_truth", scene.truth)
    atomic_write_text(folder / f"{name}_targets.csv", "row,col\n" + "".join(f"{r},{c}\n" for r, c in scene.clicks))
    return {"hdr": hdr, "h5": h5}


def build_samples(folder: str | Path) -> None:
    """Rebuild ``sample_cubes/`` (``python -m hyperapp.io.samples [folder]``)."""
    for name, make in SAMPLES.items():
        write_scene(make(), folder, INTERLEAVES[name])


def sample_folder() -> Path:
    """The folder of the bundled sample scenes: the ``hyperapp.sample_cubes`` package, installed or
    (with ``pip install -e .``) the checkout's ``sample_cubes/``."""
    import hyperapp.sample_cubes

    return Path(hyperapp.sample_cubes.__file__).resolve().parent


def sample_path(name: str = "land") -> Path:
    """Path of a bundled sample scene's header."""
    p = sample_folder() / f"{name}.hdr"
    if not p.is_file():
        raise FileNotFoundError(f"sample scene {name!r} not found in {p.parent}; rebuild it with "
                                "hyperapp --headless samples")
    return p


if __name__ == "__main__":
    import sys

    build_samples(sys.argv[1] if len(sys.argv) > 1 else sample_folder())
