// hyperapp_rbfn_score: the RBFN forward pass (thesis eqs. 2.1-2.2) fused over a BIP float32 cube.
//
// Template parameters (a small fixed set, chosen by models/rbfn_gpu.py; never the cube's band count):
//   K4    whitened dimensions padded to 8, 16, 32 or 64 (pads are zero in A, U and the shift)
//   NH    hidden neurons padded to the set's next size (a padded neuron has output weight 0)
//   DIAG  1: per-band scaling (whiten="std", one z per band); 0: dense projection to K4 dimensions
//   NORM  1: divide each spectrum by its L2 norm before whitening
// The band count nb is a runtime argument: a new sensor's cube needs no new compilation (the kernel
// specialised on it took 15 s to compile for a 224-band cube, on its first click). Rows are handled as
// nbp = nb rounded up to 4 floats; the pads are zero in the pixel tiles, A, U and the scaling.
//
// Parameters (one float32 buffer, staged into shared memory once per block; the grid is persistent):
//   dense: A[nbp * K4] (row j), U[NH * K4], shift[K4], gamma[NH], w[NH], bias[4]
//   diag:  U[NH * nbp], a[nbp], shift[nbp], gamma[NH], w[NH], bias[4]
// with shift = -mean @ A (the centring folded in), gamma = 1 / (2 sigma^2), w the output weights.
//
// Thread mapping (staged). A block has WARPS warps; each warp owns tiles of 32 consecutive pixels (a
// grid-stride loop over tiles). The 32 pixels of a tile are 32*nb contiguous floats: the warp copies them
// into one of its two shared-memory buffers with coalesced asynchronous copies (cp.async; 16-byte copies
// when nb % 4 == 0, else 4-byte), and while the copy of tile t+1 is in flight lane l computes pixel l of
// tile t alone from its shared-memory row (double buffering). On a current GPU the whole network is a
// few hundred FMAs per pixel, far less than the time to fetch the pixel, so one thread per pixel with
// every neuron in registers beats splitting a pixel over threads. A and U are read as 16-byte broadcasts
// (all lanes the same address): one LDS.128 feeds four FMAs. Rows are padded to a stride with
// stride % 8 == 4, so the 16-byte row reads of 8 consecutive lanes hit distinct banks (conflict-free).
// Memory traffic: each pixel's nb*4 bytes are read once from global memory, 4 bytes written.

#define WARPS 4

template <int K4, int NH, bool DIAG>
struct Layout {
    // offsets (floats) of each part of the staged parameters
    static __device__ __forceinline__ int u(int nbp) { return DIAG ? 0 : nbp * K4; }
    static __device__ __forceinline__ int a(int nbp) { return NH * nbp; }  // diag only
    static __device__ __forceinline__ int shift(int nbp) { return DIAG ? NH * nbp + nbp : nbp * K4 + NH * K4; }
    static __device__ __forceinline__ int gamma(int nbp) { return shift(nbp) + (DIAG ? nbp : K4); }
    static __device__ __forceinline__ int w(int nbp) { return gamma(nbp) + NH; }
    static __device__ __forceinline__ int bias(int nbp) { return w(nbp) + NH; }
    static __device__ __forceinline__ int total(int nbp) { return bias(nbp) + 4; }
};

template <int NH>
__device__ __forceinline__ float rbfn_output(const float* d, const float* __restrict__ sp_gamma,
                                             const float* __restrict__ sp_w, float bias)
{
    float y = bias;
#pragma unroll
    for (int i = 0; i < NH; ++i) y = fmaf(sp_w[i], __expf(-d[i] * sp_gamma[i]), y);
    return y;
}

