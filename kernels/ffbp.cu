// Kernels of the multi-resolution FFBP window detector (hyperapp.models.ffbp).
//
// hyperapp_ffbp_block_stats: per-block sums and sums of squares of (x - ref) over BS x BS pixel blocks.
//   Thread mapping: one thread per (block, band); consecutive threads take consecutive bands of the same
//   block, so a warp reads 32 consecutive floats (128 bytes) of one pixel per load: coalesced. Each
//   thread walks the block's pixels with independent loads (unrolled by 8 to keep them in flight).
//   Memory traffic: the cube is read once (4 bytes per band per pixel); 8 bytes per band per block out.
//
// hyperapp_ffbp_level: one level of the window tree. One warp per live window: its lanes read the
//   window's per-band sums from the summed-area tables (4 corners x 2 tables x B bands, float64), form the
//   features (per-band std [and mean], the size class) scaled to [-1, 1], then run ANN-1 and ANN-2 (tansig
//   hidden layer, tansig output) a hidden neuron per lane with the weights in shared memory; lane 0
//   appends the outcome with atomics: an accepted box to the box list, or its children to the next
//   level's list. (A thread-per-window first version was latency-bound: a few thousand threads each
//   issuing ~2,500 dependent loads; 0.73 ms for the whole 1024 x 1024 x 64 search on an H100.)
//   The number of live windows stays on the device (n_in); the host launches enough threads for the
//   largest possible level and surplus threads exit, so no level needs a host round trip.
//   The network's shape (NB bands, NF features, NH hidden neurons, MEANSTD, SCALE) is a runtime argument
//   (a Shape), so a cube of a new band count compiles nothing; the networks and the warps' feature rows
//   live in dynamic shared memory (2 * NET_SIZE + WPB * NF floats). WPB warps per block and SCAN_CH (the
//   scans' run length) are compile-time tunables, the same for every cube.
//
// hyperapp_ffbp_search: the whole search after the statistics in one persistent launch (see there).

// FFBP_TIMING (a profiling build only, scripts/profile_ffbp.py): block 0 stamps the GPU's global timer
//   at the start of each phase into hyperapp_ffbp_times, and every block of the statistics kernel raises
//   slot 1 to its end time, so one search gives the time of each phase.
#ifndef FFBP_TIMING
#define FFBP_TIMING 0
#endif
#if FFBP_TIMING
__device__ unsigned long long hyperapp_ffbp_times[48];
__device__ __forceinline__ unsigned long long global_timer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define STAMP(k) do { if (blockIdx.x == 0 && threadIdx.x == 0) hyperapp_ffbp_times[k] = global_timer(); } while (0)
#define STAMP_LAST(k) do { if (threadIdx.x == 0) atomicMax(hyperapp_ffbp_times + (k), global_timer()); } while (0)
#else
#define STAMP(k) do {} while (0)
#define STAMP_LAST(k) do {} while (0)
#endif

// The block and band lane of statistics item idx: items run band lane fastest (`lanes` per block), then
// block column, then block row; the block's pixel rows [r0, r1) and columns [c0, c1) are clipped to the
// image.
struct BlockItem {
    int lane, r0, c0, r1, c1;
};

__device__ __forceinline__ BlockItem block_item(long long idx, int lanes, int nbc, int bs, int R, int C)
{
    const long long blk = idx / lanes;
    const int r0 = (int)(blk / nbc) * bs, c0 = (int)(blk % nbc) * bs;
    return BlockItem{(int)(idx % lanes), r0, c0, min(r0 + bs, R), min(c0 + bs, C)};
}

extern "C" __global__ void hyperapp_ffbp_block_stats(const float* __restrict__ X, int R, int C, int B, int bs,
                                                     int nbc, long long total, const float* __restrict__ ref,
                                                     float* __restrict__ S1, float* __restrict__ S2,
                                                     int* __restrict__ zero, int nzero)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    STAMP(0);
    if (idx < nzero) zero[idx] = 0;  // the search's counters, reset here instead of by a separate launch
    if (idx >= total) return;
    const BlockItem it = block_item(idx, B, nbc, bs, R, C);
    const int b = it.lane, r0 = it.r0, c0 = it.c0, r1 = it.r1, c1 = it.c1;
    const float rb = ref[b];
    float s1 = 0.0f, s2 = 0.0f;
    for (int r = r0; r < r1; ++r) {
        const float* row = X + ((long long)r * C) * B + b;
#pragma unroll 8
        for (int c = c0; c < c1; ++c) {
            const float v = __ldg(row + (long long)c * B) - rb;
            s1 += v;
            s2 = fmaf(v, v, s2);
        }
    }
    S1[idx] = s1;
    S2[idx] = s2;
    STAMP_LAST(1);
}

