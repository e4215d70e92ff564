"""hyperapp.core.geo: map grids, swaths, ENVI map info, lon/lat at pixel centres, windows."""

import numpy as np
import pytest
from pyproj import Transformer

from hyperapp.core.cube import cube_from_array
from hyperapp.core.geo import (
    MapGrid,
    Swath,
    describe,
    geo_from_map_info,
    lonlat,
    map_info_from_grid,
    pixel_of,
)
from hyperapp.io import open_cube, write_envi


def test_utm_map_info_places_pixel_centres():
    g = geo_from_map_info(["UTM", "1", "1", "500000", "4000000", "30", "30", "11", "North", "WGS-84",
                           "units=Meters"])
    assert g.crs == "EPSG:32611" and g.transform == (500000.0, 30.0, 0.0, 4000000.0, 0.0, -30.0)
    lon, lat = lonlat(g, 10, 20)
    want = Transformer.from_crs("EPSG:32611", "EPSG:4326", always_xy=True).transform(500000 + 20.5 * 30,
                                                                                     4000000 - 10.5 * 30)
    assert lon == pytest.approx(want[0], abs=1e-9) and lat == pytest.approx(want[1], abs=1e-9)
    r, c = pixel_of(g, lon, lat)
    assert r == pytest.approx(10, abs=1e-6) and c == pytest.approx(20, abs=1e-6)


def test_map_info_reference_pixel_south_and_geographic():
    # tie point at pixel (1.5, 1.5): the first pixel's centre
    g = geo_from_map_info(["UTM", "1.5", "1.5", "300015", "7000015", "30", "30", "33", "South", "WGS-84"])
    assert g.crs == "EPSG:32733" and g.transform[0] == 300000 and g.transform[3] == 7000030
    g = geo_from_map_info(["Geographic Lat/Lon", "1", "1", "10.0", "50.0", "0.001", "0.001", "WGS-84"])
    lon, lat = lonlat(g, 0, 0)
    assert lon == pytest.approx(10.0005) and lat == pytest.approx(49.9995)
    assert geo_from_map_info(["Arbitrary", "1", "1", "0", "0", "1", "1"]) is None
    assert geo_from_map_info(None) is None and geo_from_map_info(["UTM", "1"]) is None


def test_coordinate_system_string_wins_and_rotation():
    wkt = 'PROJCS["x",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],PARAMETER["latitude_of_origin",0],PARAMETER["central_meridian",-117],PARAMETER["scale_factor",0.9996],PARAMETER["false_easting",500000],PARAMETER["false_northing",0],UNIT["metre",1]]'  # noqa: E501
    g = geo_from_map_info(["UTM", "1", "1", "500000", "4000000", "30", "30", "11", "North", "WGS-84"], wkt)
    assert g.crs == wkt
    utm = geo_from_map_info(["UTM", "1", "1", "500000", "4000000", "30", "30", "11", "North", "WGS-84"])
    np.testing.assert_allclose(lonlat(g, 5, 7), lonlat(utm, 5, 7), atol=1e-9)
    rot = geo_from_map_info(["UTM", "1", "1", "500000", "4000000", "30", "30", "11", "North", "WGS-84",
                             "rotation=90"])
    x, y = rot.xy(0, 1)  # a quarter turn: the next column lies along the map's y axis
    assert abs(x - rot.xy(0, 0)[0]) < 1e-6 and abs(abs(y - rot.xy(0, 0)[1]) - 30) < 1e-6


def test_map_info_round_trip():
    g = MapGrid((500000.0, 30.0, 0.0, 4000000.0, 0.0, -30.0), "EPSG:32611")
    assert geo_from_map_info(map_info_from_grid(g)) == g
    g = MapGrid((10.0, 0.001, 0.0, 50.0, 0.0, -0.001), "EPSG:4326")
    assert geo_from_map_info(map_info_from_grid(g)) == g


def test_windows_keep_places():
    g = MapGrid((500000.0, 30.0, 0.0, 4000000.0, 0.0, -30.0), "EPSG:32611")
    cube = cube_from_array(np.zeros((40, 50, 3), np.float32), geo=g)
    w = cube.subset(slice(10, 30, 3), slice(5, None, 2))
    np.testing.assert_allclose(lonlat(w.geo, [0, 2], [0, 4]), lonlat(g, [10, 16], [5, 13]), atol=1e-12)
    w2 = w.subset(slice(1, None), slice(2, 6))
    np.testing.assert_allclose(lonlat(w2.geo, 0, 0), lonlat(g, 13, 9), atol=1e-12)
    assert w.subset_bands([0, 2]).geo == w.geo  # bands leave the place alone

    lat, lon = np.mgrid[0:40, 0:50].astype(float)
    s = Swath(40 + 0.001 * lat, 10 + 0.002 * lon)
    cube = cube_from_array(np.zeros((40, 50, 3), np.float32), geo=s)
    w = cube.subset(slice(10, 30, 3), slice(5, None, 2)).subset(slice(1, None), slice(2, 6))
    lo, la = lonlat(w.geo, 0, 0)
    assert lo == pytest.approx(10 + 0.002 * 9) and la == pytest.approx(40 + 0.001 * 13)
    assert w.geo.shape == (6, 4)
    # bilinear between pixel centres, nearest on request
    lo, la = lonlat(s, 2.5, 3.25)
    assert lo == pytest.approx(10 + 0.002 * 3.25) and la == pytest.approx(40 + 0.001 * 2.5)
    lo, la = lonlat(s, 2.4, 3.6, nearest=True)
    assert lo == pytest.approx(10 + 0.002 * 4) and la == pytest.approx(40 + 0.001 * 2)


def test_describe_lines():
    g = MapGrid((500000.0, 30.0, 0.0, 4000000.0, 0.0, -30.0), "EPSG:32611")
    line = describe(g, 10, 20)
    assert "UTM zone 11N (EPSG:32611)" in line and "30 x 30 m pixels" in line and line.count("(") >= 5
    s = Swath(np.full((3, 4), 41.0), np.full((3, 4), 12.0))
    assert "swath" in describe(s) and "(12.00000, 41.00000)" in describe(s)
    assert describe(None).startswith("none")


def test_envi_cube_gets_its_map_info_as_geo(tmp_path):
    mi = ["UTM", "1", "1", "500000", "4000000", "30", "30", "11", "North", "WGS-84", "units=Meters"]
    cube = cube_from_array(np.ones((6, 7, 3), np.float32), map_info=mi)
    write_envi(tmp_path / "c.hdr", cube.read(), cube)
    back = open_cube(tmp_path / "c.hdr")
    assert back.map_info == mi and back.geo == geo_from_map_info(mi)
