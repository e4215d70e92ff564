// A small k-means in one launch: k-means++ seeding and Lloyd iterations of a few thousand points
// (the RBFN's background centres, models/kmeans.py:kmeans), the whole run inside one thread block.
//
// Why one block: the points (n x D floats, ~256 KB for 4000 x 16) live in L2, and every seeding
// round and Lloyd step depends on the one before. As separate launches with a host draw between
// them, the run cost ~30 seeding round trips (6-7 ms on the host); inside a block each step is a
// __syncthreads.
//
// Thread mapping: THREADS threads. Distance passes take points p = tid, tid + THREADS, ... (rows
// of consecutive threads are consecutive, so a warp's reads are coalesced). The seeding's cumulative
// sum takes a contiguous chunk of points per thread (sum the chunk, scan the chunk sums across the
// block with warp shuffles, then the thread whose chunk holds the drawn value walks it), so the
// drawn point is the first whose running sum exceeds u * total, as numpy.searchsorted(cumsum,
// side="right") on the host.
//
// Agreement with the NumPy path (same function, same random numbers): distances, cumulative sums,
// centre sums and the member spread are float64 (the expansion ||x||^2 - 2 x.c + ||c||^2 loses
// nothing that matters in float64, where in float32 it let near-equidistant points fall differently
// on the two backends); centres are rounded to float32 after each update, as the host keeps them.
// Ties go to the first centre, as numpy.argmin.
//
// Compile-time: D (dimensions). Dynamic shared memory: 2 k D + k doubles (sums, centres, their
// norms) + k ints (counts).

#ifndef D
#define D 16
#endif
#define THREADS 1024
#define WARPS (THREADS / 32)

__device__ __forceinline__ double dot(const float* __restrict__ x, const double* c) {
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < D; ++i) s += (double)x[i] * c[i];
    return s;
}

// ||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2 in float64 (xx = ||x||^2, cc = ||c||^2), clamped at 0
__device__ __forceinline__ double sq_dist(const float* __restrict__ x, double xx, const double* c, double cc) {
    return fmax(xx - 2.0 * dot(x, c) + cc, 0.0);
}

__device__ __forceinline__ double sq_norm(const float* __restrict__ x) {
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < D; ++i) s += (double)x[i] * (double)x[i];
    return s;
}

// exclusive prefix sum of one double per thread across the block; returns the block total too
__device__ double block_exclusive_scan(double v, double* warp_tot, double* total) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    double incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const double t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += t;
    }
    if (lane == 31) warp_tot[w] = incl;
    __syncthreads();
    if (w == 0) {
        double x = lane < WARPS ? warp_tot[lane] : 0.0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const double t = __shfl_up_sync(0xffffffffu, x, o);
            if (lane >= o) x += t;
        }
        if (lane < WARPS) warp_tot[lane] = x;  // inclusive over warps
        if (lane == WARPS - 1) *total = x;
    }
    __syncthreads();
    const double before = (w > 0 ? warp_tot[w - 1] : 0.0) + incl - v;
    return before;
}

// sums[c * D + i] = sum of X[p, i] over the points p labelled c, in point order
__device__ void member_sums(const float* __restrict__ X, const int* __restrict__ label, int n, int k,
                            double* sums) {
    for (int ci = threadIdx.x; ci < k * D; ci += THREADS) {
        const int c = ci / D, i = ci - c * D;
        double s = 0.0;
        for (int p = 0; p < n; ++p)
            if (label[p] == c) s += (double)X[(size_t)p * D + i];
        sums[ci] = s;
    }
}

