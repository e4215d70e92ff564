// The default threshold's test for a separate mode of targets atop the scores
// (hyperapp.models.evaluation._mode_split), one test in three launches and one copy of a few numbers.
//
// ``asc`` holds the n used scores ascending; the test reads its top as ``top``, descending:
// top[t] = asc[n - 1 - t]. A test at ``start`` looks at the window w = top[start .. start + k], its
// spacings gaps[i] = w[i] - w[i + 1] and their normalised form D[i] = gaps[i] (i + 1), i < k, in double.
// hyperapp_mode_spacings writes D; CuPy sorts a copy of it (the median of the spacings that are not ties);
// hyperapp_mode_pick reads the largest eligible spacing, the count of those that are not ties and every
// score the host's decision needs, and writes them to one small buffer that the host copies once. The
// CuPy formulation was two copies a test and about a dozen launches, each tens of microseconds of a host
// that the live click waits for.
//
// The spacings round as NumPy's ufuncs do (a subtraction, then a product: __dsub_rn and __dmul_rn, never
// contracted), so the numbers equal the NumPy path's to the bit.

template <typename T>
__device__ __forceinline__ double top_at(const T* __restrict__ asc, long long n, long long t)
{
    return (double)asc[n - 1 - t];
}

// Thread mapping: a grid-stride loop, one spacing per thread per step.
template <typename T>
__global__ void hyperapp_mode_spacings(const T* __restrict__ asc, const long long n, const long long start,
                                       const long long k, double* __restrict__ D)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < k;
         i += (long long)gridDim.x * blockDim.x) {
        const double gap = __dsub_rn(top_at<T>(asc, n, start + i), top_at<T>(asc, n, start + i + 1));
        D[i] = __dmul_rn(gap, (double)(i + 1));
    }
}

#define PICK_THREADS 1024

// One block of PICK_THREADS threads: each scans a strided share of D for its largest eligible spacing
// (the first index among equals, as numpy.argmax) and its count of spacings that are not 0; a tree in
// shared memory combines them, and thread 0 writes
// out = [i, nz, median, D[j], gaps[j], w[first], w[k], top[b0], top[b1], top[b0 - 1], asc[e0], ...]
// (j = first + i, b0 = start + j + 1, b1 = min(b0 + first, m - 1), median = sorted[min(k - nz + nz / 2, k - 1)]),
// as _mode_split reads them, then the scores at up to four further places e0.. of ``asc`` (``n_extra``)
// that the host asks with the test (the quantiles its answer may need).
template <typename T>
__global__ void __launch_bounds__(PICK_THREADS) hyperapp_mode_pick(
    const T* __restrict__ asc, const long long n, const long long m, const long long start, const long long k,
    const long long first, const double* __restrict__ D, const double* __restrict__ sorted, const int n_extra,
    const long long e0, const long long e1, const long long e2, const long long e3, double* __restrict__ out)
{
    __shared__ double best[PICK_THREADS];
    __shared__ long long where[PICK_THREADS];
    __shared__ long long nonzero[PICK_THREADS];
    double b = -1.0;  // D >= 0: any spacing beats it
    long long w = -1, nz = 0;
    for (long long i = threadIdx.x; i < k; i += PICK_THREADS) {
        const double d = D[i];
        nz += d != 0.0;
        if (i >= first && d > b) { b = d; w = i; }  // (ascending i per thread: the first of equals stays)
    }
    best[threadIdx.x] = b;
    where[threadIdx.x] = w;
    nonzero[threadIdx.x] = nz;
    __syncthreads();
    for (int s = PICK_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const double ob = best[threadIdx.x + s];
            const long long ow = where[threadIdx.x + s];
            // the larger spacing; of equals, the lower index (-1: none seen)
            if (ow >= 0 && (where[threadIdx.x] < 0 || ob > best[threadIdx.x]
                            || (ob == best[threadIdx.x] && ow < where[threadIdx.x]))) {
                best[threadIdx.x] = ob;
                where[threadIdx.x] = ow;
            }
            nonzero[threadIdx.x] += nonzero[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const long long j = where[0], z = nonzero[0];
        long long mi = k - z + z / 2;
        if (mi > k - 1) mi = k - 1;
        const long long b0 = start + j + 1;
        const long long b1 = b0 + first < m - 1 ? b0 + first : m - 1;
        out[0] = (double)(j - first);
        out[1] = (double)z;
        out[2] = sorted[mi];
        out[3] = D[j];
        out[4] = __dsub_rn(top_at<T>(asc, n, start + j), top_at<T>(asc, n, start + j + 1));
        out[5] = top_at<T>(asc, n, start + first);
        out[6] = top_at<T>(asc, n, start + k);
        out[7] = top_at<T>(asc, n, b0);
        out[8] = top_at<T>(asc, n, b1);
        out[9] = top_at<T>(asc, n, b0 - 1);
        const long long extra[4] = {e0, e1, e2, e3};
        for (int e = 0; e < n_extra && e < 4; ++e) out[10 + e] = (double)asc[extra[e]];
    }
}
