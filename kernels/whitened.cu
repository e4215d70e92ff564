// Row reductions of the whitened detectors (ACE, RX, MF), each reading its input once.
//
// ACE and RX need z^T z of every whitened pixel z = (x - mu) W, which only the GEMM that forms z can
// give; written as array expressions after that GEMM, ACE made five more passes over the (n, k) result
// (z @ s, z * z, the row sum, the quotient and the clip). hyperapp_whitened_rows reads z once and
// writes the score. MF needs no GEMM at all: (x - mu)^T W s / s^T s is one dot product with
// w = W s / s^T s, folded at fit time; hyperapp_centred_dot forms it from x directly, subtracting the
// mean inside the sum (as the array formula does) instead of after it, so nothing cancels.
//
// Thread mapping (both kernels): one warp per row, a grid-stride loop over rows. Lane l reads elements
// l, l + 32, ... of the row, so a warp's 32 loads of one step fall in one 128-byte segment (coalesced);
// the two partial sums are combined by butterfly shuffles, and lane 0 writes the row's score.

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// mode 0: ACE = (z.s)^2 / (s.s * z.z), clipped to [0, 1] and 0 where z.z is 0 (spectral.ace);
// mode 1: RX = z.z (the squared Mahalanobis distance).
extern "C" __global__ void hyperapp_whitened_rows(const float* __restrict__ Z, const float* __restrict__ s,
                                                  float ss, long long n, int k, int mode,
                                                  float* __restrict__ out)
{
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = (((long long)blockIdx.x * blockDim.x) + threadIdx.x) >> 5; r < n; r += warps) {
        const float* z = Z + r * k;
        float dot = 0.f, sq = 0.f;
        for (int j = lane; j < k; j += 32) {
            const float v = z[j];
            sq = fmaf(v, v, sq);
            dot = fmaf(v, s[j], dot);
        }
        sq = warp_sum(sq);
        dot = warp_sum(dot);
        if (lane == 0) {
            if (mode == 0) {
                const float den = ss * sq;
                out[r] = den > 0.f ? fminf(fmaxf(dot * dot / den, 0.f), 1.f) : 0.f;
            } else {
                out[r] = sq;
            }
        }
    }
}

// out[r] = sum_j (X[r, j] - mu[j]) * w[j]
extern "C" __global__ void hyperapp_centred_dot(const float* __restrict__ X, const float* __restrict__ mu,
                                                const float* __restrict__ w, long long n, int k,
                                                float* __restrict__ out)
{
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = (((long long)blockIdx.x * blockDim.x) + threadIdx.x) >> 5; r < n; r += warps) {
        const float* x = X + r * k;
        float acc = 0.f;
        for (int j = lane; j < k; j += 32) acc = fmaf(x[j] - mu[j], w[j], acc);
        acc = warp_sum(acc);
        if (lane == 0) out[r] = acc;
    }
}
