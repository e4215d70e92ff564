"""Spectral libraries: ENVI round trip through Spectral Python, CSV and two-column ASCII, resampling to
a cube's bands with units and scale reconciled, and targets from a library in the CLI and job files."""

import json

import numpy as np
import pytest

from hyperapp.core.cube import cube_from_array
from hyperapp.core.errors import HyperappError, InputError
from hyperapp.io.speclib import (
    SpectralLibrary,
    database_entries,
    library_targets,
    match_scale,
    read_library,
    resample_to_cube,
    write_library,
)

from .conftest import ecostress_db, spectrum_curve


def _lib(n=3, m=200):
    wl = np.linspace(0.4, 2.5, m)  # micrometres
    rng = np.random.default_rng(0)
    spectra = np.clip(0.3 + 0.1 * np.sin(wl[None, :] * (np.arange(n)[:, None] + 1)) +
                      0.01 * rng.standard_normal((n, m)), 0, 1)
    return SpectralLibrary([f"mat {i}" for i in range(n)], spectra, wl, "micrometers", np.full(m, 0.011))


def test_envi_library_round_trips_through_spectral_python(tmp_path):
    from spectral.io import envi
    from spectral.io.envi import SpectralLibrary as Spy

    lib = _lib()
    path = write_library(lib, tmp_path / "lib.sli")
    assert path.name == "lib.sli" and (tmp_path / "lib.hdr").is_file()
    assert not list(tmp_path.glob(".speclib-*"))  # the staging folder is gone
    spy = envi.open(str(tmp_path / "lib.hdr"), str(path))
    assert spy.names == lib.names
    np.testing.assert_allclose(spy.spectra, lib.spectra, rtol=1e-6)
    np.testing.assert_allclose(spy.bands.centers, lib.wavelengths)
    np.testing.assert_allclose(spy.bands.bandwidths, lib.fwhm)
    assert spy.bands.band_unit == "micrometers"
    # and one Spectral Python wrote reads back here
    Spy(spy.spectra * 2, {"spectra names": ["a", "b", "c"], "wavelength": list(lib.wavelengths),
                          "wavelength units": "micrometers"}).save(str(tmp_path / "spy"))
    back = read_library(tmp_path / "spy.hdr")
    assert back.names == ["a", "b", "c"]
    np.testing.assert_allclose(back.spectra, lib.spectra * 2, rtol=1e-6)
    np.testing.assert_allclose(back.wavelengths_nm(), lib.wavelengths * 1000)


def test_an_envi_library_whose_data_and_header_disagree_is_refused(tmp_path):
    """Data holding a spectrum more than its header says (dropped without a word), or another data type
    (read into nonsense, exit 0): one line naming the data file, as a truncated one already was."""
    path = write_library(_lib(), tmp_path / "lib.sli")
    good = path.read_bytes()
    row = len(good) // 3  # three spectra
    path.write_bytes(good + good[:row])
    with pytest.raises(HyperappError, match="lib.sli: data file holds .* 1 spectrum more than its header"):
        read_library(tmp_path / "lib.hdr")
    path.write_bytes(good[:-row])
    with pytest.raises(HyperappError, match="lib.sli: data file is truncated"):
        read_library(tmp_path / "lib.hdr")


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import spectral.io.envi as envi

    def boom(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(envi.SpectralLibrary, "save", boom)
    with pytest.raises(HyperappError, match="cannot write"):
        write_library(_lib(), tmp_path / "lib.sli")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["lib.sli", "lib.csv"])
def test_values_beyond_float32_are_not_written(tmp_path, name):
    """A spectrum the reader would refuse (a value beyond float32's range) is refused when saved, in one
    line naming the file and the spectrum, and nothing is written."""
    lib = _lib()
    lib.spectra = lib.spectra.astype(np.float64)
    lib.spectra[1, 7] = 1e300
    with pytest.raises(InputError, match="mat 1") as err:
        write_library(lib, tmp_path / name)
    assert name in str(err.value) and list(tmp_path.iterdir()) == []


