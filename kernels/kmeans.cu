// k-means on the GPU: many runs in one pass (seed 001, "Multik").
//
// hyperapp_kmeans_assign
//   The nearest centre of every point for every run at once. A run ("segment") is one k of one
//   restart; its centres are rows seg_start[s] .. seg_start[s+1]-1 of the packed centre list.
//   G (M, n) = C X^T comes from one cuBLAS GEMM over all M packed centres, so the distance
//   ||x - c||^2 = ||x||^2 + (||c||^2 - 2 x.c) needs only cc[m] - 2 G[m, p] here (the ||x||^2 term is
//   the same for every centre and is added once by the caller for the inertia).
//   Thread mapping: blockIdx.y is the segment, one thread per point along x. For a fixed centre m
//   the threads of a warp read 32 consecutive floats of G's row m (coalesced); each thread reads k
//   floats of G per segment and writes one label and one distance (and, while iterating, the k
//   entries of its column of the transposed one-hot matrix). Ties go to the first centre, as NumPy's
//   argmin does.
//
// hyperapp_kmeans_subsets
//   The band-subset search: one small k-means per random subset of R bands, every subset in its own
//   block, all subsets in one launch (seed 001, section 4). KS (centres) and R (bands of a subset)
//   are compile-time constants, so each thread keeps its partial sums for all KS x R coordinates and
//   KS counts in registers over its points (many points per thread, "more work per thread"), the
//   block reduces them with warp shuffles and then shared memory, and the centres are updated in
//   shared memory without leaving the block: the iterations need no grid-wide synchronisation and no
//   host round trip. Xt is band-major (bands, n), so the threads of a warp read consecutive points of
//   one band (coalesced); a block reads R * n * 4 bytes per iteration.
//   After the last iteration one more pass computes the inertia and, for labelled points
//   (y >= 0), the histogram of classes per cluster (shared-memory atomics), from which the caller
//   scores how well the subset's cluster code separates the classes.

#ifndef KS
#define KS 8
#endif
#ifndef R
#define R 3
#endif
// NC, the number of ROI classes, is a runtime argument (data, not a setting): the class histograms live
// in dynamic shared memory (KS * NC ints).
#define THREADS 256
#define WARPS (THREADS / 32)

