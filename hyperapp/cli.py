"""Command line: ``hyperapp [CUBE] [--review RESULTS_FOLDER]`` opens the window (on a detection's outputs to
review); ``hyperapp --headless COMMAND`` works in batch.

Headless commands
-----------------
``info CUBE``
    Shape, dtype, interleave, wavelength range and size.
``detect CUBE --method M (--targets T | --target-spectra LIB [--spectra "a,b"]) [--undesired-spectra LIB2]
[--background B] [--truth MASK] [--far F | --threshold X] [--clump N] [--sieve MIN[..MAX]] [--connectivity 4|8]
[--continuum-removed] [--device auto|gpu|cpu] --out DIR``
    Writes ``DIR/scores.hdr/.img`` (float32, higher = more target-like), ``DIR/mask.hdr/.img``
    (uint8 0/1), ``DIR/objects.csv`` and ``DIR/report.json``; MTMF and MTTCIMF also
    ``DIR/infeasibility.hdr/.img``. The options make one :class:`hyperapp.request.DetectRequest`, the
    same a job step's keys and the window's fields make.
``analyse CUBE --method NAME [--param K=V ...] [--roi MASK|CSV] [--select KIND] [--sample N]
[--bands LIST] [--device auto|gpu|cpu] --out DIR``
    Fits an analysis method (k-means, band subsets, band clustering) on a selection of spectra and
    writes ``DIR/labels.hdr/.img`` (int16 cluster per pixel, int32 past 32767, -1 none; methods that label the image),
    the method's tables (CSV) and ``DIR/report.json``.
``bench [--case NAME ...]``
    The benchmark harness (GPU vs NumPy vs peer vs the memory-bandwidth floor).
``samples [DIR]``
    Rebuild the bundled sample scenes.

Exit status: 0 on success, 2 on bad usage or bad input (one line naming the file and the problem),
130 when cancelled, 1 on an internal error (one line; ``--debug`` shows the traceback).
The headless path never imports Qt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hyperapp import __version__
from hyperapp.core.errors import Cancelled, HyperappError, InputError, ModelError, about
from hyperapp.core.words import counted


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store``, refusing an option given twice with different values: argparse keeps the last
    one without a word, and a command line with ``--bands 3-9 ... --bands 40`` most often meant one of
    them, or both."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_options_given", {})
        if option_string is not None and self.dest in seen and seen[self.dest] != values:  # the same twice: harmless
            raise InputError(f"{option_string} given twice ({seen[self.dest]!r} and {values!r}): give it once")
        seen[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors share the one-line exit-2 path, and that
    refuses a single-value option given twice (:class:`_StoreOnce`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def error(self, message):
        raise InputError(f"{self.prog}: {message}")

    def parse_args(self, args=None, namespace=None):
        ns = super().parse_args(args, namespace)
        ns.__dict__.pop("_options_given", None)  # the bookkeeping of _StoreOnce, not an option
        return ns


def _add_cube_args(p):
    p.add_argument("cube", help="ENVI (.hdr or data file), a product (EMIT, PRISMA, EnMAP, AVIRIS NetCDF, Tanager, "
                   "DESIS), GeoTIFF, HDF5/NetCDF or MATLAB .mat cube")
    p.add_argument("--dataset", help="HDF5 dataset path or .mat variable holding the cube")
    p.add_argument("--band-axis", type=int, choices=(0, 1, 2), metavar="{0,1,2}",
                   help="the stored axis of a generic HDF5/NetCDF dataset that holds the bands, where the file does not "
                   "say (info prints the rule used otherwise)")


def _parse_param(text: str) -> tuple[str, object]:
    if "=" not in text or not text.split("=", 1)[0].strip():
        raise InputError(f"--param expects NAME=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    try:
        val: object = json.loads(v)
    except json.JSONDecodeError:
        val = v
    return k.strip().replace("-", "_"), val


def _method_name(text: str) -> str:
    """A method as typed: names are lower case ("RBFN" and " rbfn " are rbfn)."""
    return text.strip().lower()


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hyperapp --headless", description="hyperapp batch commands")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    info = sub.add_parser("info", help="describe a cube")
    _add_cube_args(info)
    info.add_argument("--json", action="store_true", help="print JSON")

    det = sub.add_parser("detect", help="run a detector and write scores, mask and report")
    _add_cube_args(det)
    det.add_argument("--method", required=True, type=_method_name)
    det.add_argument("--targets", help="CSV of row,col (0-based) or a mask image of target pixels")
    det.add_argument("--background", help="CSV of row,col or a mask image of background pixels")
    det.add_argument("--target-spectra", metavar="LIB",
                     help="target spectra from a spectral library (ENVI .sli/.hdr, CSV, two-column ASCII, a Spectral "
                          "Python ECOSTRESS/USGS database: name the spectra with --spectra), resampled "
                          "to the cube's bands: no clicks needed")
    det.add_argument("--spectra", metavar="NAMES", help="which spectra of --target-spectra (\"name,name\"; default all: one "
                                                        "detector each, the highest score kept)")
    det.add_argument("--undesired-spectra", metavar="LIB", action="append", default=[],
                     help="undesired (background) signatures to suppress (OSP, TCIMF, MTTCIMF) or train against "
                          "(RBFN); repeatable")
    det.add_argument("--undesired-names", metavar="NAMES", help="which spectra of --undesired-spectra (default all)")
    det.add_argument("--mnf", metavar="N", help="run the detector in MNF space: on the N leading minimum-noise-"
                                                         "fraction components (0: those with SNR >= 1)")
    det.add_argument("--undesired-rois", metavar="MASK",
                     help="ROI class map whose classes' mean spectra are undesired signatures")
    det.add_argument("--truth", help="truth mask (ENVI, PNG, NPY or .mat) for AUC and Pd")
    det.add_argument("--truth-var", help="variable holding the truth in a .mat file (e.g. map)")
    g = det.add_mutually_exclusive_group()
    g.add_argument("--far", help="false-alarm rate over the background that sets the threshold (default "
                   "1e-3); a separate mode of unclicked targets atop the scores (for the RBFN with its anomaly "
                   "input, atop its network's output) is left out of the count, and without one the "
                   "background's tail is extrapolated from the bulk of the scores")
    g.add_argument("--threshold", help="score threshold")
    det.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"])
    det.add_argument("--memory", default=None, metavar="GB",
                     help="host memory the run may hold; a cube larger than this is streamed from its file in "
                          "two passes (default: half the memory available)")
    det.add_argument("--out", required=True, help="output folder")
    det.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="method option, repeatable (e.g. --param n_hidden=8)")
    det.add_argument("--hidden", help="RBFN/FFBP hidden neurons (same as --param n_hidden=N)")
    det.add_argument("--save-model", help="save the trained model to this file (.npz)")
    det.add_argument("--model", help="score with a saved model instead of training")
    det.add_argument("--train-from", dest="train", help="train on this scene instead (FFBP: the window networks), then score the cube")
    det.add_argument("--train-truth", help="the targets of --train-from: a truth mask or clicks")
    det.add_argument("--all-bands", action="store_true", help="keep the header's bad bands")
    det.add_argument("--bands", help="run on these bands only (0-based, e.g. 3,17,40 or 10..20), as a band "
                                     "reduction chose them")
    det.add_argument("--clump", metavar="N", help="target filter: close the mask with an N x N square (N odd; "
                                                  "fills gaps narrower than N inside and between detections)")
    det.add_argument("--sieve", metavar="MIN[..MAX]", help="target filter: remove objects of fewer than MIN (or "
                                                           "more than MAX) pixels, after --clump")
    det.add_argument("--connectivity", metavar="4|8", help="which neighbours join pixels into one object (default 8)")
    det.add_argument("--continuum-removed", action="store_true",
                     help="detect on continuum-removed spectra (each divided by its upper convex hull over "
                          "wavelength), the targets' too")
    det.add_argument("--ortho", action="store_true", help="write the outputs on the orthorectified map grid of "
                     "the swath's geometry lookup table (EMIT), not on the swath's pixels")

    ana = sub.add_parser("analyse", aliases=["analyze"], help="cluster spectra or reduce bands; write labels and report")
    _add_cube_args(ana)
    ana.add_argument("--method", required=True, type=_method_name,
                     help="kmeans, band-subsets, band-clusters, som, gmm, forest, cart, hac or mnf")
    ana.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="method option, repeatable (e.g. --param k=2..16)")
    ana.add_argument("--roi", "--labels", dest="roi",
                     help="ROI pixels / training classes: an integer class map (0 = none; an ENVI classification "
                          "file's class names are kept) or a CSV of row,col (class 1)")
    ana.add_argument("--objects", help="a detection mask (the objects): with --select objects, analyse its pixels")
    ana.add_argument("--select", default=None, choices=["sample", "image", "roi", "rois", "objects"],
                     help="which spectra to fit on (default: a sample, or the ROI pixels when --roi is given)")
    ana.add_argument("--roi-class", default=None, help="the class --select roi takes (default 1)")
    ana.add_argument("--sample", default=None, help="pixels in the random sample (default 20000)")
    ana.add_argument("--seed", default=None, help="seed of the sample")
    ana.add_argument("--bands", help="analyse these bands only (0-based, e.g. 3,17,40 or 10..20)")
    ana.add_argument("--all-bands", action="store_true", help="keep the header's bad bands")
    ana.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"])
    ana.add_argument("--ortho", action="store_true", help="write the labels and maps on the orthorectified map "
                     "grid of the swath's geometry lookup table (EMIT), not on the swath's pixels")
    ana.add_argument("--out", required=True, help="output folder")

    run = sub.add_parser("run", help="run a batch job file (TOML) over many cubes; resumable")
    run.add_argument("job", help="the job file (see the README's Batch section)")
    run.add_argument("--workers", default=0,
                     help="start a local Dask cluster of N worker processes (one per GPU where there are several); "
                          "default: this process, reading, computing and writing three cubes at once")
    run.add_argument("--scheduler", help="send the cubes to an existing Dask cluster at this address")
    run.add_argument("--device", default="auto", choices=["auto", "gpu", "cpu"])
    run.add_argument("--memory", default=None, metavar="GB",
                     help="host memory one cube may hold before it is streamed (default: half the memory available)")

    bench = sub.add_parser("bench", help="benchmark the GPU kernels")
    bench.add_argument("--case", action="append", default=[], help="run only these cases (repeatable)")
    bench.add_argument("--repeats", default=20)
    bench.add_argument("--json", help="also write the results to this JSON file")
    bench.add_argument("--list", action="store_true", help="list the cases")
    bench.add_argument("--quick", action="store_true",
                       help="small sizes (a smoke test); without a GPU, the whole-run cases on the CPU")

    prep = sub.add_parser("prepare-gpu", help="compile every GPU kernel now, into CuPy's on-disk cache, so that no "
                                              "method's first run waits for its compilation")
    prep.add_argument("cubes", nargs="*", metavar="CUBE",
                      help="cubes whose windows every method also runs on (not needed: no kernel depends on "
                           "a cube's band count or size)")

    smp = sub.add_parser("samples", help="rebuild the sample scenes")
    smp.add_argument("folder", nargs="?", default=None)
    return p


def cmd_info(args) -> int:
    from hyperapp.core.cube import units_text
    from hyperapp.io import open_named_cube

    cube = open_named_cube(args.cube, args.dataset, args.band_axis)
    d = cube.describe()
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    r, c, b = cube.shape
    print(f"{d['name']}: {r} rows x {c} cols x {b} bands, {d['dtype']}, interleave {d['interleave']}")
    if "wavelength_range" in d:
        lo, hi = d["wavelength_range"]
        print(f"wavelengths: {lo:g} - {hi:g} {units_text(d.get('wavelength_units'))}".rstrip())
    else:
        print("wavelengths: none")
    print(f"size: {cube.nbytes / 2**20:.1f} MiB ({cube.nbytes} bytes)")
    if d.get("bad_bands"):
        print(f"bad bands: {d['bad_bands']}")
    if d.get("product"):
        print(f"product: {d['product']}")
    print(f"values: {d.get('value_units') or 'as stored (the file does not say)'}")
    if d.get("map_info"):
        print(f"map info: {', '.join(d['map_info'])}")
    print(f"location: {d.get('location') or 'none (the file places its pixels nowhere)'}")
    for note in d.get("notes", []):
        print(f"note: {note}")
    return 0


def _request(args, kind: str):
    """The run's request (:class:`hyperapp.request.DetectRequest` or ``AnalyseRequest``) from the command
    line's options, checked as a job step's and the window's are; then the output folder is checked
    (nothing is created yet)."""
    from dataclasses import fields

    from hyperapp.io.atomic import check_out_dir
    from hyperapp.request import AnalyseRequest, DetectRequest
    from hyperapp.request import checks as options

    params: dict = {}
    for t in args.param:
        k, v = _parse_param(t)
        if k in params and params[k] != v:
            raise InputError(f"--param {k} is given twice, as {params[k]!r} and {v!r}: give it once")
        params[k] = v
    if getattr(args, "hidden", None) is not None:
        if "n_hidden" in params and str(params["n_hidden"]).strip() != str(args.hidden).strip():
            raise InputError(f"--hidden {args.hidden} and --param n_hidden={params['n_hidden']} disagree: "
                             "give one of them")
        params["n_hidden"] = args.hidden
    cls = DetectRequest if kind == "detect" else AnalyseRequest
    keys = {f.name for f in fields(cls)}
    mapping = {k: v for k, v in vars(args).items() if k in keys}
    mapping["params"] = params
    req = cls.from_mapping(mapping, "cli")
    check_out_dir(options.out_folder(args.out))
    return req


def cmd_detect(args) -> int:
    from hyperapp.core.progress import ProgressDisplay
    from hyperapp.detect.run import detect_to_folder
    from hyperapp.io import read_labels, read_truth
    from hyperapp.io.masks import check_background, require_marks
    from hyperapp.request import checks as options

    req = _request(args, "detect")
    if args.save_model is not None and not args.save_model.strip():  # given, but empty: not silently no model
        raise InputError("--save-model must name the model file to write, got ''")
    if args.save_model:  # the file it will write (.npz added), checked before any work or output
        from hyperapp.detect.model_files import model_path

        if Path(args.save_model).is_dir():
            raise InputError("is a folder; --save-model names the model file to write", args.save_model)
        options.out_file(str(model_path(args.save_model)), "--save-model")
    cube = _open(args)
    from hyperapp.detect.outputs import check_ortho

    check_ortho(cube, args.ortho)  # (before any training)
    shape = (cube.rows, cube.cols)
    targets = read_labels(req.targets, shape) if req.targets else None
    if targets is not None:
        require_marks(targets, req.targets)  # naming the file, not the cube the model would have named
    background = read_labels(req.background, shape) if req.background else None
    check_background(background, targets, req.background)
    truth = read_truth(req.truth, shape, req.truth_var) if req.truth else None
    model = None
    if req.model:
        from hyperapp.detect.model_files import load_model

        model = load_model(req.model, n_bands=cube.bands, method=req.method)
    if req.train:
        from hyperapp.detect.training import train_on_scene

        model = train_on_scene(req.train, req.method, req.train_truth, bands=req.bands, all_bands=req.all_bands,
                               params=req.params, device=req.device, expected_bands=cube.bands, memory=req.memory)
    elif req.method == "ffbp" and model is None and targets is None:
        raise InputError("ffbp needs a model: --model FILE, --train-from SCENE --train-truth MASK, "
                         "or --targets marking the targets of this scene")
    from hyperapp.io.masks import read_class_map
    from hyperapp.io.signatures import signature_kwargs

    sig = signature_kwargs(cube, req.target_spectra, req.spectra, req.undesired_spectra, req.undesired_names,
                           read_class_map(req.undesired_rois, shape) if req.undesired_rois else None)
    if args.save_model and model is None:  # a model that could not be saved: refused before any output
        from hyperapp.detect.model_files import check_savable, model_path

        several = sig.get("target_spectra") is not None and len(sig["target_spectra"]) > 1
        check_savable(req.method, req.mnf is not None, several, model_path(args.save_model))
    with ProgressDisplay() as shown, about(args.cube):  # what the data does wrong names the cube
        result, paths = detect_to_folder(cube, req, targets, background, args.out, ortho=args.ortho, truth=truth,
                                         model=model, progress=shown.progress(), **sig)
    if args.save_model:
        from hyperapp.detect.model_files import save_model

        saved = save_model(result.model, args.save_model, method=req.method)
        # (a name without .npz gets it: say where the model went, which --model then takes)
        print(f"saved the model to {saved}")
    rep = result.report
    line = (f"{rep['method']} on {rep['device']}: {counted(rep['detections'], 'pixel')} in "
            f"{counted(rep['objects'], 'object')} above {rep['threshold']:.4g} ({rep['seconds']['total']:.3f} s)")
    if "evaluation" in rep:
        e = rep["evaluation"]
        line += f"; AUC {e['auc']:.4f}, Pd@1e-3 {e['pd_at_far_1e-3']:.3f}, Pd@1e-2 {e['pd_at_far_1e-2']:.3f}"
    if rep.get("windows_per_level"):
        line += f"; {rep['boxes']} boxes, windows per level {'/'.join(map(str, rep['windows_per_level']))}"
    print(line)
    from hyperapp.detect.finish import ties_words
    from hyperapp.detect.suggest import suggestion_words

    if ties := ties_words(rep):
        print(ties)
    if said := suggestion_words(rep):  # the rate kept few of the clicked targets: what keeps them
        print(said)
    if rep.get("nodata_pixels"):
        print(nodata_words(rep["nodata_pixels"]))
    if o := rep.get("orthorectified"):
        print(ortho_words(o))
    print(f"wrote {paths['report'].parent}")
    return 0


def ortho_words(o: dict) -> str:
    """The summary's line on outputs orthorectified through a GLT (the report's ``orthorectified``; a
    detection's counts there, where it has them)."""
    off = o.get("swath_detections_off_the_grid", 0)
    return (f"outputs orthorectified through the GLT onto a {o['rows']} x {o['cols']} grid ({o['crs']})"
            + (f": {counted(o['detections'], 'pixel')} in {counted(o['objects'], 'object')} there"
               if "detections" in o else "")
            + (f"; {off} detected swath pixel{'s' if off != 1 else ''} no grid cell shows (the GLT leaves "
               f"{'them' if off != 1 else 'it'} out): run without --ortho to see {'them' if off != 1 else 'it'}"
               if off else ""))