// hyperapp_ffbp_sat_rows / _cols: the summed-area table T (nbr+1, nbc+1, B, float64, zero first row and
//   column) of the per-block sums S (nbr, nbc, B, float32), in two passes. Rows pass: one thread per
//   (block row, band) walks the block columns, writing the running sum; cols pass: one thread per
//   (table column, band) walks down the rows, accumulating in place. Consecutive threads take
//   consecutive bands, so each step of a warp touches contiguous memory.
// hyperapp_ffbp_block_stats4: the same with four bands per thread (16-byte loads) when B % 4 == 0: a
//   quarter of the load instructions, and each warp reads 512 contiguous bytes per load. The loads are
//   streaming (__ldcs: the cube is read once, so its lines go first when L2 needs room), and a full block
//   of the default 8 x 8 size issues a whole pixel row of loads before summing. Measured on an H100 at
//   1024 x 1024 x 64: 0.111 ms with cached loads and a runtime trip count, 0.103 ms so (a plain read of
//   the cube takes 0.096 ms, the copy-bandwidth floor is 0.090 ms).
__device__ __forceinline__ void add4(float4 v, float4 rb, float4& s1, float4& s2)
{
    const float x = v.x - rb.x, y = v.y - rb.y, z = v.z - rb.z, w = v.w - rb.w;
    s1.x += x; s1.y += y; s1.z += z; s1.w += w;
    s2.x = fmaf(x, x, s2.x); s2.y = fmaf(y, y, s2.y); s2.z = fmaf(z, z, s2.z); s2.w = fmaf(w, w, s2.w);
}

extern "C" __global__ void hyperapp_ffbp_block_stats4(const float* __restrict__ X, int R, int C, int B, int bs,
                                                      int nbc, long long total4, const float* __restrict__ ref,
                                                      float* __restrict__ S1, float* __restrict__ S2,
                                                      int* __restrict__ zero, int nzero)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    STAMP(0);
    if (idx < nzero) zero[idx] = 0;
    if (idx >= total4) return;
    const int B4 = B / 4;
    const BlockItem it = block_item(idx, B4, nbc, bs, R, C);
    const int b4 = it.lane, r0 = it.r0, c0 = it.c0, r1 = it.r1, c1 = it.c1;
    const float4 rb = reinterpret_cast<const float4*>(ref)[b4];
    float4 s1 = make_float4(0.f, 0.f, 0.f, 0.f), s2 = s1;
    if (bs == 8 && r1 - r0 == 8 && c1 - c0 == 8) {
#pragma unroll 2
        for (int r = r0; r < r1; ++r) {
            const float4* row = reinterpret_cast<const float4*>(X + ((long long)r * C + c0) * B) + b4;
            float4 v[8];
#pragma unroll
            for (int c = 0; c < 8; ++c) v[c] = __ldcs(row + (long long)c * B4);
#pragma unroll
            for (int c = 0; c < 8; ++c) add4(v[c], rb, s1, s2);
        }
    } else {
        for (int r = r0; r < r1; ++r) {
            const float4* row = reinterpret_cast<const float4*>(X + ((long long)r * C) * B) + b4;
#pragma unroll 8
            for (int c = c0; c < c1; ++c) add4(__ldcs(row + (long long)c * B4), rb, s1, s2);
        }
    }
    reinterpret_cast<float4*>(S1)[idx] = s1;
    reinterpret_cast<float4*>(S2)[idx] = s2;
    STAMP_LAST(1);
}

// ---------------------------------------------------------------------------------- summed-area tables
// The table T (nbr+1, nbc+1, B, float64, zero first row and column) of the block sums S (nbr, nbc, B,
// float32) is built in two passes: a prefix along each row (S -> T), then along each column (in place).
// Thread mapping of a line scan: one warp per (line, group of 8 bands); lane = segment * 8 + band, so the
// 8 lanes of a segment read 8 consecutive bands (32 or 64 contiguous bytes) and the 4 segments split the
// line into runs of SCAN_CH values. Each lane loads its whole run at once (one memory round trip per
// 4 * SCAN_CH values of the line), sums it, and a shuffle scan over the 4 segments gives each run its
// offset. (One thread per line walking it in order took 10 us per pass at 1024 x 1024 x 64 on an H100:
// 8 dependent round trips per thread; the warp form takes about a third of that.)
#ifndef SCAN_CH
#define SCAN_CH 32
#endif
#define SCAN_SEGS 4
#define SCAN_ITEMS(lines, B) ((lines) * (((B) + 7) / 8))  // warp items of a pass

template <typename Tin>
__device__ __forceinline__ double load_scan(const Tin* p) { return (double)__ldcg(p); }