extern "C" __global__ void hyperapp_kmeans_assign(const float* __restrict__ G, const float* __restrict__ cc,
                                                  const int* __restrict__ seg_start, int n,
                                                  int* __restrict__ label, float* __restrict__ mind,
                                                  float* __restrict__ onehot) {
    const int s = blockIdx.y;
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const int a = seg_start[s], b = seg_start[s + 1];
    float best = __int_as_float(0x7f800000);  // +inf
    int arg = a;
    for (int m = a; m < b; ++m) {
        const float v = cc[m] - 2.0f * G[(size_t)m * n + p];
        if (v < best) {
            best = v;
            arg = m;
        }
    }
    label[(size_t)s * n + p] = arg;
    mind[(size_t)s * n + p] = best;
    if (onehot != nullptr) {
        // the transposed one-hot membership (M, n) for the sums' GEMM: the segments partition the
        // centres, so every entry is written here (no zero fill), coalesced along the points
        for (int m = a; m < b; ++m) onehot[(size_t)m * n + p] = (m == arg) ? 1.0f : 0.0f;
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ int nearest(const float (&x)[R], const float* c) {
    int arg = 0;
    float best = __int_as_float(0x7f800000);  // +inf
#pragma unroll
    for (int k = 0; k < KS; ++k) {
        float d = 0.0f;
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const float t = x[j] - c[k * R + j];
            d = fmaf(t, t, d);
        }
        if (d < best) {
            best = d;
            arg = k;
        }
    }
    return arg;
}

extern "C" __global__ void __launch_bounds__(THREADS)
hyperapp_kmeans_subsets(const float* __restrict__ Xt, int n, const int* __restrict__ bands,
                        const float* __restrict__ init, int iters, const signed char* __restrict__ y,
                        float* __restrict__ centres_out, double* __restrict__ inertia_out,
                        int* __restrict__ counts_out, int* __restrict__ hist_out, int* __restrict__ iters_out,
                        const int NC) {
    __shared__ float c[KS * R];
    __shared__ float red[WARPS][KS * (R + 1)];
    extern __shared__ int hist[];  // KS * NC
    __shared__ int changed;
    const int s = blockIdx.x;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float* xb[R];
#pragma unroll
    for (int j = 0; j < R; ++j) xb[j] = Xt + (size_t)bands[s * R + j] * n;
    for (int i = tid; i < KS * R; i += THREADS) c[i] = init[(size_t)s * KS * R + i];
    for (int i = tid; i < KS * NC; i += THREADS) hist[i] = 0;
    __syncthreads();
    int it = 0;
    for (; it < iters; ++it) {
        float acc[KS * (R + 1)];  // sums of the R coordinates and the count, per centre
#pragma unroll
        for (int i = 0; i < KS * (R + 1); ++i) acc[i] = 0.0f;
        for (int p = tid; p < n; p += THREADS) {
            float x[R];
#pragma unroll
            for (int j = 0; j < R; ++j) x[j] = __ldg(xb[j] + p);
            const int k = nearest(x, c);
            // registers must be indexed by constants: select the centre's slots by an unrolled loop
#pragma unroll
            for (int q = 0; q < KS; ++q) {
                const float w = (q == k) ? 1.0f : 0.0f;
#pragma unroll
                for (int j = 0; j < R; ++j) acc[q * (R + 1) + j] = fmaf(w, x[j], acc[q * (R + 1) + j]);
                acc[q * (R + 1) + R] += w;
            }
        }
#pragma unroll
        for (int i = 0; i < KS * (R + 1); ++i) {
            const float v = warp_sum(acc[i]);
            if (lane == 0) red[warp][i] = v;
        }
        if (tid == 0) changed = 0;
        __syncthreads();
        if (tid < KS) {
            float sum[R + 1];
#pragma unroll
            for (int j = 0; j <= R; ++j) sum[j] = 0.0f;
            for (int w = 0; w < WARPS; ++w)
#pragma unroll
                for (int j = 0; j <= R; ++j) sum[j] += red[w][tid * (R + 1) + j];
            if (sum[R] > 0.0f) {  // an emptied centre stays where it was
#pragma unroll
                for (int j = 0; j < R; ++j) {
                    const float v = sum[j] / sum[R];
                    if (v != c[tid * R + j]) changed = 1;
                    c[tid * R + j] = v;
                }
            }
        }
        __syncthreads();
        if (!changed) {
            ++it;
            break;
        }
    }
    // final pass: inertia and the class histogram per cluster
    float inert = 0.0f;
    float cnt[KS];
#pragma unroll
    for (int q = 0; q < KS; ++q) cnt[q] = 0.0f;
    for (int p = tid; p < n; p += THREADS) {
        float x[R];
#pragma unroll
        for (int j = 0; j < R; ++j) x[j] = __ldg(xb[j] + p);
        const int k = nearest(x, c);
        float d = 0.0f;
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const float t = x[j] - c[k * R + j];
            d = fmaf(t, t, d);
        }
        inert += d;
#pragma unroll
        for (int q = 0; q < KS; ++q) cnt[q] += (q == k) ? 1.0f : 0.0f;
        const int cls = y[p];
        if (cls >= 0) atomicAdd(&hist[k * NC + cls], 1);
    }
    inert = warp_sum(inert);
    if (lane == 0) red[warp][0] = inert;
#pragma unroll
    for (int q = 0; q < KS; ++q) {
        const float v = warp_sum(cnt[q]);
        if (lane == 0) red[warp][1 + q] = v;
    }
    __syncthreads();
    if (tid == 0) {
        double tot = 0.0;
        for (int w = 0; w < WARPS; ++w) tot += red[w][0];
        inertia_out[s] = tot;
        iters_out[s] = it;
    }
    if (tid < KS) {
        float tot = 0.0f;
        for (int w = 0; w < WARPS; ++w) tot += red[w][1 + tid];
        counts_out[(size_t)s * KS + tid] = (int)tot;
    }
    for (int i = tid; i < KS * R; i += THREADS) centres_out[(size_t)s * KS * R + i] = c[i];
    for (int i = tid; i < KS * NC; i += THREADS) hist_out[(size_t)s * KS * NC + i] = hist[i];
}

