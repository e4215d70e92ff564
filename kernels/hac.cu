// Agglomerative clustering (seed 004) on a stored distance matrix, with a nearest-neighbour array.
//
// D is the full symmetric (n x n) float64 matrix, +inf on the diagonal. nn[k] / nnd[k] hold every
// active cluster's nearest active neighbour and its distance. Each merge takes the global minimum of
// nnd (the closest pair), updates the merged cluster's row and column by the Lance-Williams formula
// of the linkage (SciPy's, so heights match scipy.cluster.hierarchy.linkage), and rescans only the rows
// whose nearest neighbour was one of the merged pair. For the reducible linkages here (single,
// complete, average, Ward) a merged cluster is never closer to a third one than the nearer of its two
// parts was, so no other row's nearest neighbour can change: a merge costs O(n) plus one O(n) scan per
// affected row, instead of the O(n^2) search of a plain matrix method.
//
// hac_merge runs every merge in one launch of a persistent kernel, one block per SM: each merge is
// three grid-wide phases over rows (threads stride over columns, coalesced) separated by a grid
// barrier, with no kernel launch or host round trip per merge.

#define SINGLE 0
#define COMPLETE 1
#define AVERAGE 2
#define WARD 3
#define HAC_INF __longlong_as_double(0x7ff0000000000000LL)

__device__ __forceinline__ void better(double& bd, int& bi, double d, int i) {
    if (d < bd || (d == bd && i < bi)) { bd = d; bi = i; }
}

// Block-wide arg-min of (value, index) pairs held one per thread; result in sd[0], si[0].
__device__ void block_argmin(double* sd, int* si, double d, int i) {
    sd[threadIdx.x] = d;
    si[threadIdx.x] = i;
    __syncthreads();
    for (int step = blockDim.x >> 1; step > 0; step >>= 1) {
        if (threadIdx.x < step) better(sd[threadIdx.x], si[threadIdx.x], sd[threadIdx.x + step], si[threadIdx.x + step]);
        __syncthreads();
    }
}

// Nearest neighbour of every row: one block per row.
extern "C" __global__ void hac_row_nn(const double* __restrict__ D, int n, int* __restrict__ nn,
                                      double* __restrict__ nnd) {
    __shared__ double sd[256];
    __shared__ int si[256];
    int r = blockIdx.x;
    const double* row = D + (long long)r * n;
    double bd = HAC_INF;
    int bi = 0x7fffffff;
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        if (c != r) better(bd, bi, row[c], c);
    block_argmin(sd, si, bd, bi);
    if (threadIdx.x == 0) { nn[r] = si[0]; nnd[r] = sd[0]; }
}

__device__ __forceinline__ double lance_williams(int method, double dxi, double dyi, double dxy,
                                                 double sx, double sy, double si) {
    switch (method) {
        case SINGLE: return fmin(dxi, dyi);
        case COMPLETE: return fmax(dxi, dyi);
        case AVERAGE: return (sx * dxi + sy * dyi) / (sx + sy);
        default: {
            double t = 1.0 / (sx + sy + si);
            return sqrt((si + sx) * t * dxi * dxi + (si + sy) * t * dyi * dyi - si * t * dxy * dxy);
        }
    }
}

// Grid-wide barrier for a persistent kernel whose blocks are all resident (one per SM, launched
// with no more blocks than SMs): the last block to arrive bumps the generation the others spin on.
__device__ void grid_barrier(unsigned int* count, volatile unsigned int* gen, unsigned int nblocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int g = *gen;
        __threadfence();
        if (atomicAdd(count, 1u) == nblocks - 1) {
            *count = 0;
            __threadfence();
            atomicAdd((unsigned int*)gen, 1u);
        } else {
            while (*gen == g) { }
        }
        __threadfence();
    }
    __syncthreads();
}

