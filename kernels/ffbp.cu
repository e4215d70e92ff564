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
//   Compile-time constants: NB bands, NF features, NH hidden neurons, MEANSTD, SCALE.

extern "C" __global__ void hyperapp_ffbp_block_stats(const float* __restrict__ X, int R, int C, int B, int bs,
                                                     int nbc, long long total, const float* __restrict__ ref,
                                                     float* __restrict__ S1, float* __restrict__ S2)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    const int b = (int)(idx % B);
    const long long blk = idx / B;
    const int bi = (int)(blk / nbc), bj = (int)(blk % nbc);
    const int r0 = bi * bs, c0 = bj * bs;
    const int r1 = min(r0 + bs, R), c1 = min(c0 + bs, C);
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
}

// hyperapp_ffbp_sat_rows / _cols: the summed-area table T (nbr+1, nbc+1, B, float64, zero first row and
//   column) of the per-block sums S (nbr, nbc, B, float32), in two passes. Rows pass: one thread per
//   (block row, band) walks the block columns, writing the running sum; cols pass: one thread per
//   (table column, band) walks down the rows, accumulating in place. Consecutive threads take
//   consecutive bands, so each step of a warp touches contiguous memory.
// hyperapp_ffbp_block_stats4: the same with four bands per thread (16-byte loads) when B % 4 == 0: a
//   quarter of the load instructions, and each warp reads 512 contiguous bytes per load.
extern "C" __global__ void hyperapp_ffbp_block_stats4(const float* __restrict__ X, int R, int C, int B, int bs,
                                                      int nbc, long long total4, const float* __restrict__ ref,
                                                      float* __restrict__ S1, float* __restrict__ S2)
{
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total4) return;
    const int B4 = B / 4;
    const int b4 = (int)(idx % B4);
    const long long blk = idx / B4;
    const int bi = (int)(blk / nbc), bj = (int)(blk % nbc);
    const int r0 = bi * bs, c0 = bj * bs;
    const int r1 = min(r0 + bs, R), c1 = min(c0 + bs, C);
    const float4 rb = reinterpret_cast<const float4*>(ref)[b4];
    float4 s1 = make_float4(0.f, 0.f, 0.f, 0.f), s2 = s1;
    for (int r = r0; r < r1; ++r) {
        const float4* row = reinterpret_cast<const float4*>(X + ((long long)r * C) * B) + b4;
#pragma unroll 8
        for (int c = c0; c < c1; ++c) {
            const float4 v = __ldg(row + (long long)c * B4);
            const float x = v.x - rb.x, y = v.y - rb.y, z = v.z - rb.z, w = v.w - rb.w;
            s1.x += x; s1.y += y; s1.z += z; s1.w += w;
            s2.x = fmaf(x, x, s2.x); s2.y = fmaf(y, y, s2.y); s2.z = fmaf(z, z, s2.z); s2.w = fmaf(w, w, s2.w);
        }
    }
    reinterpret_cast<float4*>(S1)[idx] = s1;
    reinterpret_cast<float4*>(S2)[idx] = s2;
}

// Both passes load 16 steps ahead before accumulating, so each thread waits for memory once per 16 steps
// (with only (nbr+1)*B threads in flight, an unbatched scan was latency-bound).
#define SAT_BATCH 16
// One row of the summed-area table (i = 0 is the zero row) and one column's running sum down the rows.
__device__ __forceinline__ void sat_row_scan(const float* __restrict__ S, double* __restrict__ T, int i, int b,
                                             int nbc, int B)
{
    const int w1 = nbc + 1;
    double acc = 0.0;
    double* trow = T + ((long long)i * w1) * B + b;
    trow[0] = 0.0;
    const float* srow = S + ((long long)(i > 0 ? i - 1 : 0) * nbc) * B + b;
    for (int j0 = 0; j0 < nbc; j0 += SAT_BATCH) {
        float v[SAT_BATCH];
#pragma unroll
        for (int u = 0; u < SAT_BATCH; ++u)
            v[u] = (i > 0 && j0 + u < nbc) ? srow[(long long)(j0 + u) * B] : 0.0f;
#pragma unroll
        for (int u = 0; u < SAT_BATCH; ++u) {
            acc += (double)v[u];
            if (j0 + u < nbc) trow[(long long)(j0 + u + 1) * B] = acc;
        }
    }
}

