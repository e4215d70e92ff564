"""Line by line, where a live click's host time goes (line_profiler; wall time per line, so a line that
waits for the GPU carries that wait): the RBFN from clicks, and the library MTTCIMF.

    python3 scripts/profile_lines.py [rbfn] [mttcimf]
"""

import sys

import cupy
import numpy as np
from line_profiler import LineProfiler

from hyperapp.bench.live import scene
from hyperapp.core.cube import cube_from_array
from hyperapp.detect.run import run as detect
from hyperapp.models import evaluation, kmeans, mnf, rbfn, rbfn_gpu, stats, subspace

X, truth, clicks = scene(1024, 1024, 64)
cube = cube_from_array(X, "profile")
Xd = cupy.asarray(X)
t = X[truth].astype(np.float64).mean(axis=0)[None]
common = [detect.run_detection, detect._fit, detect._score, detect.finish_detection, detect._load_labelled,
          evaluation.evaluate, evaluation.far_threshold, evaluation.target_mode_size, evaluation._split,
          stats.BackgroundStats.from_pixels]
funcs = {
    "rbfn": [rbfn.RBFN.fit, rbfn.RBFN.sample_indices, rbfn.RBFN.fit_from_pixels, rbfn.RBFN._output_layer,
             rbfn._Coherence.__init__, kmeans.kmeans_small, rbfn.RBFN.decision_function, rbfn.RBFN._add_coherence,
             rbfn_gpu.score_fused],
    "mttcimf": [mnf._MixtureTuned.fit_signature, mnf.MNF.fit, mnf.MNF.fit_from_stats, mnf._MixtureTuned._fit_filter,
                subspace.atgp, subspace._atgp_device, mnf._MixtureTuned.score_maps],
}
for name in sys.argv[1:] or ["rbfn", "mttcimf"]:
    def click(name=name):
        if name == "rbfn":
            return detect.run_detection(cube, "rbfn", clicks, device="gpu", truth=truth, image=Xd)
        return detect.run_detection(cube, name, device="gpu", truth=truth, image=Xd, target_spectra=t)

    for _ in range(3):
        click()
    lp = LineProfiler(*(common + funcs[name]))
    lp.enable_by_count()
    for _ in range(10):
        click()
        cupy.cuda.get_current_stream().synchronize()
    lp.disable_by_count()
    print(f"\n######## {name} (10 clicks)")
    lp.print_stats(output_unit=1e-3, stripzeros=True)