// Every merge, by every SM. Z (n-1, 4) gets SciPy's rows: the two cluster ids (smaller first), the
// height and the new cluster's size. A merged-away cluster j gets size 0, nnd[j] = +inf and +inf in its
// column, so every scan is a plain arg-min with no activity test (the diagonal is +inf too).
//
// Each merge is three grid-wide phases: (A) every block takes the arg-min of its slice of nnd; (B/C)
// every block reduces those partials to the same closest pair (i, j), updates its slice of the merged
// row and column by Lance-Williams (spreading the column's scattered writes over all SMs) and notes the
// rows that lost their nearest neighbour; (D) block 0 finishes the merged cluster while the blocks
// rescan the noted rows, one row per block. Data other blocks wrote are read with __ldcg (L2, never a
// stale L1 line). part_* hold per-block partials (2 x blocks); todo is scratch for n ints; bar holds
// the barrier's counter and generation and the two alternating todo counters.
extern "C" __global__ void __launch_bounds__(512, 1) hac_merge(double* D, int n, int method, int* nn, double* nnd,
                                                                int* size, int* label, int* todo, double* Z,
                                                                double* part_d, int* part_i, unsigned int* bar) {
    __shared__ double sd[512];
    __shared__ int si[512];
    const unsigned int G = gridDim.x;
    const int chunk = (n + G - 1) / G;
    const int lo = blockIdx.x * chunk, hi = min(n, lo + chunk);
    unsigned int* n_todo = bar + 2;
    for (int step = 0; step < n - 1; ++step) {
        // A. partial arg-min of nnd over this block's slice
        double bd = HAC_INF;
        int bi = 0x7fffffff;
        for (int k = lo + threadIdx.x; k < hi; k += blockDim.x) better(bd, bi, __ldcg(nnd + k), k);
        block_argmin(sd, si, bd, bi);
        if (threadIdx.x == 0) { part_d[blockIdx.x] = sd[0]; part_i[blockIdx.x] = si[0]; }
        grid_barrier(bar, bar + 1, G);
        // B. every block finds the same closest pair
        bd = HAC_INF;
        bi = 0x7fffffff;
        for (int q = threadIdx.x; q < (int)G; q += blockDim.x) better(bd, bi, __ldcg(part_d + q), __ldcg(part_i + q));
        block_argmin(sd, si, bd, bi);
        const int a = si[0];
        const double h = sd[0];
        const int b = __ldcg(nn + a);
        const int i = min(a, b), j = max(a, b);  // the merged cluster keeps the lower slot
        const double s_i = __ldcg(size + i), s_j = __ldcg(size + j);
        __syncthreads();  // every thread has read sd[0] / si[0] before they are reused
        unsigned int* my_todo = n_todo + (step & 1);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            int la = __ldcg(label + i), lb = __ldcg(label + j);
            Z[4LL * step + 0] = min(la, lb);
            Z[4LL * step + 1] = max(la, lb);
            Z[4LL * step + 2] = h;
            Z[4LL * step + 3] = s_i + s_j;
            n_todo[(step + 1) & 1] = 0;  // the counter the next merge uses (last read before barrier A)
        }
        // C. this block's slice of the merged row and column
        double* ri = D + (long long)i * n;
        const double* rj = D + (long long)j * n;
        bd = HAC_INF;
        bi = 0x7fffffff;
        for (int k = lo + threadIdx.x; k < hi; k += blockDim.x) {
            int sk = __ldcg(size + k);
            if (sk == 0 || k == i || k == j) continue;
            double d = lance_williams(method, __ldcg(ri + k), __ldcg(rj + k), h, s_i, s_j, (double)sk);
            ri[k] = d;
            D[(long long)k * n + i] = d;
            D[(long long)k * n + j] = HAC_INF;
            better(bd, bi, d, k);
            int t = __ldcg(nn + k);
            double dn = __ldcg(nnd + k);
            if (t == i || t == j) {
                if (d <= dn) { nn[k] = i; nnd[k] = d; }  // still (or now) the merged cluster
                else todo[atomicAdd(my_todo, 1u)] = k;  // farther now: find its nearest again
            } else if (d < dn) {
                nn[k] = i; nnd[k] = d;
            }
        }
        block_argmin(sd, si, bd, bi);
        if (threadIdx.x == 0) { part_d[G + blockIdx.x] = sd[0]; part_i[G + blockIdx.x] = si[0]; }
        grid_barrier(bar, bar + 1, G);
        // D. block 0 closes the merge; the blocks rescan the rows that lost their nearest neighbour
        if (blockIdx.x == 0) {
            bd = HAC_INF;
            bi = 0x7fffffff;
            for (int q = threadIdx.x; q < (int)G; q += blockDim.x)
                better(bd, bi, __ldcg(part_d + G + q), __ldcg(part_i + G + q));
            block_argmin(sd, si, bd, bi);
            if (threadIdx.x == 0) {
                nn[i] = si[0];
                nnd[i] = sd[0];
                size[i] = (int)(s_i + s_j);
                size[j] = 0;
                nnd[j] = HAC_INF;
                ri[j] = HAC_INF;
                label[i] = n + step;
            }
            __syncthreads();
        }
        const int count = (int)__ldcg(my_todo);
        for (int q = blockIdx.x; q < count; q += G) {
            const int k = __ldcg(todo + q);
            const double* rk = D + (long long)k * n;
            bd = HAC_INF;
            bi = 0x7fffffff;
            for (int c = threadIdx.x; c < n; c += blockDim.x) better(bd, bi, __ldcg(rk + c), c);
            block_argmin(sd, si, bd, bi);
            if (threadIdx.x == 0) { nn[k] = si[0]; nnd[k] = sd[0]; }
            __syncthreads();
        }
        grid_barrier(bar, bar + 1, G);
    }
}