def test_csv_and_ascii_libraries(tmp_path):
    (tmp_path / "lib.csv").write_text("Wavelength (um),grass,soil\n0.5,0.05,0.2\n1.0,0.5,0.3\n1.5,0.3,0.35\n")
    lib = read_library(tmp_path / "lib.csv")
    assert lib.names == ["grass", "soil"] and lib.units == "um"
    np.testing.assert_allclose(lib.wavelengths_nm(), [500, 1000, 1500])
    np.testing.assert_allclose(lib.spectra[1], [0.2, 0.3, 0.35])
    # ECOSTRESS style: header lines, micrometres, reflectance in percent
    (tmp_path / "eco.txt").write_text("Name: Red brick\nType: manmade\nX Units: Wavelength (micrometers)\n"
                                      "Y Units: Reflectance (percent)\n\n2.5\t40.0\n0.4\t10.0\n1.0\t30.0\n")
    eco = read_library(tmp_path / "eco.txt")
    assert eco.names == ["Red brick"]
    np.testing.assert_allclose(eco.wavelengths_nm(), [400, 1000, 2500])  # sorted
    np.testing.assert_allclose(eco.spectra[0], [0.1, 0.3, 0.4])
    # USGS splib06 style: a title line, three columns, deleted channels
    (tmp_path / "usgs.asc").write_text("Alunite GDS84 Na03 W1R1Ba AREF\n0.35 0.1 0.01\n0.36 -1.23e34 0\n"
                                       "0.37 0.12 0.01\n")
    usgs = read_library(tmp_path / "usgs.asc")
    assert usgs.names == ["Alunite GDS84 Na03 W1R1Ba AREF"] and usgs.spectra.shape == (1, 2)
    with pytest.raises(HyperappError, match="eco2.txt: no two-column"):
        (tmp_path / "eco2.txt").write_text("title\n0.1\n0.2\n")
        read_library(tmp_path / "eco2.txt")


def _cube(bands=40, lo=450.0, hi=2400.0, level=3000.0, fwhm=True):
    rng = np.random.default_rng(1)
    data = (level * (0.5 + 0.1 * rng.random((16, 16, bands)))).astype(np.float32)
    wl = np.linspace(lo, hi, bands)
    return cube_from_array(data, "c", wavelengths=wl, wavelength_units="Nanometers",
                           fwhm=np.full(bands, (hi - lo) / bands) if fwhm else None)


def test_resampling_uses_band_resampler_in_nanometres():
    from spectral import BandResampler

    lib, cube = _lib(), _cube()
    out, how = resample_to_cube(lib, cube)
    ref = BandResampler(list(lib.wavelengths * 1000), list(cube.wavelengths), list(lib.fwhm * 1000),
                        list(cube.fwhm))
    np.testing.assert_allclose(out[1], ref(lib.spectra[1]))
    assert "FWHM" in how


def test_a_library_on_the_cubes_own_band_centres_is_taken_as_it_is():
    """Spectra saved from this cube (its own wavelengths) come back unchanged, not smoothed by a resampling
    of identical centres; the report says so."""
    cube = _cube()
    spectra = np.random.default_rng(1).uniform(0.1, 0.5, (2, cube.bands))
    lib = SpectralLibrary(["a", "b"], spectra, np.asarray(cube.wavelengths, float), "nanometers",
                          np.asarray(cube.fwhm, float))
    out, how = resample_to_cube(lib, cube)
    np.testing.assert_array_equal(out, spectra)
    assert "own" in how and "band for band" in how


def test_scale_reconciled_to_the_cube():
    lib, cube = _lib(), _cube(level=3000.0)  # reflectance 0-1 library, cube scaled 0-10000
    t = library_targets(lib, cube, "mat 2")
    assert t.names == ["mat 2"]
    ref, _ = resample_to_cube(lib.select(["mat 2"]), cube)
    np.testing.assert_allclose(t.spectra, ref * 1e4)
    assert any("10000" in n for n in t.notes)
    same, f = match_scale(np.array([[2000.0, 3000.0]]), 2500.0)
    assert f == 1.0
    pct, f = match_scale(np.array([[0.2, 0.3]]), 30.0)  # a percent cube
    assert f == 100.0


