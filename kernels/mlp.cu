// hyperapp_mlp_train: back-propagation with Adam for the one-hidden-layer tansig network of
// hyperapp.models.mlp (the FFBP detector's ANN-1 and ANN-2), every epoch and mini-batch in ONE launch of
// ONE block. The networks are tiny (NF inputs x NH hidden neurons, about a thousand weights) and the
// training sets a few thousand windows, so a launch per operation (the CuPy formulation: a dozen per
// mini-batch) spent its time in launches; one block that keeps the weights and gradients in shared
// memory runs every step back to back.
//
// Thread mapping per mini-batch: (a) the block gathers the batch's feature rows into shared memory
// (where they fit, `stage`; a wide cube's rows, 285 bands' 570 features of a 256-window batch, do not: they
// are then read from global memory, through the L1 cache, in the same order, so the sums are the same);
// (b) one thread per sample runs the forward pass and writes its hidden outputs and the back-propagated
// errors of the output and hidden layers; (c) one thread per weight sums its gradient over the batch
// (no atomics) and applies the Adam update. At the end of each epoch the block reduces the weighted
// validation error, keeps the best weights and stops after `patience` epochs without improvement.
// NF inputs is a runtime argument (it follows the cube's band count, which must compile nothing new);
// NH hidden neurons is the template parameter (a model parameter). Epoch permutations come from the
// host RNG, so the sequence of mini-batches is the NumPy path's.

#define THREADS 256
#define NP (NF * NH + 2 * NH + 1)  // U (NF x NH, row f), b (NH), w (NH), b0
#define OFF_B (NF * NH)
#define OFF_W (NF * NH + NH)

template <int NH>
__device__ __forceinline__ float mlp_forward(const float* __restrict__ x, const float* __restrict__ P,
                                             float* __restrict__ h, const int NF)
{
    float o = P[NP - 1];
#pragma unroll 4
    for (int k = 0; k < NH; ++k) {
        float a = P[OFF_B + k];
        for (int f = 0; f < NF; ++f) a = fmaf(x[f], P[f * NH + k], a);
        h[k] = tanhf(a);
        o = fmaf(h[k], P[OFF_W + k], o);
    }
    return tanhf(o);
}

template <int NH>
__global__ void __launch_bounds__(THREADS) hyperapp_mlp_train(
    const int NF, const float* __restrict__ X, const float* __restrict__ t, const float* __restrict__ sw,
    const int* __restrict__ perm, int n_tr, const int* __restrict__ ev, int n_ev,
    int batch, int epochs, int patience, float lr,
    const float* __restrict__ init, float* __restrict__ adam, float* __restrict__ best_out,
    float* __restrict__ result, const int stage)
{
    extern __shared__ float sm[];
    float* P = sm;                      // current weights
    float* Xb = P + NP;                 // batch x NF (where staged)
    float* Hb = Xb + (stage ? batch * NF : 0);  // batch x NH: hidden outputs
    float* GH = Hb + batch * NH;        // batch x NH: errors at the hidden pre-activations
    float* GO = GH + batch * NH;        // batch: errors at the output pre-activation
    __shared__ float red[THREADS];
    __shared__ float s_best;
    __shared__ int s_since, s_stop, s_improved;
    const int tid = threadIdx.x;
    for (int p = tid; p < NP; p += THREADS) { P[p] = init[p]; best_out[p] = init[p]; adam[p] = 0.f; adam[NP + p] = 0.f; }
    if (tid == 0) { s_best = 3.0e38f; s_since = 0; s_stop = 0; }
    __syncthreads();
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float b1t = 1.f, b2t = 1.f;
    int run = epochs;
    float h[NH];
    for (int epoch = 0; epoch < epochs; ++epoch) {
        const int* pe = perm + (long long)epoch * n_tr;
        for (int i0 = 0; i0 < n_tr; i0 += batch) {
            const int nb = min(batch, n_tr - i0);
            if (stage)
                for (int q = tid; q < nb * NF; q += THREADS) {
                    const int s = q / NF;
                    Xb[q] = X[(long long)pe[i0 + s] * NF + (q - s * NF)];
                }
            __syncthreads();
            for (int s = tid; s < nb; s += THREADS) {
                const float o = mlp_forward<NH>(stage ? Xb + s * NF : X + (long long)pe[i0 + s] * NF, P, h, NF);
                const int idx = pe[i0 + s];
                const float go = 2.f * sw[idx] * (o - t[idx]) / nb * (1.f - o * o);
                GO[s] = go;
                for (int k = 0; k < NH; ++k) {
                    Hb[s * NH + k] = h[k];
                    GH[s * NH + k] = go * P[OFF_W + k] * (1.f - h[k] * h[k]);
                }
            }
            __syncthreads();
            b1t *= b1;
            b2t *= b2;
            for (int p = tid; p < NP; p += THREADS) {
                float g = 0.f;
                if (p < OFF_B) {
                    const int f = p / NH, k = p - f * NH;
                    if (stage)
                        for (int s = 0; s < nb; ++s) g = fmaf(Xb[s * NF + f], GH[s * NH + k], g);
                    else
                        for (int s = 0; s < nb; ++s) g = fmaf(X[(long long)pe[i0 + s] * NF + f], GH[s * NH + k], g);
                } else if (p < OFF_W) {
                    for (int s = 0; s < nb; ++s) g += GH[s * NH + (p - OFF_B)];
                } else if (p < NP - 1) {
                    for (int s = 0; s < nb; ++s) g = fmaf(GO[s], Hb[s * NH + (p - OFF_W)], g);
                } else {
                    for (int s = 0; s < nb; ++s) g += GO[s];
                }
                const float m = b1 * adam[p] + (1.f - b1) * g;
                const float v = b2 * adam[NP + p] + (1.f - b2) * g * g;
                adam[p] = m;
                adam[NP + p] = v;
                P[p] -= lr * (m / (1.f - b1t)) / (sqrtf(v / (1.f - b2t)) + eps);
            }
            __syncthreads();
        }
        float acc = 0.f;
        for (int s = tid; s < n_ev; s += THREADS) {
            const int idx = ev[s];
            const float o = mlp_forward<NH>(X + (long long)idx * NF, P, h, NF);
            acc += sw[idx] * (o - t[idx]) * (o - t[idx]);
        }
        red[tid] = acc;
        __syncthreads();
        for (int off = THREADS / 2; off > 0; off >>= 1) {
            if (tid < off) red[tid] += red[tid + off];
            __syncthreads();
        }
        if (tid == 0) {
            const float loss = red[0] / n_ev;
            s_improved = loss < s_best - 1e-6f;
            if (s_improved) { s_best = loss; s_since = 0; }
            else if (++s_since >= patience) s_stop = 1;
        }
        __syncthreads();
        if (s_improved)
            for (int p = tid; p < NP; p += THREADS) best_out[p] = P[p];
        if (s_stop) { run = epoch + 1; break; }
        __syncthreads();
    }
    if (tid == 0) { result[0] = (float)run; result[1] = s_best; }
}
