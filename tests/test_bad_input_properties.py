"""Property-based tests of the bad-input contract: random job files, header fields, option
strings and label arrays at the edges end in success or one clean refusal (exit 2, an InputError and
its kin), never an internal error, and never a file outside the output folder."""

import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hyperapp.cli import main  # noqa: E402
from hyperapp.core.errors import HyperappError  # noqa: E402

pytest.importorskip("distributed")

FAST = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))

#: values of every kind a TOML or JSON value can be, good and bad
ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.sampled_from([0, 1, 2, -1, 3, 8, 20000]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.5, 1e-3, 0.999, 1.0, -0.0]),
    st.text(max_size=12), st.sampled_from(["", "2..8", "8", "banana", "..", "../x", "a/b", "sqrt", "1-3", "3,1"]),
    st.lists(st.integers(-3, 40), max_size=4),
)


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _toml(v) -> str | None:
    import tomli_w

    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return tomli_w.dumps({"v": v}).partition(" = ")[2].strip()  # one value, as a job file holds it


def _write_scene(folder: Path, name="s1", rows=12, cols=12, bands=6, seed=0) -> Path:
    import spectral.io.envi as envi

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.1, 0.5, (rows, cols, bands)).astype(np.float32)
    X[2:4, 2:4] += 0.4
    hdr = folder / f"{name}.hdr"
    envi.save_image(str(hdr), X, dtype=np.float32, force=True, ext=".img",
                    metadata={"wavelength": [str(400 + 20 * i) for i in range(bands)]})
    return hdr


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("prop")
    _write_scene(root / "scenes", "s1")
    _write_scene(root / "scenes", "s2", seed=1)
    (root / "clicks.csv").write_text("row,col\n2,2\n3,3\n")
    (root / "afolder").mkdir()
    return root


STEP_KEYS = ["params", "far", "threshold", "sample", "seed", "select", "roi", "roi_class", "bands", "all_bands",
             "name", "targets", "model", "background"]
PARAM_NAMES = ["k", "n_init", "max_iter", "tol", "seed", "covariance", "linkage", "n_clusters", "rows", "epochs",
               "n_hidden", "whiten", "inner", "outer", "max_features", "n_trees", "bogus"]


@st.composite
def job_steps(draw):
    kind = draw(st.sampled_from(["detect", "analyse"]))
    method = draw(st.sampled_from(["sam", "rx", "ace", "lrx", "bogus"] if kind == "detect"
                                  else ["kmeans", "gmm", "hac", "som", "band-clusters", "forest", "bogus"]))
    lines = [f"{kind} = {_toml(method)}"]
    for key in draw(st.lists(st.sampled_from(STEP_KEYS), max_size=4, unique=True)):
        if key == "params":
            names = draw(st.lists(st.sampled_from(PARAM_NAMES), max_size=3, unique=True))
            vals = {n: draw(ANY_VALUE) for n in names}
            vals = {n: v for n, v in vals.items() if v is not None}
            value = "{ " + ", ".join(f"{n} = {_toml(v)}" for n, v in vals.items()) + " }"
        elif key in ("targets", "roi", "model", "background"):
            value = _toml(draw(st.sampled_from(["clicks.csv", "afolder", "missing.csv", "scenes/s1.hdr", ""])))
        else:
            value = _toml(draw(ANY_VALUE))
        if value is not None:
            lines.append(f"{key} = {value}")
    return "\n".join(lines)


@given(steps=st.lists(job_steps(), min_size=1, max_size=2),
       paths=st.sampled_from(['["scenes/*.hdr"]', '["scenes/s1.hdr"]', '["afolder"]', '[]', '"scenes/s2.hdr"',
                              '["scenes/*.img"]', '["nothing/*.hdr"]', "3"]),
       folder=st.sampled_from(['"out"', '""', '"."', '"../out-up"', "5"]))
