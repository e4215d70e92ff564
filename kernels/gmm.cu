// Gaussian mixture EM with full covariances on the GPU (models/gmm.py): what comes after the E-step's
// GEMM and what feeds the M-step's GEMM, each reading or writing a block's (m, k d) array once.
//
// E-step: Y = X [U_1 ... U_k] is one float64 GEMM per block of rows (cuBLAS); the whitened spectra are
// y_ij = Y[i, j d : (j + 1) d] - b_j with b_j = mu_j U_j. hyperapp_gmm_estep_rows turns Y into each
// row's log density per component (c_j - |y_ij|^2 / 2, c_j the log weight plus the log normalisation),
// their log-sum-exp and the responsibilities, in one pass.
// M-step: hyperapp_gmm_weighted_deviations writes B[i, j d + c] = r_ij (x_ic - s_jc) (s_j a shift near
// the component's mean: the E-step's mean) and per-tile column sums of B; S = X^T B is the next GEMM.
//
// k and d are runtime arguments: no size is compiled in, so one module serves every cube.

__device__ __forceinline__ double warp_sum_d(double v)
{
    // butterfly: both lanes of a pair add the same two values, so every lane ends with the same bits
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One warp per row, a grid-stride loop over rows. Lane l reads elements l, l + 32, ... of each
// component's d-long segment of the row (coalesced); the log-sum-exp over components is online
// (running maximum and sum), then lane 0 rewrites its k log densities as responsibilities.
// resp (m, k) and lse (m,) are written; a row whose densities are not finite gets NaN (the caller
// drops a run whose likelihood is not finite).
// With has_extra, extra (m, k) is added to each squared norm: the squared norms of components whose
// factors are too large for x U - mu U to resolve, summed from (x - mu) U by the caller (their columns
// of Y and rows of b are zeros).
extern "C" __global__ void hyperapp_gmm_estep_rows(const double* __restrict__ Y, const double* __restrict__ b,
                                                   const double* __restrict__ c, const double* __restrict__ extra,
                                                   int has_extra, long long m, int k, int d,
                                                   double* __restrict__ resp, double* __restrict__ lse)
{
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long kd = (long long)k * d;
    for (long long r = (((long long)blockIdx.x * blockDim.x) + threadIdx.x) >> 5; r < m; r += warps) {
        const double* y = Y + r * kd;
        double* p = resp + r * k;
        double mx = 0.0, s = 0.0;
        for (int j = 0; j < k; ++j) {
            const double* yj = y + (long long)j * d;
            const double* bj = b + (long long)j * d;
            double acc = 0.0;
            for (int t = lane; t < d; t += 32) {
                const double v = yj[t] - bj[t];
                acc = fma(v, v, acc);
            }
            acc = warp_sum_d(acc);
            if (has_extra) acc += extra[r * k + j];
            const double lp = c[j] - 0.5 * acc;
            if (lane == 0) p[j] = lp;
            if (j == 0) {
                mx = lp;
                s = 1.0;
            } else if (lp > mx) {
                s = fma(s, exp(mx - lp), 1.0);
                mx = lp;
            } else {
                s += exp(lp - mx);
            }
        }
        if (lane == 0) {
            const double total = mx + log(s);
            lse[r] = total;
            for (int j = 0; j < k; ++j) p[j] = exp(p[j] - total);
        }
    }
}

// B[i, col] = R[i, j] (X[i, c] - s[col]) with col = j d + c, and partial[tile, col] = the sum of B's
// column over the tile's rows (summed across tiles by the caller: the shift's correction needs the sums of
// the very values the GEMM multiplies). Grid: x over columns (blockDim.x threads each, consecutive columns,
// so the loads of X and the stores of B are coalesced), y over tiles of ``tile`` rows.
extern "C" __global__ void hyperapp_gmm_weighted_deviations(const double* __restrict__ X,
                                                            const double* __restrict__ R,
                                                            const double* __restrict__ s, long long m, int k,
                                                            int d, int tile, double* __restrict__ B,
                                                            double* __restrict__ partial)
{
    const long long kd = (long long)k * d;
    const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= kd) return;
    const int j = (int)(col / d);
    const int c = (int)(col - (long long)j * d);
    const double sc = s[col];
    const long long i0 = (long long)blockIdx.y * tile;
    const long long i1 = (i0 + tile < m) ? i0 + tile : m;
    double acc = 0.0;
    for (long long i = i0; i < i1; ++i) {
        const double v = R[i * k + j] * (X[i * d + c] - sc);
        B[i * kd + col] = v;
        acc += v;
    }
    partial[(long long)blockIdx.y * kd + col] = acc;
}