def nodata_words(n: int) -> str:
    """What a run did with the pixels without data, for the summary (the scores file's header says it too)."""
    return (f"{n} pixel{'s' if n != 1 else ''} without data (NaN, Inf or the no-data value) scored NaN, never "
            "detected")


def _open(args):
    """The cube of ``args``, less the header's bad bands (unless --all-bands), on --bands if given."""
    from hyperapp.io import open_named_cube

    return open_named_cube(args.cube, args.dataset, args.band_axis).run_bands(args.all_bands, args.bands)


def cmd_analyse(args) -> int:
    from hyperapp.analyse.run import forest_shape, run_analysis, write_analysis
    from hyperapp.core.progress import ProgressDisplay
    from hyperapp.detect.outputs import check_ortho
    from hyperapp.io.masks import class_names_of, read_class_map

    req = _request(args, "analyse")
    cube = _open(args)
    check_ortho(cube, args.ortho)  # (before the fit)
    shape = (cube.rows, cube.cols)
    roi = read_class_map(req.roi, shape) if req.roi else None
    objects = read_class_map(req.objects, shape) > 0 if req.objects else None
    names = class_names_of(req.roi) if req.roi else None
    with ProgressDisplay() as shown, about(args.cube):  # what the data does wrong names the cube
        from hyperapp.analyse.cost import long_run_words
        from hyperapp.analyse.run import selection_of

        said = long_run_words(cube, req.method, req.params, selection_of(req), roi, objects, req.device)
        if said:  # a long run is announced, not asked about: the command line runs unattended
            print(f"hyperapp: {said}", file=sys.stderr)
        result = run_analysis(cube, req, roi=roi, objects=objects, class_names=names, progress=shown.progress())
    paths = write_analysis(result, args.out, cube, ortho=args.ortho)
    rep = result.report
    res = rep["results"]
    line = f"{rep['method']} on {rep['device']}: {rep['selection']['n_spectra']} spectra"
    if "criterion" in res:
        line += f", k = {res['chosen_k']}" + (f" (by {res['criterion']} over k = {res['k'][0]}..{res['k'][-1]})"
                                               if len(res["k"]) > 1 else "")  # (one k asked: nothing chosen)
    if "best" in res:
        b = res["best"][0]
        line += f", best subset {b['bands']} ({res['score']} {b['score']:.4f})"
    if "representatives" in res:
        line += f", bands kept {res['representatives']}"
    if "test_accuracy" in res:
        line += f", {forest_shape(res)}"
        if res["test_accuracy"] is not None:
            line += f", held-out accuracy {res['test_accuracy']:.4f} ({res['n_test']} px)"
            from hyperapp.analyse.run import class_accuracy_words

            line += "".join(f", {w}" for w in class_accuracy_words(res))
        if res.get("oob_accuracy") is not None:
            line += f", out-of-bag {res['oob_accuracy']:.4f}"
    if "top_heights" in res:
        line += f", {res['n_clusters']} clusters, top merge at height {res['top_heights'][0]:.4g}"
    if "quantization_error" in res:
        line += (f", {res['rows']} x {res['cols']} map, quantisation error {res['quantization_error'][-1]:.4g}, "
                 f"topographic error {res['topographic_error'][-1]:.3f}")
    if "bic" in res:
        i = res["k"].index(res["chosen_k"])
        by = " by BIC" if len(res["k"]) > 1 else ""  # (one k asked: nothing chosen)
        line += (f", k = {res['chosen_k']}{by} ({res['covariance']}), average log-likelihood "
                 f"{res['log_likelihood_per_sample'][i]:.4f}")
    if "snr" in res:
        line += (f", {res['n_components']} of {len(res['snr'])} MNF components kept (SNR {res['snr'][0]:.4g} down to "
                 f"{res['snr'][res['n_components'] - 1]:.4g})")
    line += f" ({rep['seconds']['total']:.3f} s)"
    print(line)
    if rep["selection"].get("nodata_left_out"):
        print(f"{rep['selection']['nodata_left_out']} pixel(s) without data (NaN, Inf or the no-data value) left "
              "out of the fit: -1 in the label maps, NaN in the images written")
    if "criterion" in res or "bic" in res:
        from hyperapp.analyse.run import range_edge_words

        edge = range_edge_words(res["k"], res["chosen_k"], "bic" if "bic" in res else res["criterion"])
        if edge:
            print(edge)
    if o := rep.get("orthorectified"):
        print(ortho_words(o))
    print(f"wrote {paths['report'].parent}")
    return 0


