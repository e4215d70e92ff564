"""A one-hidden-layer feed-forward network with tansig units, trained by back-propagation (Adam).

The thesis's FFBP networks (seed 002, eqs. 2.5-2.9): inputs scaled to [-1, 1] (eq. 2.4),
h = tansig(x U + b), y' = tansig(h w + b0), y = (y' + 1) / 2 (the de-normalisation of eq. 2.9 with the
output range fixed to [0, 1]). ``tansig(a) = 2 / (1 + exp(-2a)) - 1``, which is ``tanh``.

Training runs on the device the data is on, in mini-batches, with class-balanced weighted squared error,
and early stopping on a held-out split (the weights of the best validation epoch are kept). On the GPU
the whole training is one launch of ``kernels/mlp.cu`` (measured on an H100: the CuPy formulation, a
dozen launches per mini-batch, took 11.5 s where the CPU takes 1.5 s); the epoch permutations come from
the same host RNG, so both paths see the same mini-batches.
"""

from __future__ import annotations

import numpy as np

from hyperapp.core.backend import get_namespace
from hyperapp.core.errors import ModelError


def _unit(t, xp):
    """(t + 1) / 2: a tansig output in [-1, 1] to [0, 1], by ufuncs (an operator with a scalar imports
    cupyx.scipy.special on CuPy's first call: hyperapp.core.backend, scalar operators)."""
    return xp.multiply(xp.add(t, 1.0), 0.5)


