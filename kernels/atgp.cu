// ATGP (automatic target generation process) in two launches a signature, with no host round trip
// (models/subspace.py:atgp). Each pick is the pixel of largest residual norm ||P_U⊥ x||² after the
// signatures found so far are projected out; the residuals are kept up to date: with q the new
// orthonormal direction, every residual drops by (x . q)².
//
// atgp_update (grid of warps; do_update 2 sets resid[r] = ||x||² instead, the start): warp w takes pixels r = w, w + warps, ...; its lanes read the pixel's
// bands lane, lane + 32, ... (one coalesced line per 32 bands), form x . q in float64 and reduce it by
// shuffles; lane 0 lowers resid[r] by its square (an excluded or picked pixel stays at -inf). Each
// warp keeps the largest residual it saw and its index (the first on ties, as numpy.argmax), and the
// block's warps reduce theirs through shared memory to one candidate per block. With do_update 0 the
// pass only finds the candidates (the first pick).
//
// atgp_pick (one block): the largest of the blocks' candidates is the pick (first index on ties). Its
// spectrum, in float64, is orthogonalised against the basis so far by Gram-Schmidt, twice (classical
// Gram-Schmidt loses orthogonality in one pass when a pick lies close to the span), normalised, and
// appended to the basis; it becomes the q of the next update; its residual is set to -inf. A pick
// whose residual is -inf (nothing left to pick) appends a zero direction, which changes nothing; the
// host ends the list at the first such pick.
//
// Layout: S (m, nb) float32 row-major, the pixels; basis (max_basis, nb) float64, one direction a row.

#define WARPS_PER_BLOCK 8
#define NEG_INF __longlong_as_double(0xfff0000000000000ULL)

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// (value, index) of the larger, the smaller index on ties; -inf loses to everything but itself
__device__ __forceinline__ void arg_max(double& v, long long& i, double v2, long long i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

__device__ __forceinline__ void warp_arg_max(double& v, long long& i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        double v2 = __shfl_xor_sync(0xffffffffu, v, o);
        long long i2 = __shfl_xor_sync(0xffffffffu, i, o);
        arg_max(v, i, v2, i2);
    }
}

extern "C" __global__ void atgp_update(const float* __restrict__ S, const double* __restrict__ q,
                                       double* __restrict__ resid, long long m, int nb, int do_update,
                                       double* __restrict__ cand_v, long long* __restrict__ cand_i) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const long long warps = (long long)gridDim.x * WARPS_PER_BLOCK;
    double best = NEG_INF;
    long long best_i = m;  // beyond every pixel: loses every tie
    for (long long r = (long long)blockIdx.x * WARPS_PER_BLOCK + w; r < m; r += warps) {
        double res = resid[r];
        if (do_update) {
            const float* x = S + r * nb;
            double p = 0.0;
            if (do_update == 2) {
                for (int b = lane; b < nb; b += 32) p += (double)x[b] * (double)x[b];
                res = warp_sum(p);
            } else {
                for (int b = lane; b < nb; b += 32) p += (double)x[b] * q[b];
                p = warp_sum(p);
                if (res != NEG_INF) res -= p * p;
            }
            if (lane == 0) resid[r] = res;
        }
        arg_max(best, best_i, res, r);
    }
    __shared__ double sv[WARPS_PER_BLOCK];
    __shared__ long long si[WARPS_PER_BLOCK];
    if (lane == 0) {
        sv[w] = best;
        si[w] = best_i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < WARPS_PER_BLOCK; ++k) arg_max(best, best_i, sv[k], si[k]);
        cand_v[blockIdx.x] = best;
        cand_i[blockIdx.x] = best_i;
    }
}

// block-wide sum of one double per thread (blockDim.x a multiple of 32, at most 1024)
__device__ double block_sum(double v, double* scratch) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read from the last call
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    double t = 0.0;
    for (int k = 0; k < nw; ++k) t += scratch[k];
    return t;
}

// dynamic shared memory: nb doubles (the pick's spectrum)
extern "C" __global__ void atgp_pick(const float* __restrict__ S, double* __restrict__ resid, long long m, int nb,
                                     const double* __restrict__ cand_v, const long long* __restrict__ cand_i,
                                     int n_cand, double* __restrict__ basis, int n_basis,
                                     double* __restrict__ q, long long* __restrict__ picks,
                                     double* __restrict__ best, int j) {
    extern __shared__ double v[];
    __shared__ double scratch[32];
    __shared__ double pick_v;
    __shared__ long long pick_i;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    // the pick: the largest candidate, the first pixel on ties
    double bv = NEG_INF;
    long long bi = m;
    for (int c = threadIdx.x; c < n_cand; c += blockDim.x) arg_max(bv, bi, cand_v[c], cand_i[c]);
    warp_arg_max(bv, bi);
    __shared__ double wv[32];
    __shared__ long long wi[32];
    if (lane == 0) {
        wv[w] = bv;
        wi[w] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < (int)(blockDim.x >> 5); ++k) arg_max(bv, bi, wv[k], wi[k]);
        if (bi >= m) bi = 0;  // every residual -inf: nothing to pick (best says so)
        pick_v = bv;
        pick_i = bi;
        picks[j] = bi;
        best[j] = bv;
    }
    __syncthreads();
    const bool live = pick_v != NEG_INF;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) v[b] = live ? (double)S[pick_i * nb + b] : 0.0;
    __syncthreads();
    // Gram-Schmidt against the basis, twice
    for (int pass = 0; pass < 2; ++pass) {
        for (int k = 0; k < n_basis; ++k) {
            const double* u = basis + (long long)k * nb;
            double part = 0.0;
            for (int b = threadIdx.x; b < nb; b += blockDim.x) part += u[b] * v[b];
            const double c = block_sum(part, scratch);
            for (int b = threadIdx.x; b < nb; b += blockDim.x) v[b] -= c * u[b];
            __syncthreads();
        }
    }
    double part = 0.0;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) part += v[b] * v[b];
    const double norm = sqrt(block_sum(part, scratch));
    const double inv = norm > 0.0 ? 1.0 / norm : 0.0;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        const double x = v[b] * inv;
        basis[(long long)n_basis * nb + b] = x;
        q[b] = x;
    }
    if (threadIdx.x == 0 && live) resid[pick_i] = NEG_INF;
}
