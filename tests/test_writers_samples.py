"""Writers (ENVI, GeoTIFF, PNG, NPY), atomicity, and the bit-for-bit sample generator."""

import hashlib

import numpy as np
import pytest

from hyperapp.core.cube import cube_from_array
from hyperapp.core.errors import InputError
from hyperapp.io import open_cube, write_envi, write_geotiff, write_image
from hyperapp.io.atomic import atomic_paths
from hyperapp.io.samples import build_samples

from .conftest import SAMPLES

MAP_INFO = ["UTM", "1.000", "1.000", "500000.0", "4100000.0", "2.0", "2.0", "11", "North", "WGS-84", "units=Meters"]


def test_envi_output_keeps_geometry(tmp_path):
    cube = cube_from_array(np.zeros((4, 5, 2), np.float32), map_info=MAP_INFO)
    scores = np.random.default_rng(0).random((4, 5)).astype(np.float32)
    hdr = write_envi(tmp_path / "scores", scores, cube)
    back = open_cube(hdr)
    np.testing.assert_array_equal(back.read()[:, :, 0], scores)
    assert back.map_info[:7] == MAP_INFO[:7]
    assert back.wavelengths is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.hdr", "scores.img"]


def test_geotiff_carries_crs_and_transform(tmp_path):
    import rasterio

    cube = cube_from_array(np.zeros((4, 5, 2), np.float32), map_info=MAP_INFO)
    mask = np.eye(4, 5, dtype=np.uint8)
    p = write_geotiff(tmp_path / "mask", mask, cube)
    with rasterio.open(p) as src:
        np.testing.assert_array_equal(src.read(1), mask)
        assert src.crs.to_epsg() == 32611  # WGS 84 / UTM zone 11N
        assert src.transform.to_gdal() == (500000.0, 2.0, 0.0, 4100000.0, 0.0, -2.0)
    assert sorted(q.name for q in tmp_path.iterdir()) == ["mask.tif"]  # atomic: no temporary left
    with pytest.raises(InputError, match="no map info"):
        write_geotiff(tmp_path / "x", mask, cube_from_array(np.zeros((4, 5, 2))))


def test_png_and_npy(tmp_path):
    from PIL import Image

    m = np.zeros((3, 4), np.uint8)
    m[1, 2] = 1
    p = write_image(tmp_path / "m", m, "png")
    assert np.asarray(Image.open(p))[1, 2] == 255
    q = write_image(tmp_path / "m", m, "npy")
    np.testing.assert_array_equal(np.load(q), m)


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "out.img"
    with pytest.raises(RuntimeError):
        with atomic_paths(final) as (tmp,):
            tmp.write_bytes(b"half")
            raise RuntimeError("crash mid-write")
    assert list(tmp_path.iterdir()) == []


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file() and p.suffix != ".py"}


def test_sample_scenes_rebuild_bit_for_bit(tmp_path):
    build_samples(tmp_path)
    assert _digest(tmp_path) == _digest(SAMPLES)


def test_sample_scenes_are_small_and_have_truth():
    for name in ("land", "sea"):
        total = sum(p.stat().st_size for p in SAMPLES.glob(f"{name}*"))
        assert total < 5 * 2**20
        cube = open_cube(SAMPLES / f"{name}.hdr")
        truth = open_cube(SAMPLES / f"{name}_truth.hdr").read()[:, :, 0]
        assert cube.shape == (128, 128, 64) and truth.shape == (128, 128)
        assert 20 < truth.sum() < 0.05 * truth.size


def test_background_scenes():
    """The generated background types: reproducible, int16, with full-pixel and sub-pixel targets."""
    from hyperapp.io.samples import BACKGROUNDS, make_background_scene

    for kind in BACKGROUNDS:
        a = make_background_scene(kind, 96, 96, 32)
        b = make_background_scene(kind, 96, 96, 32)
        assert a.cube.dtype == np.int16 and a.cube.shape == (96, 96, 32)
        np.testing.assert_array_equal(a.cube, b.cube)
        assert (a.fill == 1.0).any() and ((a.fill > 0.2) & (a.fill < 1.0)).any()
        assert 0.002 < a.truth.mean() < 0.05
        assert not np.array_equal(a.cube, make_background_scene(kind, 96, 96, 32, seed=1).cube)


def test_roi_classes_round_trip_through_an_envi_classification_file(tmp_path):
    """ROIs exported as ENVI are a classification file (class names and colours in the header, so a job's
    glob over the folder leaves it out as a mask), and import restores every class by name."""
    from hyperapp.io.envi import read_header
    from hyperapp.io.roi import RoiSet

    a = RoiSet((20, 30))
    water = a.add_class("water")
    lab = np.zeros((20, 30), np.uint8)
    lab[2, 3], lab[5:8, 5:9], lab[10, 10:14] = 1, 2, water
    a.set_labels(lab)
    a.export(tmp_path / "rois.hdr")
    head = read_header(tmp_path / "rois.hdr")
    assert head["file type"] == "ENVI Classification"
    assert [str(n) for n in head["class names"]][1:] == [n for n, _ in a.classes]
    b = RoiSet((20, 30))
    b.import_(tmp_path / "rois.hdr")
    assert [n for n, _ in b.classes] == [n for n, _ in a.classes]
    np.testing.assert_array_equal(b.labels, a.labels)