@FAST
def test_random_job_files_end_clean(base, capsys, steps, paths, folder):
    body = f"[inputs]\npaths = {paths}\n" + "".join(f"[[steps]]\n{s}\n" for s in steps) + \
        f"[output]\nfolder = {folder}\n"
    with tempfile.TemporaryDirectory(dir=base) as d:
        work = Path(d)
        for name in ("scenes", "clicks.csv", "afolder"):
            (work / name).symlink_to(base / name)
        job = work / "job.toml"
        job.write_text(body)
        before = _tree(work)
        try:
            rc = main(["--headless", "run", str(job), "--device", "cpu"])
        except BaseException as exc:  # pragma: no cover - the contract's breach, shown with the job
            raise AssertionError(f"{exc!r} on\n{body}") from exc
        err = capsys.readouterr().err
        assert "internal error" not in err and "Traceback" not in err, body + err
        assert rc in (0, 1, 2), body + err
        if rc == 2:
            assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, body + err
        new = _tree(work) - before
        from hyperapp.batch.jobfile import load_job

        if new:  # only a valid job writes, and only under its output folder
            out = Path(load_job(job).output).resolve()
            for n in new:
                p = (work / n).resolve()
                assert p == out or out in p.parents, (n, body)
        assert not (base.parent / "out-up").exists() or rc != 2


#: ENVI header fields with values from plausible to hostile
HEADER_FIELDS = {
    "byte order": st.sampled_from(["0", "1", "7", "-1", "banana", "0.5", ""]),
    "data type": st.sampled_from(["4", "2", "12", "99", "x", "4.0"]),
    "header offset": st.sampled_from(["0", "-4", "1e9", "zz", "3.5"]),
    "lines": st.sampled_from(["12", "0", "-1", "13", "1e12", "twelve", "2.5"]),
    "samples": st.sampled_from(["12", "0", "11", "abc"]),
    "bands": st.sampled_from(["6", "0", "5", "7", "x"]),
    "interleave": st.sampled_from(["bsq", "bil", "bip", "xyz", ""]),
    "data ignore value": st.sampled_from(["-9999", "nan", "banana", "", "1e400", "0"]),
    "reflectance scale factor": st.sampled_from(["10000", "0", "-1", "banana", "inf"]),
    "wavelength": st.sampled_from(["{400, 420, 440, 460, 480, 500}", "{400, 410}", "{a, b, c, d, e, f}", "500"]),
    "fwhm": st.sampled_from(["{10, 10, 10, 10, 10, 10}", "{10}", "{x, 1, 1, 1, 1, 1}"]),
    "bbl": st.sampled_from(["{1, 1, 1, 1, 1, 1}", "{0, 0, 0, 0, 0, 0}", "{1, 0, 1, 0, 1, 1}", "{1, 1}",
                            "{1, x, 1, 1, 1, 1}"]),
    "default bands": st.sampled_from(["{1, 2, 3}", "{99, 1, 2}", "{a, b, c}", "{1}"]),
}


@given(fields=st.dictionaries(st.sampled_from(sorted(HEADER_FIELDS)), st.just(None), min_size=1, max_size=4),
       data=st.data())
@FAST
def test_random_header_fields_end_clean(base, capsys, fields, data):
    values = {k: data.draw(HEADER_FIELDS[k], label=k) for k in fields}
    with tempfile.TemporaryDirectory(dir=base) as d:
        work = Path(d)
        hdr = _write_scene(work, "c")
        lines = [ln for ln in hdr.read_text().splitlines() if ln.split("=")[0].strip().lower() not in values]
        hdr.write_text("\n".join(lines + [f"{k} = {v}" for k, v in values.items()]) + "\n")
        rc = main(["--headless", "info", str(hdr)])
        err = capsys.readouterr().err
        assert rc in (0, 2) and "internal error" not in err, (values, err)
        if rc == 0:  # what opens also reads and runs
            from hyperapp.io import open_cube

            cube = open_cube(hdr)
            assert cube.read().shape == cube.shape
            rc = main(["--headless", "detect", str(hdr), "--method", "rx", "--out", str(work / "o"), "--all-bands"])
            err = capsys.readouterr().err
            assert rc in (0, 2) and "internal error" not in err, (values, err)
        else:
            assert ("c.hdr" in err or "c.img" in err) and len(err.strip().splitlines()) == 1, (values, err)