def cmd_bench(args) -> int:
    from hyperapp.bench import list_cases, run_bench

    if args.list:
        for name, doc in list_cases():
            print(f"{name}: {doc}")
        return 0
    from hyperapp.request import checks as options
    repeats = options.whole(args.repeats, "--repeats", 1, 10**6)
    json_path = options.out_file(args.json, "--json") if args.json is not None else None  # before any work
    return run_bench(args.case or None, repeats=repeats, json_path=json_path, quick=args.quick)


def cmd_prepare_gpu(args) -> int:
    from hyperapp.batch.prepare_gpu import cache_dir, prepare_gpu
    from hyperapp.core.backend import gpu_available, gpu_status
    from hyperapp.core.progress import ProgressDisplay
    from hyperapp.io import open_cube

    for c in args.cubes:  # a cube named that cannot be opened is one line, with or without a GPU
        open_cube(c)
    if not gpu_available():
        print(f"hyperapp: no GPU here ({gpu_status()}): nothing to prepare; the CPU path needs no kernels")
        return 0
    lines: list[str] = []
    with ProgressDisplay() as shown:
        summary = prepare_gpu(args.cubes, progress=shown.progress(), report=lines.append)
    for line in lines:
        print(f"  {line}")
    n_failed = len(summary["failed"])
    print(f"prepared {summary['tasks'] - n_failed} of {summary['tasks']} warm-ups on {summary['device']} in "
          f"{summary['seconds']:.1f} s; kernels cached in {cache_dir()}")
    if n_failed:
        print(f"hyperapp: {n_failed} warm-up(s) failed: {', '.join(summary['failed'])}", file=sys.stderr)
        return 1
    return 0


