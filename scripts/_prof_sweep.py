import cupy as cp, numpy as np
from cupyx.profiler import benchmark
from hyperapp.models.kmeans import _assign_segments
from hyperapp.bench.cases import _spectra
X,_ = _spectra(262144,128); X = cp.asarray(X); X -= X.mean(0)
ks = [k for r in range(4) for k in range(2,17)]
seg = np.concatenate([[0], np.cumsum(ks)]); M = int(seg[-1]); S=len(ks)
C = X[cp.asarray(np.random.default_rng(0).choice(262144, M))]
nc = 124000; Xc = X[:nc]; cc=(C*C).sum(1); segd = cp.asarray(seg.astype(np.int32))
G = C @ Xc.T
lab, mind = _assign_segments(G, cc, segd, seg)
def onehot():
    oh = cp.zeros((nc, M), cp.float32); oh[cp.arange(nc)[None,:], lab] = 1.0; return oh
oh = onehot()
for name, f in [("gemm_dist", lambda: C @ Xc.T), ("assign", lambda: _assign_segments(G, cc, segd, seg)),
                ("onehot", onehot), ("gemm_sums", lambda: oh.T @ Xc), ("counts_sum0", lambda: oh.sum(axis=0)),
                ("counts_bincount", lambda: cp.bincount(lab.ravel(), minlength=M)),
                ("inertia", lambda: cp.maximum(mind + (Xc*Xc).sum(1)[None,:],0).sum(axis=1, dtype=cp.float64))]:
    print(name, benchmark(f, n_repeat=20).gpu_times.mean()*1e3, "ms", flush=True)
