// A small k-means in one launch: k-means++ seeding and Lloyd iterations of a few thousand points
// (the RBFN's background centres, models/kmeans.py:kmeans_small), the whole run inside one block.
//
// Why one block: every seeding round and Lloyd step depends on the one before. As separate launches
// with a host draw between them, the run cost ~30 seeding round trips (6-7 ms on the host); inside a
// block each step is a __syncthreads.
//
// Layout and thread mapping (THREADS threads). The points come transposed, XT (D, n): thread t takes
// points p = t, t + THREADS, ..., so for each coordinate a warp reads 32 consecutive floats (one
// coalesced 128-byte line; row-major points made every load touch 32 lines, and a seeding round cost
// ~36 us instead of a few). A thread keeps its point's D coordinates in registers while it compares
// it with every centre (centres in shared memory, read as broadcasts).
//   Seeding: each round updates d2 (the squared distance to the nearest centre so far) point by
//   point, then every thread sums a contiguous chunk of d2, the chunk sums are scanned across the
//   block (warp shuffles), and the thread whose chunk holds the drawn value walks it: the drawn
//   point is the first whose running sum exceeds u * total, as numpy.searchsorted(cumsum,
//   side="right") on the host.
//   Member sums, counts and spreads: the assignment pass counts each centre's members (integer
//   shared atomics), a counting sort lists the members of each centre (perm), and warp w takes
//   centres c = w, w + WARPS, ...: its lanes walk that centre's members 32 at a time, add in float64
//   registers, and the warp reduces with shuffles. Measured on the H100 (4000 points, k 31): float64
//   shared-memory atomics instead cost 0.37 ms per iteration (they are compare-and-swap loops),
//   a warp per centre walking every point 0.11 ms (memory latency n / 32 times over).
//
// Agreement with the NumPy path (same function, same random numbers): distances, cumulative sums,
// centre sums and the member spread are float64 (the expansion ||x||^2 - 2 x.c + ||c||^2 loses
// nothing that matters in float64, where in float32 it let near-equidistant points fall differently
// on the two backends); centres are rounded to float32 after each update, as the host keeps them.
// Ties go to the first centre, as numpy.argmin. Members are listed in no fixed order, which moves a
// float64 sum by ~1e-16 relative from NumPy's: the float32 centres come out the same.
//
// Dimensions: D is a runtime argument; the template parameter DMAX (8, 16, 32 or 64, from a fixed set,
// never the data's dimension) is how many coordinates a thread keeps in registers, the rest being zero;
// DMAX 0 keeps none and reads the coordinates from XT (L1/L2) at each use, for wider points. So no
// point dimension compiles a kernel of its own. Dynamic shared memory: 2 k D + k doubles (sums,
// centres, their squared norms) + 3 k ints (counts, member offsets, fill counters).

#define THREADS 1024
#define WARPS (THREADS / 32)

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// exclusive prefix sum of one double per thread across the block; the block total goes to *total
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
    return (w > 0 ? warp_tot[w - 1] : 0.0) + incl - v;
}

// One thread's point: its coordinates in registers (DMAX > 0; those past D are zero), or where to read them
template <int DMAX>
struct Point {
    float x[DMAX > 0 ? DMAX : 1];
    const float* __restrict__ XT;
    int n, p, D;
    __device__ __forceinline__ void load(const float* __restrict__ XT_, int n_, int p_, int D_) {
        XT = XT_; n = n_; p = p_; D = D_;
        if (DMAX > 0) {
#pragma unroll
            for (int i = 0; i < DMAX; ++i) x[i] = i < D ? XT[(size_t)i * n + p] : 0.0f;
        }
    }
    __device__ __forceinline__ float at(int i) const { return DMAX > 0 ? x[i] : XT[(size_t)i * n + p]; }
    __device__ __forceinline__ double dot(const double* c) const {
        double s = 0.0;
        if (DMAX > 0) {
#pragma unroll
            for (int i = 0; i < DMAX; ++i)
                if (i < D) s += (double)x[i] * c[i];
        } else {
            for (int i = 0; i < D; ++i) s += (double)at(i) * c[i];
        }
        return s;
    }
    __device__ __forceinline__ double sq_norm() const {
        double s = 0.0;
        if (DMAX > 0) {
#pragma unroll
            for (int i = 0; i < DMAX; ++i) s += (double)x[i] * (double)x[i];
        } else {
            for (int i = 0; i < D; ++i) s += (double)at(i) * (double)at(i);
        }
        return s;
    }
};