def cmd_samples(args) -> int:
    from hyperapp.io.atomic import check_out_dir
    from hyperapp.io.samples import build_samples, sample_folder

    folder = args.folder or sample_folder()
    check_out_dir(folder)  # a file, or a folder that cannot be made: one line before anything is written
    build_samples(folder)
    print(f"wrote sample scenes to {folder}")
    return 0


def cmd_run(args) -> int:
    from hyperapp.batch.jobfile import load_job
    from hyperapp.batch.runner import run_job
    from hyperapp.request import checks as options

    workers = options.workers(args.workers, "--workers")
    memory = options.memory(args.memory, "--memory") if args.memory is not None else None
    scheduler = options.scheduler(args.scheduler, "--scheduler") if args.scheduler is not None else None
    if scheduler is not None and workers:
        raise InputError("give --workers (worker processes started here) or --scheduler (a running cluster's "
                         "workers), not both")
    job = load_job(args.job)
    return run_job(job, workers=workers, scheduler=scheduler, device=args.device, memory=memory)


COMMANDS = {"run": cmd_run, "info": cmd_info, "detect": cmd_detect, "analyse": cmd_analyse, "analyze": cmd_analyse,
            "bench": cmd_bench, "samples": cmd_samples, "prepare-gpu": cmd_prepare_gpu}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so every output being written is deleted on the way out."""


def _on_sigterm(signum, frame):
    raise Terminated()


def headless(argv: list[str], debug: bool = False) -> int:
    """Run a batch command; exit status 0, 1 (some cubes of a batch failed) or 2 (bad input)."""
    import warnings

    with warnings.catch_warnings():
        if not debug:
            # NumPy's RuntimeWarnings (an overflow, an invalid value) and the like printed their source lines
            # above the one-line error, or under a successful run; --debug shows them
            warnings.simplefilter("ignore", RuntimeWarning)
        return _headless(argv, debug)


#: options that name what a command writes, not what it reads
_OUTPUT_OPTIONS = ("out", "save_model", "json")


def _input_files(args) -> list[str]:
    """Every existing file a command's options name, but its outputs (:data:`_OUTPUT_OPTIONS`)."""
    out: list[str] = []
    for k, v in vars(args).items():
        if k in _OUTPUT_OPTIONS:
            continue
        for item in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(item, str) and item.strip() and os.path.isfile(item):
                out.append(item)
    return out