// X (n, D) row-major; first: the first centre's row; u (k - 1): the seeding draws in [0, 1);
// xx, d2 (n): scratch; C (k, D) out; label (n) out; count (k) out; ssq (k) out: summed squared
// distances of each centre's members to it (after the last update, to the last assignment)
extern "C" __global__ void __launch_bounds__(THREADS)
hyperapp_kmeans_small(const float* __restrict__ X, int n, int k, int first, const double* __restrict__ u,
                      int n_iter, double* __restrict__ xx, double* __restrict__ d2, float* __restrict__ C,
                      int* __restrict__ label, int* __restrict__ count, double* __restrict__ ssq) {
    extern __shared__ double smem_d[];
    double* sums = smem_d;               // k * D: member sums of the iteration
    double* cs = sums + (size_t)k * D;   // k * D: the centres (float32 values held as double)
    double* cc = cs + (size_t)k * D;     // k: their squared norms
    int* cnt = (int*)(cc + k);           // k
    __shared__ double warp_tot[WARPS];
    __shared__ double total;
    __shared__ int pick;
    __shared__ int moved;
    const int tid = threadIdx.x;

    // ---- k-means++ seeding
    for (int i = tid; i < D; i += THREADS) cs[i] = (double)X[(size_t)first * D + i];
    __syncthreads();
    if (tid == 0) cc[0] = sq_norm(X + (size_t)first * D);
    __syncthreads();
    for (int p = tid; p < n; p += THREADS) {
        xx[p] = sq_norm(X + (size_t)p * D);
        d2[p] = sq_dist(X + (size_t)p * D, xx[p], cs, cc[0]);
    }
    const int chunk = (n + THREADS - 1) / THREADS;
    const int lo = min(n, tid * chunk), hi = min(n, lo + chunk);
    for (int j = 1; j < k; ++j) {
        __syncthreads();  // d2 complete
        double part = 0.0;
        for (int p = lo; p < hi; ++p) part += d2[p];
        const double before = block_exclusive_scan(part, warp_tot, &total);
        if (tid == 0) pick = n - 1;
        __syncthreads();
        const double tot = total;
        if (tot > 0.0) {
            const double target = u[j - 1] * tot;
            if (before <= target && before + part > target) {
                double run = before;
                for (int p = lo; p < hi; ++p) {
                    run += d2[p];
                    if (run > target) {
                        atomicMin(&pick, p);
                        break;
                    }
                }
            }
        } else if (tid == 0) {
            pick = min((int)(u[j - 1] * n), n - 1);
        }
        __syncthreads();
        const int nxt = pick;
        for (int i = tid; i < D; i += THREADS) cs[(size_t)j * D + i] = (double)X[(size_t)nxt * D + i];
        if (tid == 0) cc[j] = sq_norm(X + (size_t)nxt * D);
        __syncthreads();
        for (int p = tid; p < n; p += THREADS)
            d2[p] = fmin(d2[p], sq_dist(X + (size_t)p * D, xx[p], cs + (size_t)j * D, cc[j]));
    }
    __syncthreads();

    // ---- Lloyd iterations (labels start at 0, as the host path's)
    for (int p = tid; p < n; p += THREADS) label[p] = 0;
    for (int it = 0; it < n_iter; ++it) {
        for (int i = tid; i < k; i += THREADS) cnt[i] = 0;
        if (tid == 0) moved = 0;
        __syncthreads();
        for (int p = tid; p < n; p += THREADS) {
            // the arg-min needs only ||c||^2 - 2 x.c (||x||^2 is the same for every centre)
            const float* x = X + (size_t)p * D;
            double best = cc[0] - 2.0 * dot(x, cs);
            int arg = 0;
            for (int c = 1; c < k; ++c) {
                const double v = cc[c] - 2.0 * dot(x, cs + (size_t)c * D);
                if (v < best) {
                    best = v;
                    arg = c;
                }
            }
            label[p] = arg;
            atomicAdd(&cnt[arg], 1);
        }
        __syncthreads();
        // member sums: one thread per (centre, coordinate) walks the points in order, so each sum is
        // the sequential float64 sum numpy.bincount makes (and no thread waits on a contended atomic)
        member_sums(X, label, n, k, sums);
        __syncthreads();
        // new centres (rounded to float32, as the host path keeps them); an emptied centre stays where
        // it was; converged when every coordinate moved at most 1e-8 + 1e-5 |old| (numpy.allclose's
        // test, as the host path)
        for (int i = tid; i < k * D; i += THREADS) {
            const int c = i / D;
            if (cnt[c] > 0) {
                const float old = (float)cs[i];
                const float nv = (float)(sums[i] / (double)cnt[c]);
                if (!(fabsf(nv - old) <= 1e-8f + 1e-5f * fabsf(old))) moved = 1;
                cs[i] = (double)nv;
            }
        }
        __syncthreads();
        for (int c = tid; c < k; c += THREADS) {
            double q = 0.0;
            for (int i = 0; i < D; ++i) q += cs[(size_t)c * D + i] * cs[(size_t)c * D + i];
            cc[c] = q;
        }
        const bool done = !moved;
        __syncthreads();  // every thread has read the flag and cc before the next iteration
        if (done) break;
    }

    // ---- outputs: centres, counts and each centre's summed squared member distance (differences,
    // one thread per centre over the points in order)
    for (int c = tid; c < k; c += THREADS) {
        double q = 0.0;
        for (int p = 0; p < n; ++p) {
            if (label[p] != c) continue;
            double sp = 0.0;
#pragma unroll
            for (int i = 0; i < D; ++i) {
                const double t = (double)X[(size_t)p * D + i] - cs[(size_t)c * D + i];
                sp += t * t;
            }
            q += sp;
        }
        sums[c] = q;
    }
    __syncthreads();
    for (int i = tid; i < k * D; i += THREADS) C[i] = (float)cs[i];
    for (int i = tid; i < k; i += THREADS) {
        ssq[i] = sums[i];
        count[i] = 0;
    }
    __syncthreads();
    for (int p = tid; p < n; p += THREADS) atomicAdd(&count[label[p]], 1);
}