// Inclusive prefix of n values src[k * stride] into dst[k * stride] (k < n) for this lane's band; every
// lane of the warp must call it (the shuffles), lanes with ok == false load zeros and store nothing.
template <typename Tin>
__device__ __forceinline__ void warp_line_scan(const Tin* src, double* dst, long long stride, int n, bool ok,
                                               int lane)
{
    const int seg = lane >> 3;
    double carry = 0.0;
    for (int base = 0; base < n; base += SCAN_SEGS * SCAN_CH) {
        const int start = base + seg * SCAN_CH;
        double v[SCAN_CH];
#pragma unroll
        for (int u = 0; u < SCAN_CH; ++u) v[u] = (ok && start + u < n) ? load_scan(src + (start + u) * stride) : 0.0;
#pragma unroll
        for (int u = 1; u < SCAN_CH; ++u) v[u] += v[u - 1];
        const double total = v[SCAN_CH - 1];
        double inc = total;  // inclusive scan of the run totals over the segments (lanes 8 apart)
#pragma unroll
        for (int off = 8; off < 8 * SCAN_SEGS; off <<= 1) {
            const double o = __shfl_up_sync(0xffffffffu, inc, off);
            if (lane >= off) inc += o;
        }
        const double offset = carry + inc - total;
#pragma unroll
        for (int u = 0; u < SCAN_CH; ++u)
            if (ok && start + u < n) dst[(start + u) * stride] = v[u] + offset;
        carry += __shfl_sync(0xffffffffu, inc, 8 * (SCAN_SEGS - 1) + (lane & 7));  // this round's line total
    }
}

// Row pass, warp item `it` of SCAN_ITEMS(nbr + 1, B): row i of T from row i - 1 of S (row 0 is zeros).
__device__ __forceinline__ void sat_row_item(const float* __restrict__ S, double* __restrict__ T, int it, int lane,
                                             int nbr, int nbc, int B)
{
    const int groups = (B + 7) / 8;
    const int i = it / groups, b = (it % groups) * 8 + (lane & 7);
    const bool ok = b < B;
    const long long w1 = nbc + 1;
    double* trow = T + (long long)i * w1 * B + b;
    if (ok && lane < 8) trow[0] = 0.0;
    if (i == 0) {
        for (int j = lane >> 3; j < nbc; j += SCAN_SEGS)
            if (ok) trow[(long long)(j + 1) * B] = 0.0;
        return;
    }
    warp_line_scan(S + (long long)(i - 1) * nbc * B + b, trow + B, B, nbc, ok, lane);
}

// Column pass, warp item `it` of SCAN_ITEMS(nbc + 1, B): column j of T, in place, rows 1..nbr.
__device__ __forceinline__ void sat_col_item(double* T, int it, int lane, int nbr, int nbc, int B)
{
    const int groups = (B + 7) / 8;
    const int j = it / groups, b = (it % groups) * 8 + (lane & 7);
    const long long stride = (long long)(nbc + 1) * B;
    double* col = T + stride + (long long)j * B + b;
    warp_line_scan(col, col, stride, nbr, b < B, lane);
}

// Standalone passes (the eager search and WindowStats on the GPU); 4 warps per block.
extern "C" __global__ void hyperapp_ffbp_sat_rows(const float* __restrict__ S, int nbr, int nbc, int B,
                                                  double* __restrict__ T)
{
    const int it = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (it < SCAN_ITEMS(nbr + 1, B)) sat_row_item(S, T, it, threadIdx.x & 31, nbr, nbc, B);
}

extern "C" __global__ void hyperapp_ffbp_sat_cols(int nbr, int nbc, int B, double* __restrict__ T)
{
    const int it = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (it < SCAN_ITEMS(nbc + 1, B)) sat_col_item(T, it, threadIdx.x & 31, nbr, nbc, B);
}

// ------------------------------------------------------------------------------------------ the networks
__device__ __forceinline__ double box_sum(const double* __restrict__ T, int w1, int B, int b,
                                          int r0, int c0, int r1, int c1)
{
    // __ldcg: read through L2, never a stale L1 line (the persistent search writes T in the same launch)
    return __ldcg(T + ((long long)r1 * w1 + c1) * B + b) - __ldcg(T + ((long long)r0 * w1 + c1) * B + b)
         - __ldcg(T + ((long long)r1 * w1 + c0) * B + b) + __ldcg(T + ((long long)r0 * w1 + c0) * B + b);
}

// params layout per network: U[NF*NH] (row f), b[NH], w[NH], b0
#ifndef WPB
#define WPB 4  // windows (warps) per block
#endif

// The networks' shape: bands, features, hidden neurons, mean-and-std features, the size-class feature.
struct Shape {
    int nb, nf, nh, meanstd, scale;
    __device__ __forceinline__ int net_size() const { return nf * nh + 2 * nh + 1; }
};

