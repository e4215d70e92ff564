// Kernels of the multi-resolution FFBP window detector (hyperapp.models.ffbp).
//
// hyperapp_ffbp_block_stats: per-block sums and sums of squares of (x - ref) over BS x BS pixel blocks.
//   Thread mapping: one thread per (block, band); consecutive threads take consecutive bands of the same
//   block, so a warp reads 32 consecutive floats (128 bytes) of one pixel per load: coalesced. Each
//   thread walks the block's pixels with independent loads (unrolled by 8 to keep them in flight).
//   Memory traffic: the cube is read once (4 bytes per band per pixel); 8 bytes per band per block out.
//
// hyperapp_ffbp_level: one level of the window tree. One thread per live window: it reads the window's
//   per-band sums from the summed-area tables (4 corners x 2 tables x B bands, float64), forms the
//   features (per-band std [and mean], the size class), scales them to [-1, 1], runs ANN-1 and ANN-2
//   (tansig hidden layer, tansig output) with the weights read as warp-uniform loads, and appends its
//   outcome with atomics: an accepted box to the box list, or its children to the next level's list.
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
extern "C" __global__ void hyperapp_ffbp_sat_rows(const float* __restrict__ S, int nbr, int nbc, int B,
                                                  double* __restrict__ T)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (nbr + 1) * B) return;
    const int i = idx / B, b = idx % B;
    const int w1 = nbc + 1;
    double acc = 0.0;
    T[((long long)i * w1) * B + b] = 0.0;
    for (int j = 0; j < nbc; ++j) {
        if (i > 0) acc += (double)S[((long long)(i - 1) * nbc + j) * B + b];
        T[((long long)i * w1 + j + 1) * B + b] = acc;
    }
}

extern "C" __global__ void hyperapp_ffbp_sat_cols(int nbr, int nbc, int B, double* __restrict__ T)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int w1 = nbc + 1;
    if (idx >= w1 * B) return;
    const int j = idx / B, b = idx % B;
    double acc = 0.0;
    for (int i = 1; i <= nbr; ++i) {
        double* t = T + ((long long)i * w1 + j) * B + b;
        acc += *t;
        *t = acc;
    }
}

__device__ __forceinline__ double box_sum(const double* __restrict__ T, int w1, int B, int b,
                                          int r0, int c0, int r1, int c1)
{
    return T[((long long)r1 * w1 + c1) * B + b] - T[((long long)r0 * w1 + c1) * B + b]
         - T[((long long)r1 * w1 + c0) * B + b] + T[((long long)r0 * w1 + c0) * B + b];
}

// params layout per network: U[NF*NH] (row f), b[NH], w[NH], b0
__device__ __forceinline__ float ann(const float* __restrict__ net, const float* __restrict__ h_in)
{
    const float* b = net + NF * NH;
    const float* w = b + NH;
    float o = w[NH];
#pragma unroll
    for (int k = 0; k < NH; ++k) o = fmaf(tanhf(h_in[k] + b[k]), w[k], o);
    return 0.5f * (tanhf(o) + 1.0f);
}

extern "C" __global__ void hyperapp_ffbp_level(
    const double* __restrict__ T1, const double* __restrict__ T2, int R, int C, int bs, int w1,
    const float* __restrict__ ref, int is_root, const int4* __restrict__ win_in, const int* __restrict__ n_in,
    const float* __restrict__ net1, const float* __restrict__ net2,
    const float* __restrict__ fmin, const float* __restrict__ fmax,
    const float* __restrict__ t1, int max_class, float t2,
    int4* __restrict__ win_out, int* __restrict__ n_out, int cap_out,
    int4* __restrict__ boxes, float* __restrict__ s1_out, float* __restrict__ s2_out, int* __restrict__ n_boxes,
    int cap_boxes)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    // the first level is the root window alone, built here (no host-to-device copy)
    if (i >= (is_root ? 1 : *n_in)) return;
    const int4 W = is_root ? make_int4(0, 0, (R + bs - 1) / bs, w1 - 1) : win_in[i];
    const int h = W.z - W.x, wd = W.w - W.y;
    const int side = max(h, wd);
    int cls = 0;
    while ((1 << cls) < side) ++cls;  // ceil(log2(side))
    const bool untrained = cls > max_class;
    // pixels in the window: blocks are bs x bs except the clipped last row and column
    const double n = (double)(min(W.z * bs, R) - W.x * bs) * (double)(min(W.w * bs, C) - W.y * bs);
    // hidden pre-activations of both networks, accumulated feature by feature
    float h1[NH], h2[NH];
#pragma unroll
    for (int k = 0; k < NH; ++k) { h1[k] = 0.0f; h2[k] = 0.0f; }
    for (int b = 0; b < NB; ++b) {
        const double m = box_sum(T1, w1, NB, b, W.x, W.y, W.z, W.w) / n;
        const double v = box_sum(T2, w1, NB, b, W.x, W.y, W.z, W.w) / n - m * m;
        const float sd = (float)sqrt(v > 0.0 ? v : 0.0);
#if MEANSTD
        const int fs = NB + b, fm = b;
        const float mean = (float)(m + ref[b]);
        const float xm = 2.0f * (mean - fmin[fm]) / fmaxf(fmax[fm] - fmin[fm], 1e-12f) - 1.0f;
#pragma unroll
        for (int k = 0; k < NH; ++k) { h1[k] = fmaf(xm, net1[fm * NH + k], h1[k]); h2[k] = fmaf(xm, net2[fm * NH + k], h2[k]); }
#else
        const int fs = b;
#endif
        const float xs = 2.0f * (sd - fmin[fs]) / fmaxf(fmax[fs] - fmin[fs], 1e-12f) - 1.0f;
#pragma unroll
        for (int k = 0; k < NH; ++k) { h1[k] = fmaf(xs, net1[fs * NH + k], h1[k]); h2[k] = fmaf(xs, net2[fs * NH + k], h2[k]); }
    }
#if SCALE
    {
        const int f = NF - 1;
        const float xc = 2.0f * ((float)cls - fmin[f]) / fmaxf(fmax[f] - fmin[f], 1e-12f) - 1.0f;
#pragma unroll
        for (int k = 0; k < NH; ++k) { h1[k] = fmaf(xc, net1[f * NH + k], h1[k]); h2[k] = fmaf(xc, net2[f * NH + k], h2[k]); }
    }
#endif
    const float p1 = ann(net1, h1);
    const float p2 = ann(net2, h2);
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