class TansigMLP:
    """One hidden layer of tansig neurons, tansig output.

    Parameters
    ----------
    n_hidden : int
    learning_rate, epochs, batch_size, patience, validation_fraction, seed :
        Adam and early-stopping settings.
    """

    def __init__(self, n_hidden: int = 16, learning_rate: float = 3e-3, epochs: int = 300,
                 batch_size: int = 256, patience: int = 30, validation_fraction: float = 0.2, seed: int = 0):
        self.n_hidden = n_hidden
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.batch_size = batch_size
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.seed = seed

    def forward(self, X):
        """Output in [0, 1] (eq. 2.9 de-normalised) for inputs already scaled to [-1, 1]."""
        xp = get_namespace(X)
        h = xp.tanh(X @ self.U_ + self.b_)
        return _unit(xp.tanh(h @ self.w_ + self.b0_), xp)

    def fit(self, X, y, progress=None):
        xp = get_namespace(X)
        X = X.astype(xp.float32)
        y = xp.asarray(y).astype(xp.float32).reshape(-1)
        n, m = X.shape
        n_pos = int(xp.greater(y, 0.5).sum())  # ufuncs where an operand is a scalar: hyperapp.core.backend, scalar operators
        if n_pos == 0 or n_pos == n:
            raise ModelError("the training windows hold only one class: need windows with and without targets")
        rng = np.random.default_rng(self.seed)
        batch = int(self.batch_size)
        order = rng.permutation(n)
        n_val = int(n * self.validation_fraction) if n >= 20 else 0
        val, tr = xp.asarray(order[:n_val]), xp.asarray(order[n_val:])
        t = xp.subtract(xp.multiply(2.0, y), 1.0)  # targets in [-1, 1] for the tansig output
        wpos = 0.5 / max(n_pos, 1)
        wneg = 0.5 / max(n - n_pos, 1)
        sw = xp.multiply(xp.where(xp.greater(y, 0.5), wpos, wneg).astype(xp.float32), xp.float32(n))
        k = int(self.n_hidden)
        params = {
            "U": xp.asarray(rng.normal(0, 1 / np.sqrt(m), (m, k)).astype(np.float32)),
            "b": xp.zeros(k, xp.float32),
            "w": xp.asarray(rng.normal(0, 1 / np.sqrt(k), k).astype(np.float32)),
            "b0": xp.zeros(1, xp.float32),
        }
        if xp is not np and _gpu_trainable(m, k, batch):
            return self._fit_gpu(X, t, sw, order[n_val:], order[:n_val] if n_val else order[n_val:], params,
                                 rng, batch, progress)
        mom = {key: xp.zeros_like(v) for key, v in params.items()}
        vel = {key: xp.zeros_like(v) for key, v in params.items()}
        b1, b2, eps, lr = 0.9, 0.999, 1e-8, float(self.learning_rate)
        best, best_params, since, step = np.inf, None, 0, 0
        tr_host = np.asarray(tr.get() if hasattr(tr, "get") else tr)
        for epoch in range(int(self.epochs)):
            perm = xp.asarray(rng.permutation(tr_host))
            for i in range(0, perm.shape[0], batch):
                idx = perm[i:i + batch]
                xb, tb, wb = X[idx], t[idx], sw[idx]
                h = xp.tanh(xb @ params["U"] + params["b"])
                o = xp.tanh(h @ params["w"] + params["b0"])
                # weighted squared error: dL/do = 2 w (o - t) / batch
                go = 2.0 * wb * (o - tb) / xb.shape[0] * (1 - o * o)
                grads = {"w": h.T @ go, "b0": go.sum(keepdims=True)}
                gh = go[:, None] * params["w"][None, :] * (1 - h * h)
                grads["U"] = xb.T @ gh
                grads["b"] = gh.sum(axis=0)
                step += 1
                for key in params:
                    mom[key] = b1 * mom[key] + (1 - b1) * grads[key]
                    vel[key] = b2 * vel[key] + (1 - b2) * grads[key] ** 2
                    mh = mom[key] / (1 - b1 ** step)
                    vh = vel[key] / (1 - b2 ** step)
                    params[key] = params[key] - lr * mh / (xp.sqrt(vh) + eps)
            ev = val if n_val else tr
            h = xp.tanh(X[ev] @ params["U"] + params["b"])
            o = xp.tanh(h @ params["w"] + params["b0"])
            loss = float((sw[ev] * (o - t[ev]) ** 2).mean())
            if loss < best - 1e-6:
                best, best_params, since = loss, {k2: v.copy() for k2, v in params.items()}, 0
            else:
                since += 1
                if since >= self.patience:
                    break
            if progress is not None:
                progress(min(1.0, (epoch + 1) / self.epochs), f"epoch {epoch + 1}, loss {loss:.4f}")
        p = best_params or params
        self.U_, self.b_, self.w_, self.b0_ = p["U"], p["b"], p["w"], p["b0"]
        self.epochs_run_ = epoch + 1
        self.val_loss_ = best
        return self


    def _fit_gpu(self, X, t, sw, tr, ev, params, rng, batch, progress):
        """Train with ``kernels/mlp.cu``: every epoch in one launch (see its header)."""
        import cupy

        from hyperapp.kernels import allow_shared, get_kernel

        n, m = X.shape
        k = int(self.n_hidden)
        perms = np.stack([rng.permutation(tr) for _ in range(int(self.epochs))]).astype(np.int32)
        init = cupy.concatenate([params["U"].ravel(), params["b"], params["w"], params["b0"]]).astype(cupy.float32)
        npar = init.size
        adam = cupy.empty(2 * npar, cupy.float32)
        best = cupy.empty(npar, cupy.float32)
        result = cupy.zeros(2, cupy.float32)
        expr = f"hyperapp_mlp_train<{k}>"
        kern = get_kernel("mlp", expr, name_expressions=(expr,))
        stage = _gpu_smem(m, k, batch, staged=True) <= GPU_SMEM_LIMIT  # the batch's rows in shared memory
        smem = _gpu_smem(m, k, batch, staged=stage)
        allow_shared(kern, smem)
        kern((1,), (256,), (np.int32(m), cupy.ascontiguousarray(X), cupy.ascontiguousarray(t.astype(cupy.float32)),
                            cupy.ascontiguousarray(sw.astype(cupy.float32)), cupy.asarray(perms), np.int32(len(tr)),
                            cupy.asarray(np.asarray(ev, np.int32)), np.int32(len(ev)), np.int32(batch),
                            np.int32(self.epochs), np.int32(self.patience), np.float32(self.learning_rate),
                            init, adam, best, result, np.int32(stage)), shared_mem=smem)
        run, loss = (float(v) for v in result.get())
        self.U_ = best[: m * k].reshape(m, k)
        self.b_ = best[m * k: m * k + k]
        self.w_ = best[m * k + k: m * k + 2 * k]
        self.b0_ = best[m * k + 2 * k:]
        self.epochs_run_ = int(run)
        self.val_loss_ = loss
        if progress is not None:
            progress(1.0, f"{int(run)} epochs on the GPU, loss {loss:.4f}")
        return self

GPU_SMEM_LIMIT = 200 * 1024


def kernel_variants(hidden: tuple[int, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """(module, name expressions) of the training kernel for networks of these hidden-layer sizes (the
    band count is a runtime argument; the hidden layer's size is the template's): what ``prepare-gpu``
    compiles for the FFBP detector's default networks."""
    return [("mlp", tuple(f"hyperapp_mlp_train<{int(h)}>" for h in hidden))]


def _gpu_smem(m: int, k: int, batch: int, staged: bool) -> int:
    """Shared memory of the training kernel: the weights, the batch's hidden outputs and errors, and where
    ``staged`` its feature rows."""
    return ((m * k + 2 * k + 1) + batch * ((m if staged else 0) + 2 * k) + batch) * 4


def _gpu_trainable(m: int, k: int, batch: int) -> bool:
    """Whether the single-block training kernel fits (its weights and one batch's hidden outputs in shared
    memory; the batch's rows are read from global memory where they do not fit beside them)."""
    return _gpu_smem(m, k, batch, staged=False) <= GPU_SMEM_LIMIT