// hyperapp_som_online
//   The online (per-sample) SOM of seed 000: each spectrum in turn moves every neuron towards it by
//   lr * h(grid distance to the best unit). The steps are sequential by nature, so one block runs a
//   whole epoch in one launch. Thread mapping: warp w owns neurons w, w + 32, ...; its lanes own the
//   bands (so every codebook read and write is coalesced). Best-unit search: each warp sums a neuron's
//   squared distance across its lanes with shuffles and keeps its best; warp 0 then picks the best of
//   the 32 (lowest index on ties, as NumPy's argmin). Update: one exp per neuron, then the lanes move
//   its bands. The radius and the learning rate decay exponentially over all steps of all epochs.
#define SOM_THREADS 1024
#define SOM_WARPS (SOM_THREADS / 32)
extern "C" __global__ void __launch_bounds__(SOM_THREADS)
hyperapp_som_online(float* __restrict__ W, const float* __restrict__ X, const int* __restrict__ order, int n_steps,
                    int d, int M, int cols, float s0, float s1, float a0, float a1, long long step0,
                    long long total) {
    extern __shared__ float xs[];  // the current spectrum (d floats)
    __shared__ float bestd[SOM_WARPS];
    __shared__ int besti[SOM_WARPS];
    __shared__ int bmu_s;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int s = 0; s < n_steps; ++s) {
        const int p = order[s];
        for (int b = tid; b < d; b += SOM_THREADS) xs[b] = X[(size_t)p * d + b];
        __syncthreads();
        float bd = __int_as_float(0x7f800000);
        int bi = 0x7fffffff;
        for (int j = warp; j < M; j += SOM_WARPS) {
            const float* w = W + (size_t)j * d;
            float acc = 0.0f;
            for (int b = lane; b < d; b += 32) {
                const float t = xs[b] - w[b];
                acc = fmaf(t, t, acc);
            }
            acc = warp_sum(acc);
            acc = __shfl_sync(0xffffffffu, acc, 0);
            if (acc < bd) {  // neurons come in increasing order: the first best is kept
                bd = acc;
                bi = j;
            }
        }
        if (lane == 0) {
            bestd[warp] = bd;
            besti[warp] = bi;
        }
        __syncthreads();
        if (warp == 0) {
            float v = bestd[lane];
            int vi = besti[lane];
            for (int o = 16; o > 0; o >>= 1) {
                const float ov = __shfl_down_sync(0xffffffffu, v, o);
                const int oi = __shfl_down_sync(0xffffffffu, vi, o);
                if (ov < v || (ov == v && oi < vi)) {
                    v = ov;
                    vi = oi;
                }
            }
            if (lane == 0) bmu_s = vi;
        }
        __syncthreads();
        const int bmu = bmu_s;
        const double frac = total > 1 ? (double)(step0 + s) / (double)(total - 1) : 0.0;
        const float sig = (float)((double)s0 * pow((double)s1 / s0, frac));
        const float lr = (float)((double)a0 * pow((double)a1 / a0, frac));
        const float inv2s2 = 1.0f / (2.0f * sig * sig);
        const int br = bmu / cols, bc = bmu % cols;
        for (int j = warp; j < M; j += SOM_WARPS) {
            const float dr = (float)(j / cols - br), dc = (float)(j % cols - bc);
            const float coef = lr * expf(-(dr * dr + dc * dc) * inv2s2);
            float* w = W + (size_t)j * d;
            for (int b = lane; b < d; b += 32) w[b] += coef * (xs[b] - w[b]);
        }
        __syncthreads();
    }
}