@given(method=st.sampled_from(["kmeans", "gmm", "hac", "som", "forest", "cart", "band-subsets", "band-clusters",
                               "sam", "rx", "lrx", "rbfn", "ffbp", "ace"]),
       params=st.dictionaries(st.sampled_from(PARAM_NAMES + ["criterion", "init", "training", "metric", "height",
                                                            "n_bins", "test_fraction", "min_fill", "coherence"]),
                              st.one_of(ANY_VALUE, st.text(max_size=6)), max_size=4))
@settings(max_examples=200, deadline=None)
def test_random_method_options_are_checked_or_refused(method, params):
    from hyperapp.models.registry import ANALYSES, METHODS

    m = (ANALYSES | METHODS)[method]
    try:
        checked = m.check_params(params)
    except HyperappError:
        return
    est = m.build(**checked)  # what passes the check builds, and holds values of the schema's types
    schema = m.schema()
    for k, v in checked.items():
        assert v is None or isinstance(v, schema[k].type), (k, v)
        assert getattr(est, k) == v


@given(text=st.one_of(st.text(max_size=10), st.sampled_from(["nan", "inf", "-0", "1e400", "0x10", " 3 ", "3.0",
                                                            "1,2", "2-1", "5-5", "-1", ""])))
@settings(max_examples=200, deadline=None)
def test_random_option_text_is_converted_or_refused(text):
    from hyperapp.request import checks as options
    for fn in (options.sample, options.seed, options.far, options.threshold, options.memory, options.roi_class,
               options.workers, options.band_spec, options.folder_name, options.scheduler, options.select):
        try:
            v = fn(text, "--x")
        except HyperappError:
            continue
        if isinstance(v, float):
            assert math.isfinite(v)
    try:
        bands = options.band_indices(text)
    except HyperappError:
        return
    assert bands and bands == sorted(set(bands)) and min(bands) >= 0


LABEL_DTYPES = ["bool", "uint8", "int16", "int32", "int64", "uint64", "float32", "float64", "complex64", "<U1",
                "datetime64[D]"]


@given(dtype=st.sampled_from(LABEL_DTYPES), shape=st.sampled_from([(12, 12), (12, 11), (12, 12, 1), (12, 12, 2),
                                                                   (144,), ()]),
       values=st.lists(st.one_of(st.integers(-(2**40), 2**40), st.sampled_from([0, 1, 2, 70000, -1]),
                                 st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=6),
       reader=st.sampled_from(["class map", "labels"]))
@FAST
def test_random_label_arrays_read_or_are_refused(base, dtype, shape, values, reader):
    from hyperapp.io.masks import read_class_map, read_labels

    n = int(np.prod(shape)) if shape else 1
    raw = np.resize(np.asarray(values, dtype=object), n)
    try:
        with np.errstate(all="ignore"):
            arr = np.asarray([str(v)[:1] for v in raw] if dtype == "<U1" else
                             [int(v) if dtype.startswith("datetime") and math.isfinite(float(v)) else v for v in raw],
                             dtype=object).astype(dtype).reshape(shape)
    except (ValueError, OverflowError, TypeError):
        return  # not an array of this dtype
    with tempfile.TemporaryDirectory(dir=base) as d:
        p = Path(d) / "labels.npy"
        np.save(p, arr)
        try:
            m = (read_class_map if reader == "class map" else read_labels)(p, (12, 12))
        except HyperappError:
            return
    assert m.shape == (12, 12)
    a = arr.reshape(12, 12).astype(np.float64)
    assert np.isfinite(a).all() and (a == np.round(a)).all()  # only whole, finite ids are read
    if reader == "class map":
        np.testing.assert_array_equal(m, np.where(a < 0, 0, a).astype(np.int64))
    else:
        np.testing.assert_array_equal(m, a > 0)