def test_clear_errors():
    lib = _lib()
    with pytest.raises(InputError, match="do not overlap"):
        resample_to_cube(lib, _cube(lo=3000.0, hi=5000.0))
    with pytest.raises(InputError, match=r"does not cover \d+ of the cube's 36 bands"):
        resample_to_cube(lib, _cube(bands=36, lo=2000.0, hi=2700.0, fwhm=False))  # the library ends at 2500
    nowl = cube_from_array(np.ones((4, 4, 12), np.float32), "nowl")
    with pytest.raises(InputError, match="no wavelengths"):
        resample_to_cube(lib, nowl)
    with pytest.raises(InputError, match="no spectrum named 'clay'"):
        lib.select("mat 0,clay")
    assert lib.select("MAT 1").names == ["mat 1"]  # case ignored when no exact match
    # a spectrum below 0 at most wavelengths (an offset, another column) means nothing to any detector
    from hyperapp.io.speclib import refuse_unusable

    with pytest.raises(InputError, match=r"lib.csv: spectrum 'mat 1' is below 0 at most of its wavelengths"):
        refuse_unusable(["mat 0", "mat 1"], np.array([[0.2, 0.3, -0.01], [-0.3, -0.2, 0.1]]), "lib.csv")
    refuse_unusable(["dark"], np.array([[0.01, -0.005, 0.02]]), "lib.csv")  # a little below 0 in a band: kept



def test_a_csv_librarys_first_column_is_its_wavelengths_or_band_numbers(tmp_path):
    """A CSV without a wavelength column took its first spectrum for wavelengths ("wavelength 0.31 repeats",
    or "no spectrum named 'target'"), and a band column for nanometres (1-205 nm): said; band numbers make
    a library band for band, as one saved from a cube without wavelengths."""
    (tmp_path / "nowl.csv").write_text("target,grass\n0.11,0.09\n0.12,0.10\n0.13,0.08\n")
    with pytest.raises(HyperappError, match="nowl.csv: the first column must hold the wavelengths .* got 'target'"):
        read_library(tmp_path / "nowl.csv")
    (tmp_path / "band.csv").write_text("band,target\n" + "".join(f"{i},{0.1 + i / 100}\n" for i in range(1, 13)))
    lib = read_library(tmp_path / "band.csv")
    assert lib.wavelengths is None and lib.names == ["target"]
    nowl = cube_from_array(np.random.default_rng(0).random((4, 4, 12)).astype(np.float32), "nowl")
    assert "band for band" in resample_to_cube(lib, nowl)[1]
    with pytest.raises(InputError, match="the library has no wavelengths and 12 samples, the cube 36 bands"):
        resample_to_cube(lib, _cube(bands=36))
    # without a header row, a spectrum first was read as wavelengths (in micrometres, "resampled"): its
    # values go up and down, as no wavelengths do
    vals = np.random.default_rng(1).uniform(0.1, 0.6, (40, 2))
    (tmp_path / "nohead.csv").write_text("".join(f"{a:.4f},{b:.4f}\n" for a, b in vals))
    with pytest.raises(HyperappError, match="nohead.csv: the first column does not read as wavelengths .* steps back"):
        read_library(tmp_path / "nohead.csv")


def test_band_for_band_library_from_a_cube_without_wavelengths(tmp_path):
    data = np.random.default_rng(0).random((8, 8, 12)).astype(np.float32) * 1000
    cube = cube_from_array(data, "nowl")
    write_library(SpectralLibrary(["px"], data[2, 3][None]), tmp_path / "px.sli")
    out, how = resample_to_cube(read_library(tmp_path / "px.sli"), cube)
    np.testing.assert_allclose(out[0], data[2, 3], rtol=1e-6)
    assert "band for band" in how