def test_roi_csv_classes_are_read_as_classes_everywhere_and_refused_as_one_set(tmp_path, capsys):
    """The window's ROI export (``row,col,class``) is read by its classes where classes are read (the window's
    import, ``analyse --roi``, a job's ``roi``: target 1, background 2, other names from 3); where one set of
    pixels is read (targets, background, truth) a list of several classes is refused in one line, as every
    pixel would have counted whatever its class; a list of one class, or of numbered classes, reads."""
    from hyperapp.cli import main
    from hyperapp.core.errors import InputError
    from hyperapp.io import read_labels
    from hyperapp.io.masks import check_labels_file, read_class_map
    from hyperapp.io.roi import RoiSet

    a = RoiSet((20, 30))
    water = a.add_class("water")
    lab = np.zeros((20, 30), np.uint8)
    lab[2, 3], lab[5:8, 5:9], lab[10, 10:14] = water, 1, 2  # "water" first in raster order
    a.set_labels(lab)
    a.export(tmp_path / "rois.csv")
    b = RoiSet((20, 30))
    b.import_(tmp_path / "rois.csv")
    np.testing.assert_array_equal(b.labels, a.labels)
    np.testing.assert_array_equal(read_class_map(tmp_path / "rois.csv", (20, 30)), lab)
    from hyperapp.io.masks import class_names_of

    assert class_names_of(tmp_path / "rois.csv") == {1: "target", 2: "background", 3: "water"}
    check_labels_file(tmp_path / "rois.csv", classes=True)
    for read in (lambda: read_labels(tmp_path / "rois.csv", (20, 30)), lambda: check_labels_file(tmp_path / "rois.csv")):
        with pytest.raises(InputError, match="3 classes in its class column"):
            read()
    (tmp_path / "one.csv").write_text("row,col,class\n4,3,target\n5,3,target\n")
    assert read_labels(tmp_path / "one.csv", (20, 30)).sum() == 2
    (tmp_path / "numbered.csv").write_text("y,x,label\n4,3,7\n5,3,2\n6,3,0\n")
    m = read_class_map(tmp_path / "numbered.csv", (20, 30))
    assert (m[4, 3], m[5, 3], m[6, 3], int(m.sum())) == (7, 2, 0, 9)
    import spectral.io.envi as envi

    cube = np.random.default_rng(0).random((20, 30, 6)).astype(np.float32)
    envi.save_image(str(tmp_path / "c.hdr"), cube, force=True)
    rc = main(["--headless", "detect", str(tmp_path / "c.hdr"), "--method", "ace", "--targets", str(tmp_path / "rois.csv"),
               "--out", str(tmp_path / "det")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "an ROI file" in err and not (tmp_path / "det").exists()


def test_a_read_only_file_is_kept_and_a_replaced_one_keeps_its_mode(tmp_path, land_hdr, capsys):
    """A project or mask set read-only (444) was replaced without a word, its mode then 644: now refused,
    naming it, and left as it was; a writable file replaced keeps its mode (a 640 one stayed 640), and a
    read-only output among a run's outputs stops the run before any is moved."""
    import os

    from hyperapp.cli import main
    from hyperapp.core.errors import OutputError
    from hyperapp.io.atomic import atomic_write_text

    f = tmp_path / "p.json"
    f.write_text("{}")
    f.chmod(0o444)
    with pytest.raises(OutputError, match="p.json: is read-only"):
        atomic_write_text(f, "new")
    assert f.read_text() == "{}" and oct(f.stat().st_mode & 0o777) == "0o444"
    f.chmod(0o640)
    atomic_write_text(f, "new")
    assert f.read_text() == "new" and oct(f.stat().st_mode & 0o777) == "0o640"
    out = tmp_path / "run"
    argv = ["--headless", "detect", str(land_hdr), "--method", "sam", "--targets",
            str(land_hdr.with_name("land_targets.csv")), "--out", str(out)]
    assert main(argv) == 0
    before = (out / "scores.img").read_bytes()
    os.chmod(out / "mask.img", 0o444)
    assert main(argv + ["--far", "0.01"]) == 2
    assert "mask.img: is read-only" in capsys.readouterr().err
    assert (out / "scores.img").read_bytes() == before  # nothing of the run moved in
    # a project: refused before its models' folder is touched; the folder it makes has the usual mode
    from hyperapp.io import open_cube
    from hyperapp.project.session import Session

    session = Session(open_cube(land_hdr))
    proj = tmp_path / "proj.hyperapp.json"
    session.save_project(proj)
    assert oct((tmp_path / "proj.hyperapp.models").stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    proj.chmod(0o444)
    with pytest.raises(OutputError, match="proj.hyperapp.json: is read-only"):
        session.save_project(proj)


def _umask() -> int:
    import os

    m = os.umask(0)
    os.umask(m)
    return m