// What the search needs to judge a window, in one place (the same for every window of a search).
struct Judge {
    Shape S;
    int R, C, bs;  // image size, block size
    const float* ref;
    const float* s_net;  // both networks, in shared memory
    const float* fmin;
    const float* fmax;
    const float* t1;
    int max_class;
    float t2;
};

// Per-band sums of (x - ref) and its square over one window: from summed-area tables (the full ones in
// the eager search, the coarse ones in the persistent search) ...
struct TableSums {
    const double* T1;
    const double* T2;
    int NB;
    int w1;              // table width
    int r0, c0, r1, c1;  // the window's corners in the table
    __device__ __forceinline__ double2 operator()(int b) const
    {
        return make_double2(box_sum(T1, w1, NB, b, r0, c0, r1, c1), box_sum(T2, w1, NB, b, r0, c0, r1, c1));
    }
};

// ... or, in the persistent search, straight from the block sums S for a window of at most 2 x 2 blocks
// (every window below the coarse level).
struct BlockSums {
    const float* S1;
    const float* S2;
    int NB;
    int nbc;
    int4 W;
    __device__ __forceinline__ double2 operator()(int b) const
    {
        double s1 = 0.0, s2 = 0.0;
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // four predicated loads in flight at once
            const int r = W.x + (q >> 1), c = W.y + (q & 1);
            if (r < W.z && c < W.w) {
                const long long k = ((long long)r * nbc + c) * NB + b;
                s1 += (double)__ldcg(S1 + k);
                s2 += (double)__ldcg(S2 + k);
            }
        }
        return make_double2(s1, s2);
    }
};

// ANN-1 and ANN-2 outputs of window W (in blocks: r0, c0, r1, c1), by one warp: the lanes split the bands
// to form the features (into the warp's shared slice `feat`), then the 2*NH hidden neurons of the two
// networks (each lane reads every feature as a broadcast and its own weight column), and a butterfly
// reduction leaves both outputs on every lane.
template <class Sums>
__device__ __forceinline__ float2 score_window(const Judge& J, const Sums& sums, int4 W, int cls, int lane,
                                               float* __restrict__ feat)
{
    const double n = (double)(min(W.z * J.bs, J.R) - W.x * J.bs) * (double)(min(W.w * J.bs, J.C) - W.y * J.bs);
    const int NB = J.S.nb, NF = J.S.nf, NH = J.S.nh;
#pragma unroll 4
    for (int q = 0; q < (NB + 31) / 32; ++q) {  // no early exit: the loads of four passes in flight at once
        const int b = lane + 32 * q;
        if (b < NB) {
            const double2 sb = sums(b);
            const double m = sb.x / n;
            const double v = sb.y / n - m * m;
            const float sd = (float)sqrt(v > 0.0 ? v : 0.0);
            int fs = b;
            if (J.S.meanstd) {
                fs = NB + b;
                feat[b] = 2.0f * ((float)(m + J.ref[b]) - J.fmin[b]) / fmaxf(J.fmax[b] - J.fmin[b], 1e-12f) - 1.0f;
            }
            feat[fs] = 2.0f * (sd - J.fmin[fs]) / fmaxf(J.fmax[fs] - J.fmin[fs], 1e-12f) - 1.0f;
        }
    }
    if (J.S.scale && lane == 0)
        feat[NF - 1] = 2.0f * ((float)cls - J.fmin[NF - 1]) / fmaxf(J.fmax[NF - 1] - J.fmin[NF - 1], 1e-12f) - 1.0f;
    __syncwarp();
    const int NET_SIZE = J.S.net_size();
    float o1 = 0.0f, o2 = 0.0f;
    for (int j = lane; j < 2 * NH; j += 32) {
        const int net = j >= NH;
        const int k = j - net * NH;
        const float* U = J.s_net + net * NET_SIZE;
        float a = U[NF * NH + k];  // bias b[k]
#pragma unroll 8
        for (int f = 0; f < NF; ++f) a = fmaf(feat[f], U[f * NH + k], a);
        const float contrib = tanhf(a) * U[NF * NH + NH + k];
        if (net) o2 += contrib; else o1 += contrib;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        o1 += __shfl_xor_sync(0xffffffffu, o1, off);
        o2 += __shfl_xor_sync(0xffffffffu, o2, off);
    }
    __syncwarp();  // feat is rewritten by the warp's next window
    return make_float2(0.5f * (tanhf(o1 + J.s_net[NET_SIZE - 1]) + 1.0f),
                       0.5f * (tanhf(o2 + J.s_net[2 * NET_SIZE - 1]) + 1.0f));
}

__device__ __forceinline__ int size_class(int4 W)
{
    const int side = max(W.z - W.x, W.w - W.y);
    int cls = 0;
    while ((1 << cls) < side) ++cls;  // ceil(log2(side))
    return cls;
}