def _run(capsys, *args):
    from hyperapp.cli import main

    rc = main(["--headless", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.err


def test_cli_detect_with_library_targets(land_hdr, tmp_path, capsys):
    from hyperapp.io import open_cube, read_mask

    cube = open_cube(land_hdr).good_bands()
    truth = read_mask(land_hdr.parent / "land_truth.hdr", (cube.rows, cube.cols)) > 0
    X = cube.to_float32()
    lib = SpectralLibrary(["target", "background"], np.stack([X[truth].mean(0), X[~truth].mean(0)]),
                          np.asarray(cube.wavelengths) / 1000.0, "micrometers")
    write_library(lib, tmp_path / "lib.sli")
    rc, err = _run(capsys, "detect", land_hdr, "--method", "osp", "--target-spectra", tmp_path / "lib.sli",
                   "--spectra", "target", "--undesired-spectra", tmp_path / "lib.sli", "--undesired-names", "background",
             "--truth", land_hdr.parent / "land_truth.hdr", "--device", "cpu", "--out", tmp_path / "out")
    assert rc == 0, err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["signatures"]["target_names"] == ["target"]
    assert rep["signatures"]["undesired_names"] == ["background"] and rep["signatures"]["undesired_source"] == "given"
    assert rep["evaluation"]["auc"] > 0.9
    assert rep["n_target_pixels"] == 0
    # bad inputs: one line, exit 2
    for extra, msg in ((["--spectra", "clay"], "no spectrum named 'clay'"),
                       (["--undesired-spectra", tmp_path / "lib.sli"], "does not use undesired")):
        rc, err = _run(capsys, "detect", land_hdr, "--method", "ace", "--target-spectra", tmp_path / "lib.sli",
                       *extra, "--device", "cpu", "--out", tmp_path / "bad")
        assert rc == 2 and msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_job_step_with_target_spectra(land_hdr, tmp_path):
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.runner import run_job
    from hyperapp.io import open_cube

    cube = open_cube(land_hdr).good_bands()
    t = cube.read()[10, 10]
    write_library(SpectralLibrary(["px"], t[None], np.asarray(cube.wavelengths), "nm"), tmp_path / "lib.sli")
    (tmp_path / "job.toml").write_text(f'[inputs]\npaths = ["{land_hdr}"]\n[[steps]]\ndetect = "mtmf"\n'
                                       'target_spectra = "lib.sli"\n[output]\nfolder = "out"\n')
    job = load_job(tmp_path / "job.toml")
    assert job.steps[0].request.target_spectra == str(tmp_path / "lib.sli")
    assert run_job(job, device="cpu") == 0
    step = next((tmp_path / "out").rglob("detect-mtmf"))
    assert (step / "infeasibility.hdr").is_file()
    assert json.loads((step / "report.json").read_text())["signatures"]["targets"] == "library"
    (tmp_path / "bad.toml").write_text(f'[inputs]\npaths = ["{land_hdr}"]\n[[steps]]\ndetect = "ace"\n'
                                       'spectra = "px"\n[output]\nfolder = "out"\n')
    with pytest.raises(InputError, match="give target_spectra too"):
        load_job(tmp_path / "bad.toml")
    # a library on no input's wavelengths stops the job before any work (every cube failed on it, exit 1)
    far = SpectralLibrary(["px"], t[None], np.asarray(cube.wavelengths) + 5000.0, "nm")
    write_library(far, tmp_path / "far.sli")
    (tmp_path / "far.toml").write_text(f'[inputs]\npaths = ["{land_hdr}"]\n[[steps]]\ndetect = "sam"\n'
                                       'target_spectra = "far.sli"\n[output]\nfolder = "out-far"\n')
    with pytest.raises(InputError, match=r"steps\[0\]\.target_spectra\] fits no input: .*do not overlap"):
        load_job(tmp_path / "far.toml")
    assert not (tmp_path / "out-far").exists()


# ------------------------------------------------------------------ Spectral Python databases
def _usgs_db(tmp_path):
    """A USGS database built by ``spectral.USGSDatabase.create`` from an splib07a-style ASCII tree: two
    wavelength files (ASD in micrometres, Beckman in nanometres) beside a chapter of one-column samples,
    one with deleted channels, one deleted throughout."""
    from spectral import USGSDatabase

    lib = tmp_path / "usgs" / "ASCIIdata_splib07a"
    chapter = lib / "ChapterM_Minerals"
    chapter.mkdir(parents=True)
    asd = np.round(np.arange(0.35, 2.5 + 1e-9, 0.01), 4)
    beck = np.arange(200.0, 3000.0 + 1e-9, 10.0)

    def column(path, header, values):
        path.write_text(header + "\n" + "".join(f"{v:.7g}\n" for v in values))

    column(lib / "splib07a_Wavelengths_ASD_0.35-2.5_microns_216_ch.txt",
           "splib07a Record=1: ASD Wavelengths in microns 0.35 to 2.5 (216 channels)", asd)
    column(lib / "splib07a_Wavelengths_BECK_Beckman_0.2-3.0_nm.txt",
           "splib07a Record=2: BECK Beckman Wavelengths in nm 200-3000 (281 channels)", beck)
    alunite = spectrum_curve(asd, 0)
    alunite[[5, 6]] = -1.23e34
    column(chapter / "splib07a_Alunite_GDS82_Na82_ASDFRa_AREF.txt",
           "splib07a Record=100: Alunite GDS82 Na82 ASDFRa AREF", alunite)
    column(chapter / "splib07a_Kaolinite_CM9_BECKb_AREF.txt", "splib07a Record=200: Kaolinite CM9 BECKb AREF",
           spectrum_curve(beck / 1000, 1))
    column(chapter / "splib07a_Lost_X1_ASDFRc_AREF.txt", "splib07a Record=300: Lost X1 ASDFRc AREF",
           np.full(asd.size, -1.23e34))
    USGSDatabase.create(str(tmp_path / "usgs.db"), str(tmp_path / "usgs")).db.close()
    return tmp_path / "usgs.db", asd, beck


def test_ecostress_database_read_by_name_on_each_spectrums_own_samples(tmp_path, land_hdr):
    from spectral import BandResampler

    from hyperapp.io import open_cube

    db = ecostress_db(tmp_path)
    lib = read_library(db, "Avena fatua,Quartz SiO2 #2")
    assert lib.names == ["Avena fatua", "Quartz SiO2 #2"] and lib.units == "nm"
    assert "percent" in lib.scale_note
    for row, step, k in ((lib.spectra[0], 4.0, 2), (lib.spectra[1], 10.0, 1)):
        wl = lib.wavelengths[np.isfinite(row)]
        assert wl.size == round((2600 - 350) / step) + 1  # its own samples, none made up
        np.testing.assert_allclose(row[np.isfinite(row)], spectrum_curve(wl / 1000, k), atol=1e-5)
    # by ID, and ignoring case; the two grids are resampled one spectrum at a time
    assert read_library(db, ["#1", "avena FATUA"]).names == ["Quartz SiO2 #1", "Avena fatua"]
    cube = open_cube(land_hdr)
    out, _ = resample_to_cube(lib, cube)
    x = np.round(np.arange(0.35, 2.6 + 1e-9, 0.004), 4)
    ref = BandResampler(list(x * 1000), list(cube.wavelengths), None, list(cube.fwhm))(spectrum_curve(x, 2))
    np.testing.assert_allclose(out[0], ref, rtol=1e-4)
    assert np.isfinite(out).all()


def test_usgs_database_units_and_deleted_channels(tmp_path):
    db, asd, beck = _usgs_db(tmp_path)
    lib = read_library(db, ["Kaolinite CM9 BECKb AREF", "Alunite GDS82 Na82 ASDFRa AREF"])
    kao, alu = lib.spectra
    np.testing.assert_allclose(lib.wavelengths[np.isfinite(kao)], beck, rtol=1e-6)  # already nm
    np.testing.assert_allclose(lib.wavelengths[np.isfinite(alu)], np.delete(asd, [5, 6]) * 1000, rtol=1e-6)
    np.testing.assert_allclose(alu[np.isfinite(alu)], spectrum_curve(np.delete(asd, [5, 6]), 0), atol=1e-6)
    assert lib.scale_note == ""  # USGS values are reflectance 0-1


def test_database_entries_list_every_spectrum_by_the_name_the_reader_takes(tmp_path):
    eco = database_entries(ecostress_db(tmp_path))
    assert [n for n, _ in eco] == ["Quartz SiO2 #1", "Quartz SiO2 #2", "Avena fatua"]
    assert eco[2][1] == "Avena fatua (mineral, silicate): 0.352-2.6 µm, 563 samples"
    assert read_library(tmp_path / "eco.db", [eco[1][0], eco[2][0]]).names == ["Quartz SiO2 #2", "Avena fatua"]
    usgs = dict(database_entries(_usgs_db(tmp_path)[0]))
    assert usgs["Kaolinite CM9 BECKb AREF"].endswith(": 200-3000 nm, 281 samples")
    assert "0.35-2.5 µm, 216 samples" in usgs["Alunite GDS82 Na82 ASDFRa AREF"]
    (tmp_path / "lib.csv").write_text("wavelength,a\n400,1\n")
    with pytest.raises(HyperappError, match=r"lib\.csv: not an SQLite file"):
        database_entries(tmp_path / "lib.csv")
    with pytest.raises(HyperappError, match=r"nothing\.db: spectral database not found"):
        database_entries(tmp_path / "nothing.db")


def test_database_refusals_name_the_file(tmp_path):
    import sqlite3

    db = ecostress_db(tmp_path)
    usgs, _, _ = _usgs_db(tmp_path)
    cases = (
        (db, None, r"eco\.db: the ECOSTRESS/ASTER spectral database holds 3 spectra: pick some with --spectra "
                   r".*'Quartz SiO2 #1'"),
        (db, "Quartz SiO2", r"eco\.db: 2 spectra in the database are named 'Quartz SiO2': pick one as "
                            r"'Quartz SiO2 #1', 'Quartz SiO2 #2'"),
        (db, "Avena fatu", r"no spectrum named 'Avena fatu' in the database \(did you mean 'Avena fatua'\?"),
        (db, "#9", r"no spectrum #9 in the database"),
        (usgs, "kaolinite", r"usgs\.db: no spectrum named 'kaolinite' .*did you mean 'Kaolinite CM9 BECKb AREF'\?"),
        (usgs, "Lost X1 ASDFRc AREF", r"usgs\.db: spectrum 'Lost X1 ASDFRc AREF' in the database is empty"),
    )
    for path, names, msg in cases:
        with pytest.raises(InputError, match=msg) as e:
            read_library(path, names)
        assert "\n" not in str(e.value)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE Things (a INTEGER)")
    con.close()
    with pytest.raises(HyperappError, match=r"other\.sqlite: an SQLite file, but not a spectral database built by "
                                            r"Spectral Python .*its tables are Things"):
        read_library(other, "a")
    (tmp_path / "broken.db").write_bytes(b"SQLite format 3\x00" + b"not a database" * 64)
    with pytest.raises(HyperappError, match=r"broken\.db: cannot read the SQLite database"):
        read_library(tmp_path / "broken.db", "a")


def test_cli_detect_with_database_targets(tmp_path, land_hdr, capsys):
    db = ecostress_db(tmp_path)
    rc, err = _run(capsys, "detect", land_hdr, "--method", "ace", "--target-spectra", db,
                   "--spectra", "Avena fatua,Quartz SiO2 #1", "--device", "cpu", "--out", tmp_path / "out")
    assert rc == 0, err
    sig = json.loads((tmp_path / "out" / "report.json").read_text())["signatures"]
    assert sig["target_names"] == ["Avena fatua", "Quartz SiO2 #1"]
    for extra, msg in (([], "holds 3 spectra: pick some with --spectra"),
                       (["--spectra", "Avena"], "did you mean 'Avena fatua'?")):
        rc, err = _run(capsys, "detect", land_hdr, "--method", "ace", "--target-spectra", db, *extra,
                       "--device", "cpu", "--out", tmp_path / "bad")
        assert rc == 2 and msg in err and str(db) in err and len(err.strip().splitlines()) == 1, err
    # a job step reads the names it picks from the database before any cube
    from hyperapp.batch.jobfile import load_job

    step = f'[inputs]\npaths = ["{land_hdr}"]\n[[steps]]\ndetect = "ace"\ntarget_spectra = "{db}"\n'
    (tmp_path / "job.toml").write_text(step + 'spectra = "avena fatua"\n[output]\nfolder = "out"\n')
    assert load_job(tmp_path / "job.toml").steps[0].request.spectra == "avena fatua"
    (tmp_path / "bad.toml").write_text(step + '[output]\nfolder = "out"\n')
    with pytest.raises(InputError, match="holds 3 spectra: pick some"):
        load_job(tmp_path / "bad.toml")


def test_decreasing_wavelengths_are_reversed_and_repeated_names_labelled(tmp_path):
    """Decreasing wavelengths (ECOSTRESS) read in increasing order; names a library repeats become
    'NAME #N' (N the spectrum's place, as a database's shared names take its id) and '#N' picks one."""
    rows = "".join(f"{w},{w / 1e4},{1 - w / 1e4},0.5\n" for w in (2500, 1500, 900, 400))
    (tmp_path / "lib.csv").write_text("wavelength (nm),a,b,a\n" + rows)
    lib = read_library(tmp_path / "lib.csv")
    np.testing.assert_array_equal(lib.wavelengths, [400, 900, 1500, 2500])
    np.testing.assert_allclose(lib.spectra[0], [0.04, 0.09, 0.15, 0.25])
    assert lib.names == ["a #1", "b", "a #3"]
    assert read_library(tmp_path / "lib.csv", "#3,b").names == ["a #3", "b"]
    assert read_library(tmp_path / "lib.csv", "A #1").names == ["a #1"]
    with pytest.raises(InputError, match=r"2 spectra in the library are named 'a': pick one as 'a #1', 'a #3'"):
        read_library(tmp_path / "lib.csv", "a")
    with pytest.raises(InputError, match=r"no spectrum #4 in the library"):
        read_library(tmp_path / "lib.csv", "#4")
    # back and forth (a cube's overlapping spectrometers): sorted; a spectrum of zeros blocks only itself
    (tmp_path / "aviris.csv").write_text("wavelength,a,zero\n400,0.1,0\n1270,0.2,0\n1250,0.3,0\n2500,0.4,0\n")
    lib = read_library(tmp_path / "aviris.csv", "a")
    np.testing.assert_array_equal(lib.wavelengths, [400, 1250, 1270, 2500])
    np.testing.assert_array_equal(lib.spectra[0], [0.1, 0.3, 0.2, 0.4])
    with pytest.raises(InputError, match="spectrum 'zero' is zero at every wavelength"):
        read_library(tmp_path / "aviris.csv")


@pytest.mark.parametrize("spectra, words", [
    (np.full((1, 200), np.inf), "spectrum 'mat 0' has a value that is not finite in float32 (inf at wavelength 0.4 "
                                "micrometers)"),
    (np.zeros((1, 200)), "spectrum 'mat 0' is zero at every wavelength"),
])
def test_an_envi_library_is_checked_as_it_is_read(tmp_path, spectra, words):
    """An ENVI library (as Spectral Python writes one) with infinite values, or a spectrum of zeros:
    refused on reading, naming the file and the spectrum (values beyond float32 in a CSV: test_bad_input)."""
    from spectral.io.envi import SpectralLibrary as Spy

    lib = _lib(1)
    Spy(spectra, {"spectra names": lib.names, "wavelength": list(lib.wavelengths),
                  "wavelength units": "micrometers"}).save(str(tmp_path / "lib"))
    with pytest.raises(InputError) as e:
        read_library(tmp_path / "lib.sli")
    assert str(e.value) == f"{tmp_path / 'lib.sli'}: {words}"


def test_spectral_python_info_is_dropped_only_inside_the_quiet_block(caplog):
    """quiet_spectral drops Spectral Python's INFO lines (one per uncovered band) in its thread; its
    warnings pass, and so does INFO outside the block."""
    import logging

    from hyperapp.io.speclib import quiet_spectral

    log = logging.getLogger("spectral")
    with caplog.at_level(logging.INFO, logger="spectral"):
        with quiet_spectral():
            log.info("No overlap for target band 1")
            log.warning("a real problem")
        log.info("after")
    assert [r.getMessage() for r in caplog.records] == ["a real problem", "after"]


def test_a_library_or_class_map_saved_onto_a_folder_is_refused_and_writes_nothing(tmp_path):
    """A folder's name, or a path under a file, is one message; nothing appears beside the folder."""
    from hyperapp.analyse.run import run_analysis, write_class_map
    from hyperapp.core.errors import OutputError
    from hyperapp.request import AnalyseRequest

    (tmp_path / "folder").mkdir()
    (tmp_path / "a-file").write_text("")
    before = sorted(p.name for p in tmp_path.iterdir())
    for path, words in ((tmp_path / "folder", "is a folder"), (tmp_path / "a-file" / "lib.sli", "is a file")):
        with pytest.raises(OutputError, match=words):
            write_library(_lib(), path)
    X = np.random.default_rng(0).random((12, 10, 4)).astype(np.float32)
    cube = cube_from_array(X)
    res = run_analysis(cube, AnalyseRequest("kmeans", params={"k": 2}, select="image", device="cpu"))
    with pytest.raises(OutputError, match="is a folder"):
        write_class_map(res, tmp_path / "folder", cube)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_missing_samples_inside_a_spectrum_are_called_missing_not_a_narrow_library():
    lib = _lib()
    lib.spectra[1, 80:120] = np.nan  # about 1.24-1.66 um missing inside the 0.4-2.5 um range
    with pytest.raises(InputError, match=r"spectrum 'mat 1' has missing values \(NaN\) at"):
        resample_to_cube(lib, _cube())