__device__ __forceinline__ void sat_col_scan(double* T, int j, int b, int nbr, int nbc, int B)
{
    const long long stride = (long long)(nbc + 1) * B;
    double* col = T + (long long)j * B + b;
    double acc = 0.0;
    for (int i0 = 1; i0 <= nbr; i0 += SAT_BATCH) {
        double v[SAT_BATCH];
#pragma unroll
        for (int u = 0; u < SAT_BATCH; ++u) v[u] = (i0 + u <= nbr) ? __ldcg(col + (i0 + u) * stride) : 0.0;
#pragma unroll
        for (int u = 0; u < SAT_BATCH; ++u) {
            acc += v[u];
            if (i0 + u <= nbr) col[(i0 + u) * stride] = acc;
        }
    }
}

extern "C" __global__ void hyperapp_ffbp_sat_rows(const float* __restrict__ S, int nbr, int nbc, int B,
                                                  double* __restrict__ T)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (nbr + 1) * B) sat_row_scan(S, T, idx / B, idx % B, nbc, B);
}

extern "C" __global__ void hyperapp_ffbp_sat_cols(int nbr, int nbc, int B, double* __restrict__ T)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (nbc + 1) * B) sat_col_scan(T, idx / B, idx % B, nbr, nbc, B);
}

__device__ __forceinline__ double box_sum(const double* __restrict__ T, int w1, int B, int b,
                                          int r0, int c0, int r1, int c1)
{
    // __ldcg: read through L2, never a stale L1 line (the persistent search writes T in the same launch)
    return __ldcg(T + ((long long)r1 * w1 + c1) * B + b) - __ldcg(T + ((long long)r0 * w1 + c1) * B + b)
         - __ldcg(T + ((long long)r1 * w1 + c0) * B + b) + __ldcg(T + ((long long)r0 * w1 + c0) * B + b);
}

// params layout per network: U[NF*NH] (row f), b[NH], w[NH], b0
#define WPB 4                       // windows (warps) per block
#define NET_SIZE (NF * NH + 2 * NH + 1)

