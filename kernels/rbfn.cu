// hyperapp_rbfn_score_f32: the RBFN forward pass (thesis eqs. 2.1-2.2) fused over a BIP float32 cube.
//
// Compile-time constants (injected as #defines by hyperapp.kernels.get_kernel):
//   NB    bands per pixel            K     whitened dimensions (== NB when DIAG)
//   NH    hidden neurons             DIAG  1: per-band scaling (whiten="std"); 0: dense projection
//   NORM  1: divide each spectrum by its L2 norm before whitening
//
// Thread mapping. A block has WARPS warps; each warp owns tiles of 32 consecutive pixels (a grid-stride
// loop over tiles). The 32 pixels of a tile are 32*NB contiguous floats in memory: the warp copies them
// into one of its two shared-memory buffers with coalesced 16-byte asynchronous copies (cp.async; lane l
// takes vectors l, l+32, ...), and while the copy of tile t+1 is in flight lane l computes pixel l of
// tile t alone from its shared-memory row (double buffering). A first version loaded through registers
// and stalled each warp on its loads before computing: 0.178 ms for the 64-band case on an H100. This is the thesis's neuron-level
// parallelism turned around: on a current GPU the whole network is a few hundred FMAs per pixel, far
// less than the time to fetch the pixel, so one thread per pixel with every neuron in registers beats
// splitting a pixel over threads (synapse level) or a neuron over threads, which need shared-memory
// reductions. The projection A and the centres U live in shared memory, loaded once per block (the
// grid is persistent), and are read as 16-byte broadcasts (all lanes the same address): one LDS.128
// feeds four FMAs. (A first version read them as constant-memory FFMA operands; the constant cache
// serves about one new word per clock per SM, which capped the 64-band PCA-16 case at 2.4x its read
// floor on an H100.) The small per-dimension vectors stay in constant memory.
// Rows are padded to STRIDE floats with STRIDE % 8 == 4, so the 16-byte row reads of 8 consecutive lanes
// hit distinct banks (conflict-free); odd STRIDE does the same for scalar rows.
// Memory traffic: each pixel's NB*4 bytes are read once from global memory, 4 bytes written.

#define WARPS 4
#if (NB % 4) == 0
#define VEC 1
#define STRIDE ((NB % 8) == 0 ? NB + 4 : NB + 8)
#else
#define VEC 0
#define STRIDE ((NB % 2) == 0 ? NB + 1 : NB)
#endif
#define K4 ((((K) + 3) / 4) * 4)  // whitened dimensions padded to a float4 (pads are zero in A and U)
#if DIAG
#define A_SMEM 0
__constant__ float c_A[NB];          // per-band scaling a_j
#else
#define A_SMEM (NB * K4)             // shared: A[j*K4 + k]
#endif
#define PARAM_SMEM (A_SMEM + NH * K4) // shared: A then U[i*K4 + k]

__constant__ float c_shift[K4];      // -mean @ A
__constant__ float c_gamma[NH];      // 1 / (2 sigma^2)
__constant__ float c_w[NH];          // output weights
__constant__ float c_bias[1];        // output threshold th

__device__ __forceinline__ float rbfn_pixel(const float* __restrict__ x, const float* __restrict__ sA,
                                            const float* __restrict__ sU)
{
    float inv = 1.0f;
#if NORM
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < NB; ++j) ss = fmaf(x[j], x[j], ss);
    inv = ss > 0.0f ? rsqrtf(ss) : 1.0f;
#endif
    float d[NH];
#pragma unroll
    for (int i = 0; i < NH; ++i) d[i] = 0.0f;
#if DIAG
#if VEC
#pragma unroll
    for (int j = 0; j < NB; j += 4) {
        const float4 q = *reinterpret_cast<const float4*>(x + j);
        const float z0 = fmaf(q.x * inv, c_A[j + 0], c_shift[j + 0]);
        const float z1 = fmaf(q.y * inv, c_A[j + 1], c_shift[j + 1]);
        const float z2 = fmaf(q.z * inv, c_A[j + 2], c_shift[j + 2]);
        const float z3 = fmaf(q.w * inv, c_A[j + 3], c_shift[j + 3]);
#pragma unroll
        for (int i = 0; i < NH; ++i) {
            const float4 u = *reinterpret_cast<const float4*>(sU + i * K4 + j);
            float df = z0 - u.x; d[i] = fmaf(df, df, d[i]);
            df = z1 - u.y; d[i] = fmaf(df, df, d[i]);
            df = z2 - u.z; d[i] = fmaf(df, df, d[i]);
            df = z3 - u.w; d[i] = fmaf(df, df, d[i]);
        }
    }
#else
#pragma unroll 4
    for (int j = 0; j < NB; ++j) {
        const float z = fmaf(x[j] * inv, c_A[j], c_shift[j]);
#pragma unroll
        for (int i = 0; i < NH; ++i) {
            const float df = z - sU[i * K4 + j];
            d[i] = fmaf(df, df, d[i]);
        }
    }
#endif
#else
    float z[K4];
#pragma unroll
    for (int k = 0; k < K4; ++k) z[k] = 0.0f;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        const float xj = x[j];
#pragma unroll
        for (int k = 0; k < K4; k += 4) {
            const float4 a = *reinterpret_cast<const float4*>(sA + j * K4 + k);
            z[k + 0] = fmaf(xj, a.x, z[k + 0]);
            z[k + 1] = fmaf(xj, a.y, z[k + 1]);
            z[k + 2] = fmaf(xj, a.z, z[k + 2]);
            z[k + 3] = fmaf(xj, a.w, z[k + 3]);
        }
    }
