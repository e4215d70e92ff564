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

// The M-step's covariances and means from the fused sums (models/gmm.py, _fused_m_step): with n_j the
// weight (its epsilon added), delta = g_j / n_j and T_ab = S[a, j d + b] - s_ja g_jb,
// cov_j[a, b] = ((T_ab / n_j - delta_a delta_b) + (T_ba / n_j - delta_b delta_a)) / 2 (+ reg on the
// diagonal) and means_j = s_j + delta: the NumPy twin's arithmetic, one thread per entry.
extern "C" __global__ void hyperapp_gmm_covariances(const double* __restrict__ S, const double* __restrict__ s,
                                                    const double* __restrict__ g, const double* __restrict__ nk,
                                                    int k, int d, double reg, double* __restrict__ cov,
                                                    double* __restrict__ means)
{
    const long long dd = (long long)d * d;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)k * dd) return;
    const int j = (int)(idx / dd);
    const int a = (int)((idx - j * dd) / d);
    const int b = (int)(idx - j * dd - (long long)a * d);
    const long long kd = (long long)k * d;
    const double n = nk[j];
    const double ga = g[(long long)j * d + a], gb = g[(long long)j * d + b];
    const double sa = s[(long long)j * d + a], sb = s[(long long)j * d + b];
    const double da = ga / n, db = gb / n;
    const double tab = S[a * kd + (long long)j * d + b] - sa * gb;
    const double tba = S[b * kd + (long long)j * d + a] - sb * ga;
    const double cab = tab / n - da * db;
    const double cba = tba / n - db * da;
    double v = 0.5 * (cab + cba);
    if (a == b) {
        v += reg;
        means[(long long)j * d + a] = sa + da;
    }
    cov[idx] = v;
}

// Per component (one block each): the Cholesky factor L of its covariance (Sigma = L L^T, right-looking,
// one column a step), the factor of its precision U = (L^-1)^T (L^-1 by forward substitution of all
// columns at once, a row a step), and from them what the next E-step needs: W[:, j d : (j + 1) d] = U
// (W is d x k d), b_j = mu_j U, and info[j] = (the d squared pivots, log det U, max |U|). A matrix that is
// not positive definite gives a pivot <= 0 and NaN from there on (the caller checks the pivots and takes
// the host's path for that component).
// The work matrix A holds L in its lower triangle and L^-1 transposed (U) above the diagonal, U's
// diagonal in ud; it lives in dynamic shared memory when use_shared (d * d + 2 d doubles), else in L's
// own rows in global memory (2 d doubles of shared memory: ud and a cached column).
extern "C" __global__ void hyperapp_gmm_factors(const double* __restrict__ cov, const double* __restrict__ mu,
                                                int k, int d, int use_shared, double* __restrict__ L,
                                                double* __restrict__ U, double* __restrict__ W,
                                                double* __restrict__ bvec, double* __restrict__ info)
{
    extern __shared__ double smem[];
    __shared__ double red[32];
    const int j = blockIdx.x;
    const int tid = threadIdx.x, nt = blockDim.x;
    const long long dd = (long long)d * d;
    double* Lj = L + j * dd;
    double* A = use_shared ? smem : Lj;
    double* ud = use_shared ? smem + dd : smem;
    double* col = ud + d;
    const double* C = cov + j * dd;
    double* inf = info + (long long)j * (d + 2);
    for (long long t = tid; t < dd; t += nt) A[t] = C[t];
    __syncthreads();
    // Cholesky: column p scaled by its pivot's root, then the trailing lower triangle updated
    for (int p = 0; p < d; ++p) {
        const double a = A[(long long)p * d + p];
        const double r = sqrt(a);
        __syncthreads();  // every thread has read the pivot
        for (int i = p + 1 + tid; i < d; i += nt) {
            const double v = A[(long long)i * d + p] / r;
            A[(long long)i * d + p] = v;
            col[i] = v;
        }
        if (tid == 0) {
            A[(long long)p * d + p] = r;
            inf[p] = r * r;
        }
        __syncthreads();
        const int m = d - p - 1;
        for (int t = tid; t < m * m; t += nt) {
            const int i = p + 1 + t / m, c = p + 1 + t % m;
            if (c <= i) A[(long long)i * d + c] -= col[i] * col[c];
        }
        __syncthreads();
    }
    // L^-1 = B (lower): B = I, then for each row p: B[p, :] /= L[p, p]; B[i, :] -= L[i, p] B[p, :] for i > p.
    // B[i, c] (i > c) is stored at A[c, i], B[c, c] at ud[c].
    for (int c = tid; c < d; c += nt) ud[c] = 1.0;
    for (long long t = tid; t < dd; t += nt) {
        const int r = (int)(t / d), c = (int)(t - (long long)r * d);
        if (c > r) A[t] = 0.0;
    }
    __syncthreads();
    for (int p = 0; p < d; ++p) {
        const double lpp = A[(long long)p * d + p];
        for (int c = tid; c <= p; c += nt) {
            if (c == p) ud[p] = ud[p] / lpp;
            else A[(long long)c * d + p] /= lpp;
        }
        for (int i = p + 1 + tid; i < d; i += nt) col[i] = A[(long long)i * d + p];
        __syncthreads();
        const int m = d - p - 1;
        for (int t = tid; t < m * (p + 1); t += nt) {
            const int c = t / m, i = p + 1 + t % m;
            const double bpc = (c == p) ? ud[p] : A[(long long)c * d + p];
            A[(long long)c * d + i] -= col[i] * bpc;
        }
        __syncthreads();
    }
    // b_j = mu_j U (U[a, c] above the diagonal is A[a, c]), before A is split into the outputs
    for (int c = tid; c < d; c += nt) {
        const double* m = mu + (long long)j * d;
        double acc = 0.0;
        for (int a = 0; a < c; ++a) acc = fma(m[a], A[(long long)a * d + c], acc);
        bvec[(long long)j * d + c] = fma(m[c], ud[c], acc);
    }
    __syncthreads();
    // outputs: L (zeros above the diagonal), U (zeros below), W's block, max |U|
    const long long kd = (long long)k * d;
    double mx = 0.0;
    for (long long t = tid; t < dd; t += nt) {
        const int r = (int)(t / d), c = (int)(t - (long long)r * d);
        const double v = A[t];
        const double u = (c > r) ? v : ((c == r) ? ud[c] : 0.0);
        U[j * dd + t] = u;
        W[(long long)r * kd + (long long)j * d + c] = u;
        mx = fmax(mx, fabs(u));
        Lj[t] = (c <= r) ? v : 0.0;  // (in global mode A is Lj: only this thread reads and writes A[t] here)
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if ((tid & 31) == 0) red[tid >> 5] = mx;
    __syncthreads();
    if (tid == 0) {
        double top = 0.0;
        for (int w = 0; w < (nt + 31) / 32; ++w) top = fmax(top, red[w]);
        double logdet = 0.0;
        for (int c = 0; c < d; ++c) logdet += log(ud[c]);
        inf[d] = logdet;
        inf[d + 1] = top;
    }
}