// Judge window i of a level with one warp (see hyperapp_ffbp_level); lane 0 appends the outcome.
__device__ __forceinline__ void judge_window(
    int i, int lane, const double* __restrict__ T1, const double* __restrict__ T2, int R, int C, int bs, int w1,
    const float* __restrict__ ref, int is_root, const int4* __restrict__ win_in,
    const float* __restrict__ s_net, float* __restrict__ s_feat,
    const float* __restrict__ fmin, const float* __restrict__ fmax,
    const float* __restrict__ t1, int max_class, float t2,
    int4* __restrict__ win_out, int* __restrict__ n_out, int cap_out,
    int4* __restrict__ boxes, float* __restrict__ s1_out, float* __restrict__ s2_out, int* __restrict__ n_boxes,
    int cap_boxes)
{
    const int4 W = is_root ? make_int4(0, 0, (R + bs - 1) / bs, w1 - 1) : __ldcg(win_in + i);
    const int h = W.z - W.x, wd = W.w - W.y;
    const int side = max(h, wd);
    int cls = 0;
    while ((1 << cls) < side) ++cls;  // ceil(log2(side))
    // pixels in the window: blocks are bs x bs except the clipped last row and column
    const double n = (double)(min(W.z * bs, R) - W.x * bs) * (double)(min(W.w * bs, C) - W.y * bs);
    float* feat = s_feat;
#pragma unroll
    for (int q = 0; q < (NB + 31) / 32; ++q) {  // a fixed trip count: the loads of every pass in flight at once
        const int b = lane + 32 * q;
        if (b >= NB) break;
        const double m = box_sum(T1, w1, NB, b, W.x, W.y, W.z, W.w) / n;
        const double v = box_sum(T2, w1, NB, b, W.x, W.y, W.z, W.w) / n - m * m;
        const float sd = (float)sqrt(v > 0.0 ? v : 0.0);
#if MEANSTD
        const int fs = NB + b;
        feat[b] = 2.0f * ((float)(m + ref[b]) - fmin[b]) / fmaxf(fmax[b] - fmin[b], 1e-12f) - 1.0f;
#else
        const int fs = b;
#endif
        feat[fs] = 2.0f * (sd - fmin[fs]) / fmaxf(fmax[fs] - fmin[fs], 1e-12f) - 1.0f;
    }
#if SCALE
    if (lane == 0)
        feat[NF - 1] = 2.0f * ((float)cls - fmin[NF - 1]) / fmaxf(fmax[NF - 1] - fmin[NF - 1], 1e-12f) - 1.0f;
#endif
    __syncwarp();
    float o1 = 0.0f, o2 = 0.0f;
    for (int j = lane; j < 2 * NH; j += 32) {
        const int net = j >= NH;
        const int k = j - net * NH;
        const float* U = s_net + net * NET_SIZE;
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
    if (lane != 0) return;
    const float p1 = 0.5f * (tanhf(o1 + s_net[NET_SIZE - 1]) + 1.0f);
    const float p2 = 0.5f * (tanhf(o2 + s_net[2 * NET_SIZE - 1]) + 1.0f);
    const bool untrained = cls > max_class;
    const bool pos = untrained || p1 > t1[min(cls, max_class)];
    const bool leaf = h <= 1 && wd <= 1;
    const bool stop = pos && !untrained && (p2 > t2 || leaf);
    if (stop) {
        const int k = atomicAdd(n_boxes, 1);
        if (k < cap_boxes) { boxes[k] = W; s1_out[k] = p1; s2_out[k] = p2; }
    } else if (pos) {
        const int rm = W.x + (h + 1) / 2, cm = W.y + (wd + 1) / 2;
        int4 kids[4] = {make_int4(W.x, W.y, rm, cm), make_int4(W.x, cm, rm, W.w),
                        make_int4(rm, W.y, W.z, cm), make_int4(rm, cm, W.z, W.w)};
        int nk = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) nk += (kids[q].z > kids[q].x && kids[q].w > kids[q].y);
        int k = atomicAdd(n_out, nk);
#pragma unroll
        for (int q = 0; q < 4; ++q)
            if (kids[q].z > kids[q].x && kids[q].w > kids[q].y) { if (k < cap_out) win_out[k] = kids[q]; ++k; }
    }
}