// centre j := point p (as double), and its squared norm; one warp
__device__ __forceinline__ void set_centre(const float* __restrict__ XT, int n, int D, int p, double* c, double* cc) {
    const int lane = threadIdx.x & 31;
    double q = 0.0;
    for (int i = lane; i < D; i += 32) {
        const double v = (double)XT[(size_t)i * n + p];
        c[i] = v;
        q += v * v;
    }
    q = warp_sum(q);
    if (lane == 0) *cc = q;
}

#define DC 8  // coordinates a lane adds up at once in the member sums (float64 registers)

// perm := the points grouped by centre (centre c's members at perm[off[c] .. off[c] + cnt[c] - 1],
// in no fixed order), from the labels and the counts; off, fill: k ints of shared memory
__device__ void group_members(const int* __restrict__ label, int n, int k, const int* cnt, int* off,
                              int* fill, int* __restrict__ perm) {
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int c = 0; c < k; ++c) {
            off[c] = acc;
            acc += cnt[c];
        }
    }
    for (int c = threadIdx.x; c < k; c += THREADS) fill[c] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < n; p += THREADS) {
        const int c = label[p];
        perm[off[c] + atomicAdd(&fill[c], 1)] = p;
    }
    __syncthreads();
}

// warp w takes centres c = w, w + WARPS, ...; its lanes walk the centre's members 32 at a time and
// add in float64 registers, then the warp reduces with shuffles. mode 0: coordinate sums into
// sums[c * D + i]; mode 1: summed squared distances to the centre cs[c] into sums[c]
__device__ void member_sums(const float* __restrict__ XT, int n, int D, int k, const int* __restrict__ perm,
                            const int* off, const int* cnt, const double* cs, double* sums, int mode) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int c = w; c < k; c += WARPS) {
        const int* mem = perm + off[c];
        const int m = cnt[c];
        if (mode == 0) {
            for (int i0 = 0; i0 < D; i0 += DC) {
                double acc[DC];
#pragma unroll
                for (int j = 0; j < DC; ++j) acc[j] = 0.0;
                for (int q = lane; q < m; q += 32) {
                    const int p = mem[q];
#pragma unroll
                    for (int j = 0; j < DC; ++j)
                        if (i0 + j < D) acc[j] += (double)XT[(size_t)(i0 + j) * n + p];
                }
#pragma unroll
                for (int j = 0; j < DC; ++j) {
                    const double v = warp_sum(acc[j]);
                    if (lane == 0 && i0 + j < D) sums[(size_t)c * D + i0 + j] = v;
                }
            }
        } else {
            double acc = 0.0;
            for (int q = lane; q < m; q += 32) {
                const int p = mem[q];
                double sp = 0.0;
#pragma unroll
                for (int i = 0; i < D; ++i) {
                    const double t = (double)XT[(size_t)i * n + p] - cs[(size_t)c * D + i];
                    sp += t * t;
                }
                acc += sp;
            }
            acc = warp_sum(acc);
            if (lane == 0) sums[c] = acc;
        }
    }
}

