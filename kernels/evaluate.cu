// hyperapp_auc_counts: the evaluation's counts (hyperapp.models.evaluation._evaluate_device) in one launch.
//
// srt holds the n_neg non-target scores ascending, then +inf padding (n_neg is read on the device: it is
// the count of a boolean map, not yet on the host). For each looked-up pixel i with pos[i], the kernel
// adds to out[0] the non-targets below s[i] plus those not above it (2U of the Mann-Whitney statistic:
// two binary searches, as numpy.searchsorted's left and right sides), and to out[1] and out[2] whether
// s[i] exceeds the score above which lies a fraction far1 (far2) of the non-targets (evaluation._at_far).
// The CuPy formulation of the same counts was about fifty launches, each a few microseconds of the
// host's time on a click that waits for the host.
//
// Thread mapping: a grid-stride loop, one pixel per thread per step; each block sums its counts in
// shared memory and adds them to out with one atomicAdd per counter.

template <typename T>
__device__ __forceinline__ long long lower_bound(const T* __restrict__ a, long long n, T v)
{
    long long lo = 0, hi = n;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

template <typename T>
__device__ __forceinline__ long long upper_bound(const T* __restrict__ a, long long n, T v)
{
    long long lo = 0, hi = n;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (a[mid] <= v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

template <typename T>
__device__ __forceinline__ long long far_index(long long n, double far)
{
    // _at_far: n - 1 - min(floor(far n), n - 1), with 0 where there is no non-target
    const long long last = n > 1 ? n - 1 : 0;
    const long long k = (long long)floor(far * (double)n);
    return last - (k < last ? k : last);
}

// One target's share of the counts: the non-targets below its score v plus those not above it (2U), and
// whether v exceeds each Pd threshold (t1, t2).
template <typename T>
__device__ __forceinline__ void add_target(const T* __restrict__ srt, long long n, T v, T t1, T t2,
                                           unsigned long long& u2, unsigned long long& c1, unsigned long long& c2)
{
    u2 += (unsigned long long)(lower_bound<T>(srt, n, v) + upper_bound<T>(srt, n, v));
    c1 += v > t1;
    c2 += v > t2;
}

// The block's sums of (2U, c1, c2) into out[0..2], one atomicAdd per counter (``acc``: the block's
// shared counters, zeroed before the loop).
__device__ __forceinline__ void flush_counts(unsigned long long* acc, unsigned long long u2, unsigned long long c1,
                                             unsigned long long c2, unsigned long long* __restrict__ out)
{
    atomicAdd(&acc[0], u2);
    atomicAdd(&acc[1], c1);
    atomicAdd(&acc[2], c2);
    __syncthreads();
    if (threadIdx.x < 3) atomicAdd(&out[threadIdx.x], acc[threadIdx.x]);
}

template <typename T>
__global__ void __launch_bounds__(256) hyperapp_auc_counts(
    const T* __restrict__ srt, const long long* __restrict__ n_neg, const T* __restrict__ s,
    const bool* __restrict__ pos, const long long m, const double far1, const double far2,
    unsigned long long* __restrict__ out)
{
    __shared__ unsigned long long acc[3];
    if (threadIdx.x < 3) acc[threadIdx.x] = 0ULL;
    __syncthreads();
    const long long n = *n_neg;
    const T t1 = srt[far_index<T>(n, far1)];
    const T t2 = srt[far_index<T>(n, far2)];
    unsigned long long u2 = 0ULL, c1 = 0ULL, c2 = 0ULL;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x) {
        if (pos[i]) add_target<T>(srt, n, s[i], t1, t2, u2, c1, c2);
    }
    flush_counts(acc, u2, c1, c2, out);
}

// The same counts at a run's end (hyperapp.models.evaluation.labelled_evaluation_counts), from the run's
// labels instead of masks built from them: a pixel counts where its score is finite and its label
// (int8) is neither a clicked target (1) nor no data (-2); the truth's targets are the pixels at
// ``positives``. hyperapp_negatives writes each pixel's score where it counts as a non-target and +inf
// elsewhere (the caller then sets the truth's pixels to +inf and sorts); hyperapp_auc_labelled looks up
// the truth's pixels in that sorted array and adds, beside hyperapp_auc_counts' three counts, the
// targets that count and the non-targets (the sorted array's finite prefix, found by one binary search
// per block): out = [2U, c1, c2, n_truth, n_pos, n_neg]. The masks' formulation was about thirty launches.
//
// Thread mapping: hyperapp_negatives one pixel per thread (grid-stride); hyperapp_auc_labelled as
// hyperapp_auc_counts, one truth pixel per thread.

__device__ __forceinline__ bool counts_here(const signed char label) { return label != 1 && label != -2; }

template <typename T>
__global__ void hyperapp_negatives(const T* __restrict__ s, const signed char* __restrict__ labels, const long long n,
                                   T* __restrict__ out)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const T v = s[i];
        out[i] = (isfinite(v) && counts_here(labels[i])) ? v : (T)__int_as_float(0x7f800000);
    }
}

template <typename T>
__global__ void __launch_bounds__(256) hyperapp_auc_labelled(
    const T* __restrict__ srt, const long long n_all, const T* __restrict__ s, const signed char* __restrict__ labels,
    const long long* __restrict__ positives, const long long m, const double far1, const double far2,
    const unsigned long long n_truth, unsigned long long* __restrict__ out)
{
    __shared__ unsigned long long acc[4];
    if (threadIdx.x < 4) acc[threadIdx.x] = 0ULL;
    __syncthreads();
    const long long n = lower_bound<T>(srt, n_all, (T)__int_as_float(0x7f800000));  // the finite prefix: the non-targets
    const T t1 = srt[far_index<T>(n, far1)];
    const T t2 = srt[far_index<T>(n, far2)];
    unsigned long long u2 = 0ULL, c1 = 0ULL, c2 = 0ULL, np_ = 0ULL;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += (long long)gridDim.x * blockDim.x) {
        const long long p = positives[i];
        const T v = s[p];
        if (!(isfinite(v) && counts_here(labels[p]))) continue;
        ++np_;
        add_target<T>(srt, n, v, t1, t2, u2, c1, c2);
    }
    atomicAdd(&acc[3], np_);
    flush_counts(acc, u2, c1, c2, out);
    if (threadIdx.x == 3) atomicAdd(&out[4], acc[3]);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[3] = n_truth;
        out[5] = (unsigned long long)n;
    }
}