extern "C" __global__ void __launch_bounds__(WPB * 32) hyperapp_ffbp_level(
    const double* __restrict__ T1, const double* __restrict__ T2, int R, int C, int bs, int w1,
    const float* __restrict__ ref, int is_root, const int4* __restrict__ win_in, const int* __restrict__ n_in,
    const float* __restrict__ net1, const float* __restrict__ net2,
    const float* __restrict__ fmin, const float* __restrict__ fmax,
    const float* __restrict__ t1, int max_class, float t2,
    int4* __restrict__ win_out, int* __restrict__ n_out, int cap_out,
    int4* __restrict__ boxes, float* __restrict__ s1_out, float* __restrict__ s2_out, int* __restrict__ n_boxes,
    int cap_boxes)
{
    // One warp per live window. Lanes split the bands to form the features (into shared memory), then
    // split the 2*NH hidden neurons of the two networks (each lane reads every feature as a broadcast and
    // its own weight column), and a warp reduction forms the two outputs. Lane 0 decides and appends.
    __shared__ float s_net[2 * NET_SIZE];
    __shared__ float s_feat[WPB][NF];
    const int live = is_root ? 1 : *n_in;
    if (blockIdx.x * WPB >= live) return;  // the grid is sized for the largest level possible
    for (int q = threadIdx.x; q < NET_SIZE; q += blockDim.x) { s_net[q] = net1[q]; s_net[NET_SIZE + q] = net2[q]; }
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int i = blockIdx.x * WPB + warp;
    if (i >= live) return;  // after the only block-wide barrier
    judge_window(i, lane, T1, T2, R, C, bs, w1, ref, is_root, win_in, s_net, s_feat[warp], fmin, fmax, t1,
                 max_class, t2, win_out, n_out, cap_out, boxes, s1_out, s2_out, n_boxes, cap_boxes);
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

// hyperapp_ffbp_search: the summed-area scans and every level of the tree in ONE persistent launch.
//   Phase 1 scans the rows of both tables, phase 2 the columns, then each level is judged by warps
//   striding over its live windows, with a grid barrier between phases and levels. Tables and window
//   lists written in the launch are read back through L2 (__ldcg). counts[levels + 3] is the barrier.
extern "C" __global__ void __launch_bounds__(WPB * 32) hyperapp_ffbp_search(
    const float* __restrict__ S1, const float* __restrict__ S2, double* T1, double* T2,
    int nbr, int nbc, int R, int C, int bs, const float* __restrict__ ref, int levels,
    int4* win_a, int4* win_b, int* counts, int cap,
    const float* __restrict__ net1, const float* __restrict__ net2,
    const float* __restrict__ fmin, const float* __restrict__ fmax,
    const float* __restrict__ t1, int max_class, float t2,
    int4* boxes, float* s1_out, float* s2_out, int cap_boxes)
{
    __shared__ float s_net[2 * NET_SIZE];
    __shared__ float s_feat[WPB][NF];
    unsigned int* bar = reinterpret_cast<unsigned int*>(counts + levels + 3);
    unsigned int k = 0;
    const int w1 = nbc + 1;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nthreads = (long long)gridDim.x * blockDim.x;
    for (long long it = tid; it < 2LL * (nbr + 1) * NB; it += nthreads) {
        const int tab = (int)(it / ((nbr + 1) * NB)), rem = (int)(it % ((nbr + 1) * NB));
        sat_row_scan(tab ? S2 : S1, tab ? T2 : T1, rem / NB, rem % NB, nbc, NB);
    }
    grid_barrier(bar, ++k * gridDim.x);
    for (long long it = tid; it < 2LL * w1 * NB; it += nthreads) {
        const int tab = (int)(it / (w1 * NB)), rem = (int)(it % (w1 * NB));
        sat_col_scan(tab ? T2 : T1, rem / NB, rem % NB, nbr, nbc, NB);
    }
    for (int q = threadIdx.x; q < NET_SIZE; q += blockDim.x) { s_net[q] = net1[q]; s_net[NET_SIZE + q] = net2[q]; }
    grid_barrier(bar, ++k * gridDim.x);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int lev = 0; lev <= levels; ++lev) {
        const int live = lev == 0 ? 1 : __ldcg(counts + lev);
        if (live == 0) break;  // every block read the same count after the barrier: they all stop here
        int4* win_in = (lev & 1) ? win_b : win_a;
        int4* win_out = (lev & 1) ? win_a : win_b;
        for (int i = blockIdx.x * WPB + warp; i < live; i += gridDim.x * WPB)
            judge_window(i, lane, T1, T2, R, C, bs, w1, ref, lev == 0, win_in, s_net, s_feat[warp], fmin, fmax,
                         t1, max_class, t2, win_out, counts + lev + 1, cap, boxes, s1_out, s2_out,
                         counts + levels + 2, cap_boxes);
        grid_barrier(bar, ++k * gridDim.x);
    }
}
