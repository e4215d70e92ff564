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
// hac_merge runs every merge in one launch of one block (1024 threads): each merge is a few
// block-wide passes over a row (threads stride over columns, coalesced) separated by __syncthreads,
// with no kernel launch or host round trip per merge.

#define SINGLE 0
#define COMPLETE 1
#define AVERAGE 2
#define WARD 3

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
    double bd = INFINITY;
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

// Every merge. Z (n-1, 4) gets SciPy's rows: the two cluster ids (smaller first), the height and the
// new cluster's size. size[k] = 0 marks a merged-away cluster; todo is scratch for n ints.
extern "C" __global__ void hac_merge(double* __restrict__ D, int n, int method, int* __restrict__ nn,
                                     double* __restrict__ nnd, int* __restrict__ size, int* __restrict__ label,
                                     int* __restrict__ todo, double* __restrict__ Z) {
    __shared__ double sd[1024];
    __shared__ int si[1024];
    __shared__ int n_todo;
    for (int step = 0; step < n - 1; ++step) {
        // 1. the closest pair: the smallest nearest-neighbour distance
        double bd = INFINITY;
        int bi = 0x7fffffff;
        for (int k = threadIdx.x; k < n; k += blockDim.x)
            if (size[k] > 0) better(bd, bi, nnd[k], k);
        block_argmin(sd, si, bd, bi);
        int a = si[0];
        double h = sd[0];
        int b = nn[a];
        int i = min(a, b), j = max(a, b);  // the merged cluster keeps the lower slot
        double s_i = size[i], s_j = size[j];
        __syncthreads();
        if (threadIdx.x == 0) {
            int la = label[i], lb = label[j];
            Z[4LL * step + 0] = min(la, lb);
            Z[4LL * step + 1] = max(la, lb);
            Z[4LL * step + 2] = h;
            Z[4LL * step + 3] = s_i + s_j;
            n_todo = 0;
        }
        __syncthreads();
        // 2. the merged cluster's distances (row and column i), and the rows whose neighbour moved
        double* ri = D + (long long)i * n;
        const double* rj = D + (long long)j * n;
        bd = INFINITY;
        bi = 0x7fffffff;
        for (int k = threadIdx.x; k < n; k += blockDim.x) {
            if (size[k] == 0 || k == i || k == j) continue;
            double d = lance_williams(method, ri[k], rj[k], h, s_i, s_j, (double)size[k]);
            ri[k] = d;
            D[(long long)k * n + i] = d;
            better(bd, bi, d, k);
            int t = nn[k];
            if (t == i || t == j) {
                if (d <= nnd[k]) { nn[k] = i; nnd[k] = d; }  // still (or now) the merged cluster
                else todo[atomicAdd(&n_todo, 1)] = k;  // farther now: find its nearest again
            } else if (d < nnd[k]) {
                nn[k] = i; nnd[k] = d;
            }
        }
        block_argmin(sd, si, bd, bi);
        if (threadIdx.x == 0) {
            nn[i] = si[0];
            nnd[i] = sd[0];
            size[i] = (int)(s_i + s_j);
            size[j] = 0;
            nnd[j] = INFINITY;
            label[i] = n + step;
        }
        __syncthreads();
        // 3. rescan the rows that lost their nearest neighbour
        int count = n_todo;
        for (int q = 0; q < count; ++q) {
            int k = todo[q];
            const double* rk = D + (long long)k * n;
            bd = INFINITY;
            bi = 0x7fffffff;
            for (int c = threadIdx.x; c < n; c += blockDim.x)
                if (size[c] > 0 && c != k) better(bd, bi, rk[c], c);
            block_argmin(sd, si, bd, bi);
            if (threadIdx.x == 0) { nn[k] = si[0]; nnd[k] = sd[0]; }
            __syncthreads();
        }
    }
}