#pragma unroll
    for (int k = 0; k < K4; ++k) z[k] = fmaf(z[k], inv, c_shift[k]);
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
#endif
    float y = c_bias[0];
#pragma unroll
    for (int i = 0; i < NH; ++i) y = fmaf(c_w[i], __expf(-d[i] * c_gamma[i]), y);
    return y;
}

// Copy [A | U] into the front of the block's dynamic shared memory (once per block: the grid is persistent).
__device__ __forceinline__ void stage_params(float* smem, const float* __restrict__ params)
{
    for (int i = threadIdx.x; i < PARAM_SMEM; i += blockDim.x) smem[i] = params[i];
    __syncthreads();
}

// Asynchronous global -> shared copies (cp.async, sm_80+): the copy of the next tile is in flight while
// the warp computes the current one, so every warp keeps its loads going through its compute phase.
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

// Start copying tile t (32 pixels) into a warp's buffer: lane l copies vectors l, l+32, ...
__device__ __forceinline__ void issue_tile(const float* __restrict__ X, long long n, long long t, float* buf, int lane)
{
    const long long base = t * 32;
    const int npix = (int)min(32LL, n - base);
#if VEC
    const float* src = X + base * NB;
    const int nvec = npix * (NB / 4);
    for (int v = lane; v < nvec; v += 32) {
        const int e = v * 4;
        const int p = e / NB;
        cp_async16(buf + p * STRIDE + (e - p * NB), src + e);
    }
#else
    const float* src = X + base * NB;
    const int ne = npix * NB;
    for (int e = lane; e < ne; e += 32) {
        const int p = e / NB;
        cp_async4(buf + p * STRIDE + (e - p * NB), src + e);
    }
#endif
    cp_async_commit();
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
hyperapp_rbfn_score_f32(const float* __restrict__ X, long long n, const float* __restrict__ params,
                        float* __restrict__ out)
{
    // dynamic shared memory: [A (dense only) | U | two 32 x STRIDE pixel tiles per warp]
    extern __shared__ __align__(16) float smem[];
    stage_params(smem, params);
    const float* sA = smem;
    const float* sU = smem + A_SMEM;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    float* bufs = smem + PARAM_SMEM + warp * 2 * 32 * STRIDE;
    const long long ntiles = (n + 31) / 32;
    const long long step = (long long)gridDim.x * WARPS;
    long long t = (long long)blockIdx.x * WARPS + warp;
    if (t >= ntiles) return;
    issue_tile(X, n, t, bufs, lane);
    for (int k = 0; t < ntiles; t += step, ++k) {
        float* cur = bufs + (k & 1) * 32 * STRIDE;
        const long long next = t + step;
        if (next < ntiles) {
            issue_tile(X, n, next, bufs + ((k + 1) & 1) * 32 * STRIDE, lane);
            cp_async_wait_all_but_one();  // this lane's copies of tile t have landed
        } else {
            cp_async_wait_all();
        }
        __syncwarp();  // ... and every other lane's
        const long long base = t * 32;
        if (base + lane < n) out[base + lane] = rbfn_pixel(cur + lane * STRIDE, sA, sU);
        __syncwarp();  // the buffer is refilled two tiles from now
    }
}

#if !DIAG && VEC
// hyperapp_rbfn_score_direct_f32: the same network without staging pixels in shared memory, for wide
// pixels (many bands). One thread per pixel (grid-stride); each lane streams its own pixel in chunks of
// eight 16-byte loads (128 contiguous bytes, issued back to back so the second half of every 32-byte
// sector is an L1 hit for the next load), folds each chunk into the projection z = x A and the squared
// norm, and only then applies the normalisation (z is linear in x). Shared memory holds only A and U,
// so many more warps fit on an SM than with two staged 32-pixel tiles per warp.
extern "C" __global__ void __launch_bounds__(128)
hyperapp_rbfn_score_direct_f32(const float* __restrict__ X, long long n, const float* __restrict__ params,
                               float* __restrict__ out)
{
    extern __shared__ __align__(16) float smem[];
    stage_params(smem, params);
    const float* sA = smem;
    const float* sU = smem + A_SMEM;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x) {
        const float4* px = reinterpret_cast<const float4*>(X + p * NB);
        float z[K4];
#pragma unroll
        for (int k = 0; k < K4; ++k) z[k] = 0.0f;
        float ss = 0.0f;
#pragma unroll 1
        for (int j0 = 0; j0 < NB / 4; j0 += 8) {
            float4 q[8];
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (j0 + u < NB / 4) q[u] = __ldcs(px + j0 + u);
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                if (j0 + u < NB / 4) {
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
#if NORM
        const float inv = ss > 0.0f ? rsqrtf(ss) : 1.0f;
#else
        const float inv = 1.0f;
#endif
        float y = c_bias[0];
#pragma unroll
        for (int i = 0; i < NH; ++i) {
            float d = 0.0f;
#pragma unroll
            for (int k = 0; k < K4; k += 4) {
                const float4 u = *reinterpret_cast<const float4*>(sU + i * K4 + k);
                float df = fmaf(z[k + 0], inv, c_shift[k + 0]) - u.x; d = fmaf(df, df, d);
                df = fmaf(z[k + 1], inv, c_shift[k + 1]) - u.y; d = fmaf(df, df, d);
                df = fmaf(z[k + 2], inv, c_shift[k + 2]) - u.z; d = fmaf(df, df, d);
                df = fmaf(z[k + 3], inv, c_shift[k + 3]) - u.w; d = fmaf(df, df, d);
            }
            y = fmaf(c_w[i], __expf(-d * c_gamma[i]), y);
        }
        out[p] = y;
    }
}
#endif