// One pixel from its (zero-padded, 16-byte aligned) shared-memory row x of nbp floats.
template <int K4, int NH, bool DIAG, bool NORM>
__device__ __forceinline__ float rbfn_pixel(const float* __restrict__ x, int nbp, const float* __restrict__ sp)
{
    typedef Layout<K4, NH, DIAG> L;
    float inv = 1.0f;
    if constexpr (NORM) {
        float ss = 0.0f;
#pragma unroll 4
        for (int j = 0; j < nbp; j += 4) {
            const float4 q = *reinterpret_cast<const float4*>(x + j);
            ss = fmaf(q.x, q.x, ss); ss = fmaf(q.y, q.y, ss); ss = fmaf(q.z, q.z, ss); ss = fmaf(q.w, q.w, ss);
        }
        inv = ss > 0.0f ? rsqrtf(ss) : 1.0f;
    }
    float d[NH];
#pragma unroll
    for (int i = 0; i < NH; ++i) d[i] = 0.0f;
    if constexpr (DIAG) {
        const float* sU = sp;
        const float* sa = sp + L::a(nbp);
        const float* sh = sp + L::shift(nbp);
#pragma unroll 2
        for (int j = 0; j < nbp; j += 4) {
            const float4 q = *reinterpret_cast<const float4*>(x + j);
            const float4 a = *reinterpret_cast<const float4*>(sa + j);
            const float4 s = *reinterpret_cast<const float4*>(sh + j);
            const float z0 = fmaf(q.x * inv, a.x, s.x);
            const float z1 = fmaf(q.y * inv, a.y, s.y);
            const float z2 = fmaf(q.z * inv, a.z, s.z);
            const float z3 = fmaf(q.w * inv, a.w, s.w);
#pragma unroll
            for (int i = 0; i < NH; ++i) {
                const float4 u = *reinterpret_cast<const float4*>(sU + i * nbp + j);
                float df = z0 - u.x; d[i] = fmaf(df, df, d[i]);
                df = z1 - u.y; d[i] = fmaf(df, df, d[i]);
                df = z2 - u.z; d[i] = fmaf(df, df, d[i]);
                df = z3 - u.w; d[i] = fmaf(df, df, d[i]);
            }
        }
    } else {
        const float* sA = sp;
        const float* sU = sp + L::u(nbp);
        const float* sh = sp + L::shift(nbp);
        float z[K4];
#pragma unroll
        for (int k = 0; k < K4; ++k) z[k] = 0.0f;
#pragma unroll 2
        for (int j = 0; j < nbp; j += 4) {
            const float4 q = *reinterpret_cast<const float4*>(x + j);
            const float xs[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
#pragma unroll
                for (int k = 0; k < K4; k += 4) {
                    const float4 a = *reinterpret_cast<const float4*>(sA + (j + e) * K4 + k);
                    z[k + 0] = fmaf(xs[e], a.x, z[k + 0]);
                    z[k + 1] = fmaf(xs[e], a.y, z[k + 1]);
                    z[k + 2] = fmaf(xs[e], a.z, z[k + 2]);
                    z[k + 3] = fmaf(xs[e], a.w, z[k + 3]);
                }
            }
        }
#pragma unroll
        for (int k = 0; k < K4; ++k) z[k] = fmaf(z[k], inv, sh[k]);
#pragma unroll
        for (int i = 0; i < NH; ++i) {
#pragma unroll
            for (int k = 0; k < K4; k += 4) {
                const float4 u = *reinterpret_cast<const float4*>(sU + i * K4 + k);
                float df = z[k + 0] - u.x; d[i] = fmaf(df, df, d[i]);
                df = z[k + 1] - u.y; d[i] = fmaf(df, df, d[i]);
                df = z[k + 2] - u.z; d[i] = fmaf(df, df, d[i]);
                df = z[k + 3] - u.w; d[i] = fmaf(df, df, d[i]);
            }
        }
    }
    return rbfn_output<NH>(d, sp + L::gamma(nbp), sp + L::w(nbp), sp[L::bias(nbp)]);
}

// Copy the parameters into the front of the block's dynamic shared memory (once per block).
__device__ __forceinline__ void stage_params(float* smem, const float* __restrict__ params, int count)
{
    for (int i = threadIdx.x; i < count; i += blockDim.x) smem[i] = params[i];
}