__device__ __forceinline__ bool is_leaf(int4 W) { return W.z - W.x <= 1 && W.w - W.y <= 1; }

// The tree's rule, as FFBP._search: 0 drop, 1 descend (split into the children), 2 accept as a box.
#define DROP 0
#define DESCEND 1
#define ACCEPT 2
__device__ __forceinline__ int decide(const Judge& J, int4 W, int cls, float2 p)
{
    const bool untrained = cls > J.max_class;
    const bool pos = untrained || p.x > J.t1[min(cls, J.max_class)];
    if (!pos) return DROP;
    return (!untrained && (p.y > J.t2 || is_leaf(W))) ? ACCEPT : DESCEND;
}

// Child q (0..3: top-left, top-right, bottom-left, bottom-right) of W; empty when that half has no rows or
// columns.
__device__ __forceinline__ int4 child(int4 W, int q)
{
    const int rm = W.x + (W.z - W.x + 1) / 2, cm = W.y + (W.w - W.y + 1) / 2;
    return make_int4(q < 2 ? W.x : rm, (q & 1) ? cm : W.y, q < 2 ? rm : W.z, (q & 1) ? W.w : cm);
}

__device__ __forceinline__ bool is_empty(int4 W) { return W.z <= W.x || W.w <= W.y; }

// Append the outcome of window W (one thread): an accepted box, or the non-empty children to the next list.
__device__ __forceinline__ void append(int4 W, int d, float2 p, int4* __restrict__ win_out, int* __restrict__ n_out,
                                       int cap_out, int4* __restrict__ boxes, float* __restrict__ s1_out,
                                       float* __restrict__ s2_out, int* __restrict__ n_boxes, int cap_boxes)
{
    if (d == ACCEPT) {
        const int k = atomicAdd(n_boxes, 1);
        if (k < cap_boxes) { boxes[k] = W; s1_out[k] = p.x; s2_out[k] = p.y; }
    } else if (d == DESCEND) {
        int nk = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) nk += !is_empty(child(W, q));
        int k = atomicAdd(n_out, nk);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int4 K = child(W, q);
            if (!is_empty(K)) { if (k < cap_out) win_out[k] = K; ++k; }
        }
    }
}

// Judge window i of a level's list with one warp; lane 0 appends the outcome.
template <class Sums>
__device__ __forceinline__ void judge_listed(const Judge& J, const Sums& sums, int4 W, int lane, float* feat,
                                             int4* win_out,
                                             int* n_out, int cap_out, int4* boxes, float* s1_out, float* s2_out,
                                             int* n_boxes, int cap_boxes)
{
    const int cls = size_class(W);
    const float2 p = score_window(J, sums, W, cls, lane, feat);
    if (lane == 0) append(W, decide(J, W, cls, p), p, win_out, n_out, cap_out, boxes, s1_out, s2_out, n_boxes,
                          cap_boxes);
}

__device__ __forceinline__ void stage_nets(float* s_net, const float* __restrict__ net1,
                                           const float* __restrict__ net2, int net_size)
{
    for (int q = threadIdx.x; q < net_size; q += blockDim.x) { s_net[q] = net1[q]; s_net[net_size + q] = net2[q]; }
}

extern "C" __global__ void __launch_bounds__(WPB * 32) hyperapp_ffbp_level(
    int s_nb, int s_nf, int s_nh, int s_meanstd, int s_scale, const double* __restrict__ T1, const double* __restrict__ T2, int R, int C, int bs, int w1,
    const float* __restrict__ ref, int is_root, const int4* __restrict__ win_in, const int* __restrict__ n_in,
    const float* __restrict__ net1, const float* __restrict__ net2,
    const float* __restrict__ fmin, const float* __restrict__ fmax,
    const float* __restrict__ t1, int max_class, float t2,
    int4* __restrict__ win_out, int* __restrict__ n_out, int cap_out,
    int4* __restrict__ boxes, float* __restrict__ s1_out, float* __restrict__ s2_out, int* __restrict__ n_boxes,
    int cap_boxes)
{
    // One warp per live window of the level (the grid is sized for the largest level possible).
    const Shape S{s_nb, s_nf, s_nh, s_meanstd, s_scale};
    extern __shared__ float s_dyn[];  // both networks, then each warp's feature row
    float* s_net = s_dyn;
    const int live = is_root ? 1 : *n_in;
    if (blockIdx.x * WPB >= live) return;
    stage_nets(s_net, net1, net2, S.net_size());
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int i = blockIdx.x * WPB + warp;
    if (i >= live) return;  // after the only block-wide barrier
    const Judge J{S, R, C, bs, ref, s_net, fmin, fmax, t1, max_class, t2};
    const int4 W = is_root ? make_int4(0, 0, (R + bs - 1) / bs, w1 - 1) : win_in[i];
    const TableSums sums{T1, T2, S.nb, w1, W.x, W.y, W.z, W.w};
    judge_listed(J, sums, W, lane, s_dyn + 2 * S.net_size() + warp * S.nf, win_out, n_out, cap_out, boxes, s1_out, s2_out, n_boxes,
                 cap_boxes);
}