def _headless(argv: list[str], debug: bool) -> int:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        args = build_parser().parse_args(argv)
        local = not (str(getattr(args, "workers", 0)).strip() not in ("", "0") or getattr(args, "scheduler", None))  # Dask workers use their own GPUs
        if args.command in ("detect", "analyse", "analyze", "run") and local:
            from hyperapp.core.cuda_start import prewarm

            prewarm(getattr(args, "device", "auto"))  # CUDA starts before NumPy is imported
        if args.command in ("detect", "analyse", "analyze"):
            from hyperapp.io.atomic import protect_inputs

            # no output replaces a file this run reads; a model that cannot fit or score this cube names it
            with protect_inputs(*_input_files(args)), about(getattr(args, "cube", None), (ModelError,)):
                rc = COMMANDS[args.command](args)
        else:
            rc = COMMANDS[args.command](args)
        global _EXIT_FAST
        _EXIT_FAST = args.command in ("detect", "analyse", "analyze") and "cupy" in sys.modules
        return rc
    except HyperappError as exc:
        print(f"hyperapp: error: {exc}", file=sys.stderr)
        return 2
    except Cancelled:
        print("hyperapp: cancelled; nothing written", file=sys.stderr)
        return 130
    except Terminated as exc:
        kept = getattr(exc, "kept", None)
        print("hyperapp: terminated; " + ("no partial output left" if kept is None else
              f"{kept} cube(s) done are kept; run again to resume"), file=sys.stderr)
        return 143
    except KeyboardInterrupt as exc:
        kept = getattr(exc, "kept", None)  # a batch run's finished cubes stay for the next run to skip
        said = getattr(exc, "note", None) or ("nothing written" if kept is None else
                                               f"{kept} cube(s) done are kept; run again to resume")
        print(f"\nhyperapp: interrupted; {said}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of our output left (`hyperapp ... | head`): quiet, as Unix tools are
        try:  # what is still buffered for stdout goes nowhere, not into an error at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141  # 128 + SIGPIPE, as a shell reports a pipe's writer that stopped
    except OSError as exc:  # the system refused a file operation (an I/O error, a path that cannot be
        # made): the user's environment, not hyperapp's fault; one line naming the file where the system does
        if debug:
            raise
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"hyperapp: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # an internal error: one line unless asked for the traceback
        if debug:
            raise
        print(f"hyperapp: internal error: {exc.__class__.__name__}: {exc} (run with --debug for details)",
              file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    if "--version" in argv:
        print(f"hyperapp {__version__}")
        return 0
    if "--headless" in argv:
        argv.remove("--headless")
        return headless(argv, debug)
    if argv and argv[0] in COMMANDS and not Path(argv[0]).exists():  # a batch command without --headless
        print(f"hyperapp: error: {argv[0]} is a batch command: run hyperapp --headless {' '.join(argv)}",
              file=sys.stderr)
        return 2
    gp = argparse.ArgumentParser(prog="hyperapp", description="hyperspectral target detection on the GPU",
                                 epilog="Batch use: hyperapp --headless {info,detect,analyse,run,bench,prepare-gpu,samples} ...")
    gp.add_argument("cube", nargs="?", help="cube to open (default: the bundled land scene)")
    gp.add_argument("--dataset", help="HDF5 dataset or .mat variable")
    gp.add_argument("--all-bands", action="store_true", help="keep the header's bad bands (File > Keep bad bands)")
    gp.add_argument("--review", metavar="RESULTS_FOLDER",
                    help="review a detection's outputs (objects.csv, mask, scores of hyperapp --headless detect) on "
                         "the cube: File > Open results for review")
    gp.add_argument("--headless", action="store_true", help="run a batch command instead of the window")
    args = gp.parse_args(argv)
    if args.review and not args.cube:
        print("hyperapp: error: --review needs the results' cube: hyperapp CUBE --review RESULTS_FOLDER", file=sys.stderr)
        return 2
    if args.review and not Path(args.review).is_dir():
        print(f"hyperapp: error: {args.review}: not a results folder (it does not exist or is a file)", file=sys.stderr)
        return 2
    from hyperapp.gui.app import run_gui  # Qt only on this path

    return run_gui(args.cube, args.dataset, args.all_bands, args.review)


#: set when a headless command that used CUDA has finished and written everything
_EXIT_FAST = False


def entry() -> None:
    """The ``hyperapp`` command: :func:`main`, then exit.

    After a ``detect`` or ``analyse`` that used the GPU, the process ends with ``os._exit`` once
    standard output is flushed: every output file is already closed and renamed into place, and
    CUDA's own teardown (destroying the context, unpinning the page-locked buffers) would keep the
    shell waiting another 0.2-0.3 s for work the operating system does anyway.
    """
    rc = main()
    if _EXIT_FAST:
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    sys.exit(rc)


if __name__ == "__main__":
    entry()
