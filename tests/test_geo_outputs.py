"""Outputs placed on Earth: objects' and boxes' longitude/latitude, the GeoJSON (RFC 7946), GeoTIFF exports
with their CRS and transform, and a swath orthorectified through its GLT (``--ortho``).

Three tiny synthetic located cubes: an ENVI file with a UTM ``map info``, a cube on a map grid in EPSG:4326,
and a swath with latitude/longitude arrays and a GLT. The truth each output is checked against is worked out
here independently (pyproj directly, the swath's own linear lat/lon formula).
"""

import csv
import io
import json
import math

import numpy as np
import pytest

from hyperapp.core.cube import cube_from_array
from hyperapp.core.errors import InputError
from hyperapp.core.geo import MapGrid, Swath

ROWS, COLS, BANDS = 30, 40, 12
#: planted 2 x 2 targets (top-left pixels); the first is the one clicked
PLANTED = [(4, 5), (12, 30), (22, 8), (25, 33)]
UTM = ["UTM", "1.000", "1.000", "500000.0", "4100000.0", "30.0", "30.0", "11", "North", "WGS-84", "units=Meters"]
GRID_4326 = MapGrid((10.0, 0.001, 0.0, 45.0, 0.0, -0.001), "EPSG:4326")


def _scene(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    data = (0.3 + 0.02 * rng.standard_normal((ROWS, COLS, BANDS))).astype(np.float32)
    target = np.linspace(0.9, 0.1, BANDS, dtype=np.float32)
    for r, c in PLANTED:
        data[r:r + 2, c:c + 2] = target + 0.005 * rng.standard_normal((2, 2, BANDS))
    return data


def _clicks() -> np.ndarray:
    t = np.zeros((ROWS, COLS), bool)
    r, c = PLANTED[0]
    t[r:r + 2, c:c + 2] = True
    return t


# --------------------------------------------------------------------------- the three located cubes
def _envi_utm(tmp_path):
    import spectral.io.envi as envi

    from hyperapp.io import open_cube

    hdr = tmp_path / "utm.hdr"
    envi.save_image(str(hdr), _scene(), dtype=np.float32, force=True, ext=".img", interleave="bil",
                    metadata={"map info": "{" + ", ".join(UTM) + "}"})
    cube = open_cube(hdr)
    assert isinstance(cube.geo, MapGrid)
    return cube


def _utm_truth(r, c):
    """WGS84 (lon, lat) of pixel-centre position (r, c) of the UTM cube, by pyproj directly."""
    from pyproj import Transformer

    x, y = 500000.0 + (np.asarray(c) + 0.5) * 30.0, 4100000.0 - (np.asarray(r) + 0.5) * 30.0
    return Transformer.from_crs("EPSG:32611", "EPSG:4326", always_xy=True).transform(x, y)


def _wgs84_cube():
    return cube_from_array(_scene(1), geo=GRID_4326)


def _wgs84_truth(r, c):
    return 10.0 + (np.asarray(c) + 0.5) * 0.001, 45.0 - (np.asarray(r) + 0.5) * 0.001


# The swath: pixel (r, c) is seen at grid cell (r + 3, COLS - 1 - c + 2) of a 0.001-degree EPSG:4326 grid
# (columns mirrored, as on a descending pass), so its lat/lon are that cell's centre.
SW_GRID = MapGrid((-120.0, 0.001, 0.0, 35.0, 0.0, -0.001), "EPSG:4326")
SW_SHAPE = (ROWS + 6, COLS + 4)


def _cell(r, c):
    return np.asarray(r) + 3, COLS - 1 - np.asarray(c) + 2


def _swath_truth(r, c):
    gr, gc = _cell(np.asarray(r, float), np.asarray(c, float))
    return -120.0 + (gc + 0.5) * 0.001, 35.0 - (gr + 0.5) * 0.001


def _swath(unseen=()):
    """The swath, its GLT showing every pixel but those of ``unseen`` ((row, col) pairs)."""
    rr, cc = np.mgrid[0:ROWS, 0:COLS]
    lon, lat = _swath_truth(rr, cc)
    glt_x = np.zeros(SW_SHAPE, np.int32)
    glt_y = np.zeros(SW_SHAPE, np.int32)
    gr, gc = _cell(rr, cc)
    glt_x[gr, gc] = cc + 1  # 1-based, 0 = no swath pixel
    glt_y[gr, gc] = rr + 1
    for r, c in unseen:
        glt_x[_cell(r, c)] = glt_y[_cell(r, c)] = 0
    return Swath(lat, lon, glt=(glt_x, glt_y), grid=SW_GRID)


def _swath_cube():
    return cube_from_array(_scene(2), geo=_swath())


CUBES = {"envi-utm": (_envi_utm, _utm_truth, 30.0 / 111_000 / 2),
         "map-4326": (lambda _p: _wgs84_cube(), _wgs84_truth, 0.0005),
         "swath": (lambda _p: _swath_cube(), _swath_truth, 0.0005)}


def _read_csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


@pytest.mark.parametrize("name", list(CUBES))
def test_objects_carry_lon_lat_within_half_a_pixel(tmp_path, name):
    from hyperapp.detect.run import detect_to_folder
    from hyperapp.request import DetectRequest

    make, truth, half = CUBES[name]
    cube = make(tmp_path)
    _, paths = detect_to_folder(cube, DetectRequest("ace", threshold=0.5, device="cpu"), _clicks(), None, tmp_path / "out")
    rows = _read_csv(paths["objects"])
    assert list(rows[0])[-2:] == ["lon", "lat"]
    found = {(round(float(o["centroid_row"]) - 0.5), round(float(o["centroid_col"]) - 0.5)): o for o in rows}
    assert set(PLANTED) <= set(found), f"planted targets not all detected: {sorted(found)}"
    for r, c in PLANTED:
        o = found[(r, c)]
        lon, lat = truth(r + 0.5, c + 0.5)  # the 2 x 2 object's centroid
        # within half a pixel (in degrees of longitude scaled to the parallel, and of latitude)
        assert abs(float(o["lon"]) - lon) * math.cos(math.radians(lat)) < half
        assert abs(float(o["lat"]) - lat) < half
        assert abs(float(o["lon"]) - lon) < 1e-6 and abs(float(o["lat"]) - lat) < 1e-6  # in fact exact
    # and as RFC 7946 GeoJSON beside it: each object's box, its properties the table's row
    gj = json.loads(paths["objects_geojson"].read_text())
    assert gj["type"] == "FeatureCollection" and "crs" not in gj and len(gj["features"]) == len(rows)
    by_label = {str(f["properties"]["label"]): f for f in gj["features"]}
    for o in rows:
        f = by_label[o["label"]]
        assert f["geometry"]["type"] == "Polygon" and f["properties"]["pixels"] == int(o["pixels"])
        assert abs(f["properties"]["lon"] - float(o["lon"])) < 1e-7 and abs(f["properties"]["lat"] - float(o["lat"])) < 1e-7
        ring = np.array(f["geometry"]["coordinates"][0])
        assert (ring[0] == ring[-1]).all() and ring.shape == (5, 2)
        lo, la = float(o["lon"]), float(o["lat"])  # the centroid inside its box
        assert ring[:, 0].min() < lo < ring[:, 0].max() and ring[:, 1].min() < la < ring[:, 1].max()
    # a swath's rasters have their places beside them, as ENVI's input geometry (IGM) file; a map grid's
    # rasters carry map info instead
    assert ("igm" in paths) == (name == "swath")
    if name == "swath":
        from hyperapp.io import open_cube

        igm = open_cube(paths["igm"])
        assert (igm.rows, igm.cols, igm.bands) == (ROWS, COLS, 2)
        g = igm.read()
        for r, c in PLANTED:
            np.testing.assert_allclose(g[r, c], truth(r, c), atol=1e-9)
        assert "Longitude" in paths["igm"].read_text() and "Latitude" in paths["igm"].read_text()


def test_objects_without_location_have_no_lon_lat(tmp_path):
    from hyperapp.detect.run import detect_to_folder
    from hyperapp.request import DetectRequest

    _, paths = detect_to_folder(cube_from_array(_scene()), DetectRequest("ace", threshold=0.5, device="cpu"), _clicks(), None, tmp_path / "o")
    assert paths["objects"].read_text().splitlines()[0] == \
        "label,pixels,centroid_row,centroid_col,row0,col0,row1,col1,peak_score"
    assert "objects_geojson" not in paths  # (nothing to place on a map)


def test_objects_export_as_geojson_from_a_result(tmp_path):
    """The window's Export > Objects with a .geojson name: the same features as the run's objects.geojson;
    a .csv name keeps CSV."""
    from hyperapp.detect.outputs import write_detection_item
    from hyperapp.detect.run import run_detection
    from hyperapp.request import DetectRequest

    cube = _wgs84_cube()
    res = run_detection(cube, DetectRequest("ace", threshold=0.5, device="cpu"), _clicks())
    gj = json.loads(write_detection_item(res, "objects", tmp_path / "o.geojson", cube).read_text())
    assert len(gj["features"]) == res.report["objects"] and gj["hyperapp_coordinates"].startswith("WGS84")
    assert write_detection_item(res, "objects", tmp_path / "o.csv", cube).read_text().startswith("label,")


def test_one_formatter_for_objects_and_boxes():
    from hyperapp.io.objects import FIELDS, boxes_csv, table_csv
    from hyperapp.models.postprocess import TABLE_COLUMNS, objects_csv

    boxes = [{"row": 4, "col": 5, "height": 2, "width": 2, "level": 0, "ann1": 0.91234567, "ann2": 0.5}]
    assert boxes_csv(boxes) == table_csv(boxes, FIELDS)
    assert boxes_csv(boxes).splitlines()[1] == "4,5,2,2,0,0.912346,0.5,"  # missing source: empty
    located = boxes_csv(boxes, GRID_4326).splitlines()
    assert located[0].endswith(",lon,lat") and located[1].endswith(",10.0060000,44.9950000")  # box middle
    table = {k: np.array([1.0 if "row" in k or "col" in k else 1]) for k in TABLE_COLUMNS}
    assert objects_csv(table) == table_csv(table, TABLE_COLUMNS)


def _ring_is_ccw(ring):
    x, y = np.array(ring).T
    return np.sum(x[:-1] * y[1:] - x[1:] * y[:-1]) > 0


@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("name", list(CUBES))
def test_boxes_geojson_is_rfc7946_lon_lat(tmp_path, name, edge):
    from hyperapp.io.georef import geo_of
    from hyperapp.io.objects import boxes_geojson

    make, truth, _ = CUBES[name]
    cube = make(tmp_path)
    r, c = PLANTED[1]
    if edge:  # a box on the image's edges (bottom-right): its outer corners lie outside the pixel centres
        r, c = ROWS - 2, COLS - 3
    gj = json.loads(boxes_geojson([{"row": r, "col": c, "height": 2, "width": 3, "level": 0, "ann1": 1.0,
                                    "ann2": 1.0}], geo_of(cube)))
    assert gj["type"] == "FeatureCollection" and "crs" not in gj and "WGS84" in gj["hyperapp_coordinates"]
    (feat,) = gj["features"]
    ring = feat["geometry"]["coordinates"][0]
    assert feat["geometry"]["type"] == "Polygon" and len(ring) == 5 and ring[0] == ring[-1]  # closed
    assert _ring_is_ccw(ring)  # RFC 7946: exterior rings counter-clockwise
    # (lon, lat) order: the corners are the box's pixel corners, at half-pixel positions around its pixels
    expect = [tuple(float(v) for v in truth(rr - 0.5, cc - 0.5))
              for rr, cc in ((r, c), (r, c + 3), (r + 2, c + 3), (r + 2, c))]
    # (a swath's: its pixel centres' lat/lon interpolated, extended at the edges)
    assert np.allclose(sorted(map(tuple, ring[:4])), sorted(expect), rtol=0, atol=2e-8)
    lon, lat = truth(r + 0.5, c + 1.0)
    assert feat["properties"]["lon"] == pytest.approx(lon, abs=1e-7)
    assert feat["properties"]["lat"] == pytest.approx(lat, abs=1e-7)
    assert -180 <= ring[0][0] <= 180 and -90 <= ring[0][1] <= 90


def test_boxes_geojson_without_location_says_pixels():
    from hyperapp.io.objects import boxes_geojson

    gj = json.loads(boxes_geojson([{"row": 1, "col": 2, "height": 3, "width": 4}]))
    assert gj["hyperapp_coordinates"].startswith("pixel") and "not longitude/latitude" in gj["hyperapp_coordinates"]
    feat = gj["features"][0]
    assert feat["properties"]["coordinates"] == "pixel"
    assert feat["geometry"]["coordinates"][0] == [[2, 1], [6, 1], [6, 4], [2, 4], [2, 1]]


# --------------------------------------------------------------------------- GeoTIFF
@pytest.mark.parametrize("name", ["envi-utm", "map-4326"])
def test_geotiff_reads_back_with_crs_and_transform(tmp_path, name):
    import rasterio

    from hyperapp.io.writers import write_image

    cube = CUBES[name][0](tmp_path)
    scores = np.random.default_rng(3).random((ROWS, COLS)).astype(np.float32)
    scores[0, 0] = np.nan
    p = write_image(tmp_path / "scores", scores, "tiff", cube)
    with rasterio.open(p) as src:
        np.testing.assert_array_equal(src.read(1), scores)
        assert src.crs.to_epsg() == (32611 if name == "envi-utm" else 4326)
        expect = (500000.0, 30.0, 0.0, 4100000.0, 0.0, -30.0) if name == "envi-utm" else GRID_4326.transform
        assert src.transform.to_gdal() == pytest.approx(expect)
        assert math.isnan(src.nodata)
        # the transform places pixel (7, 9)'s centre where the cube's location does
        x, y = src.xy(7, 9)
        lon, lat = CUBES[name][1](7, 9)
        if name == "map-4326":
            assert (x, y) == pytest.approx((lon, lat))
    assert [q.name for q in tmp_path.iterdir() if q.name.startswith("scores")] == ["scores.tif"]


def test_swath_geotiff_is_orthorectified_through_its_glt(tmp_path):
    import rasterio

    from hyperapp.io.writers import write_classification, write_image

    cube = _swath_cube()
    mask = np.zeros((ROWS, COLS), np.uint8)
    mask[5, 7] = 1
    p = write_image(tmp_path / "mask", mask, "tiff", cube)
    with rasterio.open(p) as src:
        assert src.crs.to_epsg() == 4326 and src.transform.to_gdal() == pytest.approx(SW_GRID.transform)
        out = src.read(1)
        assert out.shape == SW_SHAPE and out.sum() == 1 and out[_cell(5, 7)] == 1
        assert "orthorectified" in src.tags()["TIFFTAG_IMAGEDESCRIPTION"]
    labels = np.full((ROWS, COLS), -1)
    labels[2, 3] = 1
    q = write_classification(tmp_path / "classes", labels, ["a", "b"], cube=cube, fmt="tiff")
    with rasterio.open(q) as src:
        assert src.read(1)[_cell(2, 3)] == 2 and src.colormap(1)[2][:3] != (0, 0, 0) and src.crs.to_epsg() == 4326


def test_swath_without_glt_geotiff_is_unplaced_and_says_so(tmp_path):
    import warnings

    import rasterio

    from hyperapp.io.georef import geotiff_placement
    from hyperapp.io.writers import write_image

    sw = _swath()
    cube = cube_from_array(_scene(), geo=Swath(sw.lat, sw.lon))
    assert geotiff_placement(cube).startswith("not georeferenced")
    p = write_image(tmp_path / "mask", np.eye(ROWS, COLS, dtype=np.uint8), "tiff", cube)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rasterio.open(p) as src:
            assert src.crs is None and src.read(1).shape == (ROWS, COLS)
            assert "not georeferenced" in src.tags()["TIFFTAG_IMAGEDESCRIPTION"]


# --------------------------------------------------------------------------- orthorectification
def test_ortho_maps_known_pixels_to_known_cells():
    from hyperapp.io.georef import glt_index, orthorectify

    sw = _swath()
    img = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    out = orthorectify(img, sw)
    assert out.shape == SW_SHAPE
    for r, c in ((0, 0), (5, 7), (ROWS - 1, COLS - 1), (12, 0)):
        assert out[_cell(r, c)] == img[r, c]
    assert np.isnan(out[0, 0]) and np.isnan(out[-1, -1])  # no swath pixel there
    assert np.count_nonzero(~np.isnan(out)) == ROWS * COLS
    cube3 = np.stack([img, -img], axis=2)
    np.testing.assert_array_equal(orthorectify(cube3, sw)[_cell(5, 7)], [img[5, 7], -img[5, 7]])
    # a window of the swath: the GLT's cells of pixels outside it are empty, the others shift
    win = sw.window(slice(10, 20), slice(4, 40, 2))
    rows, cols, valid = glt_index(win)
    assert valid.sum() == 10 * 18
    assert (rows[_cell(10, 4)], cols[_cell(10, 4)]) == (0, 0) and (rows[_cell(11, 8)], cols[_cell(11, 8)]) == (1, 2)
    assert not valid[_cell(10, 5)] and not valid[_cell(9, 4)]
    # EMIT's negative indices (a cell filled from a neighbour) name the pixel by their magnitude
    neg = Swath(sw.lat, sw.lon, glt=(-sw.glt[0], -sw.glt[1]), grid=sw.grid)
    np.testing.assert_array_equal(orthorectify(img, neg), out)
    with pytest.raises(InputError, match="not on this swath"):
        orthorectify(img[:5], sw)


def test_ortho_cube_is_the_swath_on_the_grid():
    from hyperapp.core.geo import lonlat
    from hyperapp.io.georef import ortho_cube

    cube = _swath_cube()
    o = ortho_cube(cube, block_bytes=7 * COLS * BANDS * 4)  # blocks of 7 rows: the block edges are crossed
    assert o.shape == (*SW_SHAPE, BANDS) and o.geo == SW_GRID
    data, got = cube.read(), o.read()
    for r, c in ((0, 0), (6, 7), (7, 7), (ROWS - 1, COLS - 1)):
        np.testing.assert_array_equal(got[_cell(r, c)], data[r, c])
        assert np.allclose(lonlat(o.geo, *_cell(r, c)), _swath_truth(r, c))  # same place on Earth
    assert np.isnan(got[0, 0]).all() and np.count_nonzero(~np.isnan(got[:, :, 0])) == ROWS * COLS
    sub = ortho_cube(cube.subset_bands([1, 4]))
    np.testing.assert_array_equal(sub.read()[_cell(3, 4)], data[3, 4, [1, 4]])
    with pytest.raises(InputError, match="no geometry lookup table"):
        ortho_cube(_wgs84_cube())


def test_detect_ortho_writes_outputs_on_the_grid(tmp_path, capsys):
    import rasterio

    from hyperapp.cli import main
    from hyperapp.detect.run import detect_to_folder
    from hyperapp.io import open_cube
    from hyperapp.request import DetectRequest

    cube = _swath_cube()
    res, paths = detect_to_folder(cube, DetectRequest("ace", threshold=0.5, device="cpu"), _clicks(), None, tmp_path / "o", ortho=True)
    scores = open_cube(paths["scores"])
    assert (scores.rows, scores.cols) == SW_SHAPE
    assert isinstance(scores.geo, MapGrid) and scores.geo.transform == pytest.approx(SW_GRID.transform)
    s = scores.read()[:, :, 0]
    r, c = PLANTED[2]
    assert s[_cell(r, c)] == pytest.approx(res.scores[r, c]) and np.isnan(s[0, 0])
    assert scores.nodata is not None and np.isnan(scores.nodata)  # the header says NaN is no data
    mask = open_cube(paths["mask"]).read()[:, :, 0]
    assert mask.sum() == res.mask.sum() and mask[_cell(r, c)] == 1
    objs = _read_csv(paths["objects"])
    rep = json.loads(paths["report"].read_text())
    assert rep["orthorectified"]["objects"] == len(objs) and rep["orthorectified"]["rows"] == SW_SHAPE[0]
    assert rep["orthorectified"]["swath_detections_off_the_grid"] == 0
    for o in objs:  # rows/cols on the grid, lon/lat from it: the same place as the swath says
        gr, gc = float(o["centroid_row"]), float(o["centroid_col"])
        assert float(o["lon"]) == pytest.approx(-120.0 + (gc + 0.5) * 0.001, abs=1e-7)
        assert float(o["lat"]) == pytest.approx(35.0 - (gr + 0.5) * 0.001, abs=1e-7)
    with rasterio.open(paths["scores"].with_suffix(".img")) as src:  # GDAL reads the ENVI header's grid too
        assert src.crs.is_geographic and "WGS" in src.crs.to_wkt()
        assert src.transform.to_gdal() == pytest.approx(SW_GRID.transform)
    # refused, before any output, for a cube without a GLT
    with pytest.raises(InputError, match="--ortho needs a swath"):
        detect_to_folder(_wgs84_cube(), DetectRequest("ace", threshold=0.5), _clicks(), None, tmp_path / "p", ortho=True)
    assert not (tmp_path / "p").exists()
    hdr = _envi_utm(tmp_path).path
    (tmp_path / "t.csv").write_text(f"{PLANTED[0][0]},{PLANTED[0][1]}\n")
    assert main(["--headless", "detect", str(hdr), "--method", "ace", "--targets", str(tmp_path / "t.csv"),
                 "--out", str(tmp_path / "q"), "--ortho"]) == 2
    assert "--ortho needs a swath" in capsys.readouterr().err
    assert not (tmp_path / "q").exists()


@pytest.mark.parametrize("ortho", [False, True])
def test_emit_product_detect_objects_lon_lat(tmp_path, capsys, ortho):
    """An EMIT L2A file (the layout of tests/product_files.py) through ``detect``: the objects at the planted
    targets carry their truth's lon/lat, on the swath's pixels or (``--ortho``) the GLT's grid."""
    from hyperapp.cli import main

    from .product_files import TARGETS, write_emit

    path, truth = write_emit(tmp_path)
    (tmp_path / "t.csv").write_text("".join(f"{r},{c}\n" for r, c in TARGETS[:2]))
    args = ["--headless", "detect", str(path), "--method", "ace", "--targets", str(tmp_path / "t.csv"),
            "--out", str(tmp_path / "o")]
    assert main(args + ["--ortho"] * ortho) == 0, capsys.readouterr().err
    assert ("orthorectified through the GLT onto a 42 x 52 grid" in capsys.readouterr().out) == ortho
    found = {(float(o["centroid_row"]), float(o["centroid_col"])): o for o in _read_csv(tmp_path / "o/objects.csv")}
    gx, gy = truth["glt"]
    for r, c in TARGETS[2:]:
        if ortho:  # the grid cell whose GLT names swath pixel (r, c)
            (i,), (j,) = np.nonzero((gy == r + 1) & (gx == c + 1))
            key = (float(i), float(j))
        else:
            key = (float(r), float(c))
        assert key in found, f"planted target {(r, c)} not an object at {key}"
        lon, lat = truth["lonlat"](r, c)
        assert abs(float(found[key]["lon"]) - lon) < 0.00025 and abs(float(found[key]["lat"]) - lat) < 0.00025


@pytest.mark.parametrize("crs", ["EPSG:4326", "EPSG:32611", "EPSG:3035"])
def test_envi_output_of_a_map_grid_without_map_info_keeps_it(tmp_path, crs):
    """A cube on a map grid from elsewhere (a GeoTIFF, a product's grid) has no ENVI map info: its ENVI
    outputs get one (UTM/geographic by name, another CRS as Arbitrary with the WKT) that reads back as the grid."""
    from pyproj import CRS

    from hyperapp.io import open_cube
    from hyperapp.io.writers import write_envi

    t = GRID_4326.transform if crs == "EPSG:4326" else (4321000.0, 20.0, 0.0, 3210000.0, 0.0, -20.0)
    cube = cube_from_array(_scene(), geo=MapGrid(t, crs))
    back = open_cube(write_envi(tmp_path / "s", np.ones((ROWS, COLS), np.float32), cube))
    assert isinstance(back.geo, MapGrid) and back.geo.transform == pytest.approx(t)
    assert CRS(back.geo.crs).is_geographic == CRS(crs).is_geographic
    from hyperapp.core.geo import lonlat  # the same places on Earth

    assert np.allclose(lonlat(back.geo, [0, 29], [0, 39]), lonlat(cube.geo, [0, 29], [0, 39]), rtol=0, atol=1e-9)


def test_detections_no_grid_cell_shows_are_counted(tmp_path):
    """A GLT leaves out some swath pixels (at a swath's edges and overlaps): a detection there is counted
    and said, since the ortho outputs cannot hold it (a walker lost one without a word)."""
    from hyperapp.detect.run import detect_to_folder
    from hyperapp.request import DetectRequest

    r, c = PLANTED[2]
    cube = cube_from_array(_scene(2), geo=_swath(unseen=[(r, c), (r + 1, c)]))
    res, paths = detect_to_folder(cube, DetectRequest("ace", threshold=0.5, device="cpu"), _clicks(), None,
                                  tmp_path / "o", ortho=True)
    assert res.mask[r, c] and res.mask[r + 1, c]
    o = json.loads(paths["report"].read_text())["orthorectified"]
    assert o["swath_detections_off_the_grid"] == 2 and o["detections"] == res.mask.sum() - 2
    from hyperapp.cli import ortho_words

    assert "; 2 detected swath pixels no grid cell shows" in ortho_words(o) and "without --ortho" in ortho_words(o)
    assert "no grid cell" not in ortho_words({**o, "swath_detections_off_the_grid": 0})
    # an analysis's grid (no detections on it): the same words, without counts
    assert ortho_words({"rows": 3, "cols": 4, "crs": "X"}) == "outputs orthorectified through the GLT onto a 3 x 4 grid (X)"


def test_analyse_ortho_writes_its_maps_on_the_grid(tmp_path, capsys):
    """analyse --ortho, as detect's: the labels, the class map and a GMM's posterior on the GLT's grid, with
    its map info (an analysis of an EMIT swath could not be placed on Earth from its outputs)."""
    from hyperapp.analyse.run import posterior_image, run_analysis, write_analysis
    from hyperapp.cli import main
    from hyperapp.core.backend import get_backend
    from hyperapp.io import open_cube
    from hyperapp.request import AnalyseRequest

    cube = _swath_cube()
    res = run_analysis(cube, AnalyseRequest("gmm", params={"k": 2, "max_iter": 5}, device="cpu", select="image"))
    paths = write_analysis(res, tmp_path / "a", cube, ortho=True)
    for name in ("labels", "posterior"):
        got = open_cube(paths[name])
        assert (got.rows, got.cols) == SW_SHAPE and isinstance(got.geo, MapGrid)
        assert got.geo.transform == pytest.approx(SW_GRID.transform)
    lab = open_cube(paths["labels"]).read()[:, :, 0]
    post = open_cube(paths["posterior"]).read()
    want = posterior_image(res.model, cube, get_backend("cpu"))  # on the swath's pixels
    for r, c in PLANTED:
        assert lab[_cell(r, c)] == res.labels[r, c]
        np.testing.assert_allclose(post[_cell(r, c)], want[r, c], rtol=1e-6)
    assert lab[0, 0] == -1 and np.isnan(post[0, 0]).all()  # no swath pixel is seen there
    assert json.loads(paths["report"].read_text())["orthorectified"]["rows"] == SW_SHAPE[0]
    assert "igm" not in paths  # on the grid: map info says where
    swath_paths = write_analysis(res, tmp_path / "s", cube)  # on the swath's pixels: the IGM beside them
    assert open_cube(swath_paths["igm"]).read()[PLANTED[0]] == pytest.approx(_swath_truth(*PLANTED[0]))
    classes = open_cube(paths["classes"])
    assert (classes.rows, classes.cols) == SW_SHAPE and isinstance(classes.geo, MapGrid)
    # a cube without a GLT: refused before the fit, in one line
    assert main(["--headless", "analyse", str(_envi_utm(tmp_path).path), "--method", "kmeans", "--device", "cpu",
                 "--out", str(tmp_path / "q"), "--ortho"]) == 2
    assert "--ortho needs a swath" in capsys.readouterr().err and not (tmp_path / "q").exists()