// A software grid barrier for a persistent launch (every block resident: the host sizes the grid from
// the occupancy calculator). The counter only grows; barrier k waits for k * gridDim.x arrivals.
__device__ __forceinline__ void grid_barrier(unsigned int* bar, unsigned int target)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        // poll with plain acquire loads: hundreds of blocks polling with atomics serialise on one L2 slot
        unsigned int seen;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(bar) : "memory");
            if (seen < target) __nanosleep(20);
        } while (seen < target);
        __threadfence();
    }
    __syncthreads();
}

// ------------------------------------------------------------------------------- the top of the tree
// The top TOP levels hold few windows (1 + 4 + ... + 4^(TOP-1)) and took a grid barrier each (about 4.5
// us of latency per level on an H100, however few its windows). The persistent search judges them all at
// once instead, before knowing which are live, then settles liveness in the next phase: a top window is
// live when every ancestor descended. Window (l, t) is the t-th of level l in quadtree order (t's base-4
// digits are the path from the root, most significant first); its decision is stored at dense index
// (4^l - 1) / 3 + t.
__device__ __forceinline__ int dense_offset(int l) { return ((1 << (2 * l)) - 1) / 3; }

// The level of dense index i.
__device__ __forceinline__ int dense_level(int i)
{
    int l = 0;
    while (dense_offset(l + 1) <= i) ++l;
    return l;
}

// Window (l, t) of the tree over an nbr x nbc grid, or an empty window when that path does not exist (an
// empty half, or a split below a leaf, which the tree never makes).
__device__ __forceinline__ int4 dense_window(int l, int t, int nbr, int nbc)
{
    int4 W = make_int4(0, 0, nbr, nbc);
    for (int d = l - 1; d >= 0; --d) {
        if (is_leaf(W)) return make_int4(0, 0, 0, 0);
        W = child(W, (t >> (2 * d)) & 3);
        if (is_empty(W)) return W;
    }
    return W;
}

// Every ancestor of (l, t) descended (the root has none).
__device__ __forceinline__ bool ancestors_descend(const int* dec, int l, int t)
{
    bool all = true;
    for (int k = 1; k <= l; ++k) all &= __ldcg(dec + dense_offset(l - k) + (t >> (2 * k))) == DESCEND;
    return all;
}

// The persistent search does not build the full summed-area tables (17 MB of float64 at 1024 x 1024 x 64,
// two passes over them took 19 us on an H100). Windows at or above the coarse level `lc` (three levels
// above the leaves) have their edges on the boundaries of that level's partition of the block rows and
// columns (the tree halves rows and columns independently, so every level's boundaries are among the
// next level's), so a summed-area table over the coarse level's cells answers them: (2^lc + 1)^2 corners
// instead of (nbr + 1)(nbc + 1), built from cell sums of at most 4 x 4 blocks. Windows below the coarse
// level span at most 2 x 2 blocks and are summed from S directly (BlockSums).
// Corner k of a window edge is inv_r[k] (inv_c[k]) in the coarse table (TableSums): the index of block
// row (column) k among the coarse boundaries rb (cb), as the host computed them.
// What the persistent search reads to sum a window of a given level.
struct SearchTables {
    const float* S1;
    const float* S2;
    int nbc;
    const double* C1;
    const double* C2;
    int wc, lc;
    const int* inv_r;
    const int* inv_c;
};

// ANN outputs of window W of level `level`, with the sums that fit it.
__device__ __forceinline__ float2 score_in_search(const Judge& J, const SearchTables& Q, int level, int4 W, int cls,
                                                  int lane, float* feat)
{
    if (level <= Q.lc) {
        const TableSums sums{Q.C1, Q.C2, J.S.nb, Q.wc, __ldg(Q.inv_r + W.x), __ldg(Q.inv_c + W.y), __ldg(Q.inv_r + W.z),
                              __ldg(Q.inv_c + W.w)};
        return score_window(J, sums, W, cls, lane, feat);
    }
    return score_window(J, BlockSums{Q.S1, Q.S2, J.S.nb, Q.nbc, W}, W, cls, lane, feat);
}

