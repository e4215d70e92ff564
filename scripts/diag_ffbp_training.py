"""Compare host- and GPU-trained FFBP networks on the 1024 x 1024 sea scene (thresholds, boxes, recall).
Run on the GPU machine: python3 scripts/diag_ffbp_training.py"""

import time

import cupy
import numpy as np

from hyperapp.models.ffbp import FFBP, box_recall, component_boxes
from hyperapp.models.ffbp_gpu import search_gpu_graph
from hyperapp.samples import make_sea_scene


def main():
    train = [make_sea_scene(256, 256, seed=s) for s in (101, 102, 103, 104)]
    host = [(s.cube.astype(np.float32), s.truth > 0) for s in train]
    dev = [(cupy.asarray(a), t) for a, t in host]
    mc = FFBP().fit_scenes(host)
    mg = FFBP().fit_scenes(dev)
    print("t1 cpu", mc.t1_, "gpu", mg.t1_, "epochs", mc.ann1_.epochs_run_, mg.ann1_.epochs_run_)
    test = make_sea_scene(1024, 1024, seed=998)
    Xd = cupy.asarray(test.cube.astype(np.float32))
    n = len(component_boxes(test.truth > 0))
    for name, m in (("cpu-trained", mc), ("gpu-trained", mg)):
        t0 = time.time()
        W = search_gpu_graph(m, Xd)
        print(name, "raw boxes", len(W[0]), "levels", W[3], f"{time.time() - t0:.3f} s")
        boxes = m.detect(Xd)
        P = np.array([[b["row"], b["col"], b["row"] + b["height"], b["col"] + b["width"]] for b in boxes]).reshape(-1, 4)
        print(name, "merged", len(boxes), "recall, false boxes", box_recall(P, test.truth > 0), "targets", n)


if __name__ == "__main__":
    main()