// XT (D, n): the points, transposed, D of them per point; first: the first centre; u (k - 1): the seeding draws in
// [0, 1); xx, d2 (n doubles), perm (n ints): scratch; C (k, D) out; label (n) out; count (k) out;
// ssq (k) out: each centre's summed squared member distance (after the last update, to the last
// assignment)
template <int DMAX>
__global__ void __launch_bounds__(THREADS)
hyperapp_kmeans_small(const float* __restrict__ XT, int n, int D, int k, int first, const double* __restrict__ u,
                      int n_iter, double* __restrict__ xx, double* __restrict__ d2, int* __restrict__ perm,
                      float* __restrict__ C, int* __restrict__ label, int* __restrict__ count,
                      double* __restrict__ ssq) {
    extern __shared__ double smem_d[];
    double* sums = smem_d;               // k * D: member sums of the iteration
    double* cs = sums + (size_t)k * D;   // k * D: the centres (float32 values held as double)
    double* cc = cs + (size_t)k * D;     // k: their squared norms
    int* cnt = (int*)(cc + k);           // k: members per centre
    int* off = cnt + k;                  // k: where each centre's members start in perm
    int* fill = off + k;                 // k
    __shared__ double warp_tot[WARPS];
    __shared__ double total;
    __shared__ int pick;
    __shared__ int moved;
    const int tid = threadIdx.x;
    Point<DMAX> x;

    // ---- k-means++ seeding
    if (tid < 32) set_centre(XT, n, D, first, cs, cc);
    __syncthreads();
    for (int p = tid; p < n; p += THREADS) {
        x.load(XT, n, p, D);
        const double q = x.sq_norm();
        xx[p] = q;
        d2[p] = fmax(q - 2.0 * x.dot(cs) + cc[0], 0.0);
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
        if (tid < 32) set_centre(XT, n, D, pick, cs + (size_t)j * D, cc + j);
        __syncthreads();
        const double* c = cs + (size_t)j * D;
        for (int p = tid; p < n; p += THREADS) {
            x.load(XT, n, p, D);
            d2[p] = fmin(d2[p], fmax(xx[p] - 2.0 * x.dot(c) + cc[j], 0.0));
        }
    }
    __syncthreads();

    // ---- Lloyd iterations (labels start at 0, as the host path's)
    for (int p = tid; p < n; p += THREADS) label[p] = 0;
    for (int it = 0; it < n_iter; ++it) {
        if (tid == 0) moved = 0;
        for (int i = tid; i < k; i += THREADS) cnt[i] = 0;
        __syncthreads();
        for (int p = tid; p < n; p += THREADS) {
            // the arg-min needs only ||c||^2 - 2 x.c (||x||^2 is the same for every centre)
            x.load(XT, n, p, D);
            double best = cc[0] - 2.0 * x.dot(cs);
            int arg = 0;
            for (int c = 1; c < k; ++c) {
                const double v = cc[c] - 2.0 * x.dot(cs + (size_t)c * D);
                if (v < best) {
                    best = v;
                    arg = c;
                }
            }
            label[p] = arg;
            atomicAdd(&cnt[arg], 1);
        }
        __syncthreads();
        group_members(label, n, k, cnt, off, fill, perm);
        member_sums(XT, n, D, k, perm, off, cnt, cs, sums, 0);
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
        __syncthreads();  // every thread has read the flag and the norms before the next iteration
        if (done) break;
    }

    // ---- outputs: centres, counts (of the last assignment) and each centre's member spread
    if (n_iter == 0) {  // no assignment was made: every point is labelled 0
        for (int i = tid; i < k; i += THREADS) cnt[i] = i == 0 ? n : 0;
        __syncthreads();
        group_members(label, n, k, cnt, off, fill, perm);
    }
    member_sums(XT, n, D, k, perm, off, cnt, cs, sums, 1);
    __syncthreads();
    for (int i = tid; i < k * D; i += THREADS) C[i] = (float)cs[i];
    for (int i = tid; i < k; i += THREADS) {
        ssq[i] = sums[i];
        count[i] = cnt[i];
    }
}