// Judge window W of level `level` with one warp; lane 0 appends the outcome. (Appending a whole block's
// outcomes with one atomic per list instead of one per window measured no faster: the counter's
// contention is not what limits a level.)
__device__ __forceinline__ void judge_in_search(const Judge& J, const SearchTables& Q, int level, int4 W, int lane,
                                                float* feat, int4* win_out, int* n_out, int cap_out, int4* boxes,
                                                float* s1_out, float* s2_out, int* n_boxes, int cap_boxes)
{
    const int cls = size_class(W);
    const float2 p = score_in_search(J, Q, level, W, cls, lane, feat);
    if (lane == 0) append(W, decide(J, W, cls, p), p, win_out, n_out, cap_out, boxes, s1_out, s2_out, n_boxes,
                          cap_boxes);
}

// hyperapp_ffbp_search: the coarse tables and every level of the tree in ONE persistent launch.
//   Phase 1 sums the coarse cells (a thread per cell, band and table) into C[1:, 1:], phase 2 scans C's
//   rows and phase 3 its columns (C's first row and column stay zero). Phase 4 judges every window of the
//   top `top` levels (see above). Phase 5 settles the top (accepted boxes, live counts) and judges level
//   `top` over its dense index space (a window is live when its ancestors descended), appending the
//   children to a list; each later level is judged from its list by warps striding over it.
//   A grid barrier separates the phases and levels; tables, decisions and lists written in the launch are
//   read back through L2 (__ldcg). counts[levels + 3] is the barrier; dec and p hold the top's decisions
//   and scores.
extern "C" __global__ void __launch_bounds__(WPB * 32) hyperapp_ffbp_search(
    int s_nb, int s_nf, int s_nh, int s_meanstd, int s_scale, const float* __restrict__ S1, const float* __restrict__ S2, double* C1, double* C2, int lc,
    const int* __restrict__ rb, const int* __restrict__ cb, const int* __restrict__ inv_r,
    const int* __restrict__ inv_c,
    int nbr, int nbc, int R, int C, int bs, const float* __restrict__ ref, int levels, int top,
    int4* win_a, int4* win_b, int* counts, int cap, int* dec, float2* p_top,
    const float* __restrict__ net1, const float* __restrict__ net2,
    const float* __restrict__ fmin, const float* __restrict__ fmax,
    const float* __restrict__ t1, int max_class, float t2,
    int4* boxes, float* s1_out, float* s2_out, int cap_boxes, int* __restrict__ out_counts)
{
    const Shape S{s_nb, s_nf, s_nh, s_meanstd, s_scale};
    extern __shared__ float s_dyn[];  // both networks, then each warp's feature row
    float* s_net = s_dyn;
    const int NB = S.nb;
    unsigned int* bar = reinterpret_cast<unsigned int*>(counts + levels + 3);
    int* n_boxes = counts + levels + 2;
    unsigned int k = 0;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int gwarp = blockIdx.x * WPB + warp, nwarps = gridDim.x * WPB;
    const int tid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
    const int nc = 1 << lc, wc = nc + 1;
    STAMP(2);
    // phase 1: coarse cell sums, a thread per (cell, band) for both tables (cells span at most 4 x 4
    // blocks: 32 predicated loads in flight)
    for (int it = tid; it < nc * nc * NB; it += nthreads) {
        const int b = it % NB, cell = it / NB, a = cell / nc, j = cell % nc;
        const int r0 = __ldg(rb + a), r1 = __ldg(rb + a + 1), c0 = __ldg(cb + j), c1 = __ldg(cb + j + 1);
        double acc1 = 0.0, acc2 = 0.0;
#pragma unroll
        for (int q = 0; q < 16; ++q) {
            const int r = r0 + (q >> 2), c = c0 + (q & 3);
            if (r < r1 && c < c1) {
                const long long o = ((long long)r * nbc + c) * NB + b;
                acc1 += (double)__ldcg(S1 + o);
                acc2 += (double)__ldcg(S2 + o);
            }
        }
        const long long o = ((long long)(a + 1) * wc + j + 1) * NB + b;
        C1[o] = acc1;
        C2[o] = acc2;
    }
    stage_nets(s_net, net1, net2, S.net_size());
    grid_barrier(bar, ++k * gridDim.x);
    STAMP(3);
    // phase 2: prefix along each row of C (rows 1..nc, columns 1..nc), in place
    const int groups = (NB + 7) / 8;
    for (int it = gwarp; it < 2 * nc * groups; it += nwarps) {
        const int tab = it >= nc * groups, rem = it - tab * nc * groups;
        const int b = (rem % groups) * 8 + (lane & 7);
        double* row = (tab ? C2 : C1) + ((long long)(rem / groups + 1) * wc + 1) * NB + b;
        warp_line_scan(row, row, NB, nc, b < NB, lane);
    }
    grid_barrier(bar, ++k * gridDim.x);
    STAMP(4);
    // phase 3: prefix down each column of C, in place
    for (int it = gwarp; it < 2 * nc * groups; it += nwarps) {
        const int tab = it >= nc * groups, rem = it - tab * nc * groups;
        const int b = (rem % groups) * 8 + (lane & 7);
        double* col = (tab ? C2 : C1) + ((long long)wc + rem / groups + 1) * NB + b;
        warp_line_scan(col, col, (long long)wc * NB, nc, b < NB, lane);
    }
    grid_barrier(bar, ++k * gridDim.x);
    STAMP(5);
    const Judge J{S, R, C, bs, ref, s_net, fmin, fmax, t1, max_class, t2};
    const SearchTables Q{S1, S2, nbc, C1, C2, wc, lc, inv_r, inv_c};
    float* feat = s_dyn + 2 * S.net_size() + warp * S.nf;
    // phase 4: every window of levels 0 .. top-1, live or not
    const int n_top = dense_offset(top);
    for (int i = gwarp; i < n_top; i += nwarps) {
        const int l = dense_level(i);
        const int4 W = dense_window(l, i - dense_offset(l), nbr, nbc);
        int d = DROP;
        float2 p = make_float2(0.f, 0.f);
        if (!is_empty(W)) {
            const int cls = size_class(W);
            p = score_in_search(J, Q, l, W, cls, lane, feat);
            d = decide(J, W, cls, p);
        }
        if (lane == 0) { dec[i] = d; p_top[i] = p; }
    }
    grid_barrier(bar, ++k * gridDim.x);
    STAMP(6);
    // phase 5a (a thread per top window): accepted boxes of live top windows, and the live count per level
    for (int i0 = tid - lane; i0 < n_top; i0 += nthreads) {  // whole warps: the reductions
        const int i = i0 + lane;
        const int l = dense_level(i);
        const int t = i - dense_offset(l);
        const int4 W = i < n_top ? dense_window(l, t, nbr, nbc) : make_int4(0, 0, 0, 0);
        const bool live = !is_empty(W) && ancestors_descend(dec, l, t);
        if (live && __ldcg(dec + i) == ACCEPT) {
            const int kb = atomicAdd(n_boxes, 1);
            if (kb < cap_boxes) { const float2 p = __ldcg(p_top + i); boxes[kb] = W; s1_out[kb] = p.x; s2_out[kb] = p.y; }
        }
        int kids = 0;  // live windows of level `top`: the non-empty children of live bottom-row windows that descend
        if (live && l == top - 1 && __ldcg(dec + i) == DESCEND)
            for (int q = 0; q < 4; ++q) kids += !is_empty(child(W, q));
        for (int lv = 1; lv <= top; ++lv) {
            const int c = __reduce_add_sync(0xffffffffu, lv == top ? kids : (int)(live && l == lv));
            if (lane == 0 && c) atomicAdd(counts + lv, c);
        }
    }
    // phase 5b: level `top` over its dense index space (live when every ancestor descended)
    if (top <= levels) {
        int4* win_out = ((top + 1) & 1) ? win_b : win_a;  // the list level top + 1 reads (see below)
        for (int t = gwarp; t < (1 << (2 * top)); t += nwarps) {
            if (!ancestors_descend(dec, top, t)) continue;
            const int4 W = dense_window(top, t, nbr, nbc);
            if (is_empty(W)) continue;
            judge_in_search(J, Q, top, W, lane, feat, win_out, counts + top + 1, cap, boxes, s1_out, s2_out,
                            n_boxes, cap_boxes);
        }
    }
    grid_barrier(bar, ++k * gridDim.x);
    STAMP(7);
    // the levels below: level lev reads its list from win_b when lev is odd, else win_a
    int lev = top + 1;
    for (; lev <= levels; ++lev) {
        const int live = __ldcg(counts + lev);
        if (live == 0) break;  // every block read the same count after the barrier: they all stop here
        const int4* win_in = (lev & 1) ? win_b : win_a;
        int4* win_out = (lev & 1) ? win_a : win_b;
        for (int i = gwarp; i < live; i += nwarps)
            judge_in_search(J, Q, lev, __ldcg(win_in + i), lane, feat, win_out, counts + lev + 1, cap, boxes,
                            s1_out, s2_out, n_boxes, cap_boxes);
        grid_barrier(bar, ++k * gridDim.x);
        STAMP(8 + lev - top - 1);
    }
    // every count is final after the last barrier: block 0 copies them out (to host-mapped memory in the
    // graph, so the host reads them with no copy launch)
    if (out_counts != nullptr && blockIdx.x == 0)
        for (int q = threadIdx.x; q < levels + 3; q += blockDim.x) out_counts[q] = __ldcg(counts + q);
    STAMP(9 + lev - top - 1);
}