// Asynchronous global -> shared copies (cp.async, sm_80+): the copy of the next tile is in flight while
// the warp computes the current one.
__device__ __forceinline__ void cp_async16(float* smem, const float* gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async4(float* smem, const float* gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all_but_one() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// Start copying tile t (32 pixels of nb floats) into a warp's buffer (rows of `stride` floats): lane l
// copies vectors (or floats) l, l+32, ...
__device__ __forceinline__ void issue_tile(const float* __restrict__ X, long long n, int nb, int stride,
                                           long long t, float* buf, int lane)
{
    const long long base = t * 32;
    const int npix = (int)min(32LL, n - base);
    const float* src = X + base * nb;
    if ((nb & 3) == 0) {
        const int nv = nb >> 2;
        const int nvec = npix * nv;
        for (int v = lane; v < nvec; v += 32) {
            const int p = v / nv;
            const int e = (v - p * nv) * 4;
            cp_async16(buf + p * stride + e, src + (long long)v * 4);
        }
    } else {
        const int ne = npix * nb;
        for (int e = lane; e < ne; e += 32) {
            const int p = e / nb;
            cp_async4(buf + p * stride + (e - p * nb), src + e);
        }
    }
    cp_async_commit();
}

template <int K4, int NH, bool DIAG, bool NORM>
__global__ void __launch_bounds__(WARPS * 32)
hyperapp_rbfn_score(const float* __restrict__ X, long long n, int nb, int stride,
                    const float* __restrict__ params, float* __restrict__ out)
{
    typedef Layout<K4, NH, DIAG> L;
    // dynamic shared memory: [parameters | two 32 x stride pixel tiles per warp]
    extern __shared__ __align__(16) float smem[];
    const int nbp = (nb + 3) & ~3;
    const int nparam = L::total(nbp);
    stage_params(smem, params, nparam);
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    float* bufs = smem + nparam + warp * 2 * 32 * stride;
    // the rows' pads (floats nb .. nbp-1), which no copy writes: zero, so whole float4s can be read
    if (nbp > nb)
        for (int i = lane; i < 2 * 32 * (nbp - nb); i += 32)
            bufs[(i / (nbp - nb)) * stride + nb + i % (nbp - nb)] = 0.0f;
    __syncthreads();
    const long long ntiles = (n + 31) / 32;
    const long long step = (long long)gridDim.x * WARPS;
    long long t = (long long)blockIdx.x * WARPS + warp;
    if (t >= ntiles) return;
    issue_tile(X, n, nb, stride, t, bufs, lane);
    for (int k = 0; t < ntiles; t += step, ++k) {
        float* cur = bufs + (k & 1) * 32 * stride;
        const long long next = t + step;
        if (next < ntiles) {
            issue_tile(X, n, nb, stride, next, bufs + ((k + 1) & 1) * 32 * stride, lane);
            cp_async_wait_all_but_one();  // this lane's copies of tile t have landed
        } else {
            cp_async_wait_all();
        }
        __syncwarp();  // ... and every other lane's
        const long long base = t * 32;
        if (base + lane < n) out[base + lane] = rbfn_pixel<K4, NH, DIAG, NORM>(cur + lane * stride, nbp, smem);
        __syncwarp();  // the buffer is refilled two tiles from now
    }
}

// hyperapp_rbfn_score_direct: the dense network without staging pixels in shared memory, for wide
// pixels (many bands: two staged tiles per warp of 285 bands would not fit an SM). One thread per pixel
// (grid-stride); each lane streams its own pixel in chunks of eight 16-byte loads (128 contiguous bytes,
// issued back to back so the second half of every 32-byte sector is an L1 hit for the next load; four
// 4-byte loads each where nb % 4 != 0 leaves the rows unaligned, the bands past nb read as zero), folds
// each chunk into the projection z = x A and the squared norm, and only then applies the normalisation
// (z is linear in x). Shared memory holds only the parameters, so many more warps fit on an SM than with
// two staged 32-pixel tiles per warp.
template <int K4, int NH, bool NORM>
__global__ void __launch_bounds__(128)
hyperapp_rbfn_score_direct(const float* __restrict__ X, long long n, int nb, const float* __restrict__ params,
                           float* __restrict__ out)
{
    typedef Layout<K4, NH, false> L;
    extern __shared__ __align__(16) float smem[];
    const int nbp = (nb + 3) & ~3;
    stage_params(smem, params, L::total(nbp));
    __syncthreads();
    const float* sA = smem;
    const float* sU = smem + L::u(nbp);
    const float* sh = smem + L::shift(nbp);
    const int nv = nbp >> 2;
    const bool aligned = (nb & 3) == 0;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x) {
        const float* xp = X + p * nb;
        const float4* px = reinterpret_cast<const float4*>(xp);
        float z[K4];
#pragma unroll
        for (int k = 0; k < K4; ++k) z[k] = 0.0f;
        float ss = 0.0f;
#pragma unroll 1
        for (int j0 = 0; j0 < nv; j0 += 8) {
            float4 q[8];
            if (aligned) {
#pragma unroll
                for (int u = 0; u < 8; ++u)
                    if (j0 + u < nv) q[u] = __ldcs(px + j0 + u);
            } else {
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    const int b = 4 * (j0 + u);
                    q[u].x = b + 0 < nb ? __ldcs(xp + b + 0) : 0.0f;
                    q[u].y = b + 1 < nb ? __ldcs(xp + b + 1) : 0.0f;
                    q[u].z = b + 2 < nb ? __ldcs(xp + b + 2) : 0.0f;
                    q[u].w = b + 3 < nb ? __ldcs(xp + b + 3) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                if (j0 + u < nv) {
                    const float xs[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int j = 4 * (j0 + u) + e;
                        ss = fmaf(xs[e], xs[e], ss);
#pragma unroll
                        for (int k = 0; k < K4; k += 4) {
                            const float4 a = *reinterpret_cast<const float4*>(sA + j * K4 + k);
                            z[k + 0] = fmaf(xs[e], a.x, z[k + 0]);
                            z[k + 1] = fmaf(xs[e], a.y, z[k + 1]);
                            z[k + 2] = fmaf(xs[e], a.z, z[k + 2]);
                            z[k + 3] = fmaf(xs[e], a.w, z[k + 3]);
                        }
                    }
                }
            }
        }
        const float inv = NORM ? (ss > 0.0f ? rsqrtf(ss) : 1.0f) : 1.0f;
#pragma unroll
        for (int k = 0; k < K4; ++k) z[k] = fmaf(z[k], inv, sh[k]);
        const float* sg = smem + L::gamma(nbp);
        const float* sw = smem + L::w(nbp);
        float y = smem[L::bias(nbp)];
#pragma unroll
        for (int i = 0; i < NH; ++i) {
            float d = 0.0f;
#pragma unroll
            for (int k = 0; k < K4; k += 4) {
                const float4 u = *reinterpret_cast<const float4*>(sU + i * K4 + k);
                float df = z[k + 0] - u.x; d = fmaf(df, df, d);
                df = z[k + 1] - u.y; d = fmaf(df, df, d);
                df = z[k + 2] - u.z; d = fmaf(df, df, d);
                df = z[k + 3] - u.w; d = fmaf(df, df, d);
            }
            y = fmaf(sw[i], __expf(-d * sg[i]), y);
        }
        out[p] = y;
    }
}
