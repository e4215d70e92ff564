// hyperapp_quad_rows_tc: kernels/quadform.cu's RX or ACE of every row of a BIP float32 cube in one pass,
// its GEMM on the tensor cores (sm_80 and later) at float32's accuracy.
//
// For row r: d = x * s_r - c, where s_r is 1 or (normalize) 1 / ||x||, and z = d U (U: nb x nb,
// row-major). mode 1 writes RX = z.z; mode 0 writes ACE = (d.v)^2 / (ss z.z), clipped to [0, 1] and 0
// where the denominator is 0.
//
// Precision (3xTF32). A TF32 operand keeps 10 of float32's 23 mantissa bits; each operand is split into
// its TF32 part and the TF32 part of the rest (a = a_hi + a_lo, exact to about 2^-21 of a), and
// z = a_hi b_hi + a_hi b_lo + a_lo b_hi, accumulated in float32: the products' error is that of float32
// arithmetic (a few units of 2^-22), at three tensor-core products where float32 FMAs took one SIMT
// instruction per multiply-add. U is split as it is staged.
//
// Tiling. A block takes TP = 128 pixels (grid-stride over pixel tiles) and walks the z columns in tiles
// of 128; for each column tile the bands in steps of 8 (one mma.m16n8k8's depth). The 256 threads stage
// d (128 pixels x 8 bands) and U's 8 rows (hi and lo) in shared memory; warp w computes 32 pixels
// (32 (w % 4) .. +32: two 16-row tiles) x 64 columns (8 tiles of 8: n-tiles h, h + 2, ..., h + 14 of the
// column tile, h = w / 4), so that where U is upper triangular (tri: column j needs bands k <= j only,
// and an n-tile skips the band steps past its last column) the two halves of the warps do 64 and 72
// n-tile steps of 128: balanced, about 56 % of the full product. The accumulator's rows are known from
// the mma layout (lane / 4 and lane / 4 + 8 of each 16-row tile), so each thread sums its squares over its
// columns and the four lanes of a row add theirs (two shuffles); the two column halves meet in shared
// memory. Each step's global loads are issued into registers during the step before (without it the
// kernel waited on memory at every step: 4.1 ms for a full RX at 2048 x 2048 x 128 on an H200, 3.6 with
// it, against 4.4 for the SIMT kernel). Band count, columns and pixels are runtime values (nothing is
// compiled per cube).

#define TP 128
#define TCOL 128
#define XLD 12    // Xs row stride (floats): lane (g, t) reads Xs[g][t]: 12 g + t covers 32 banks once
#define ULD 136   // Us row stride: lane (g, t) reads Us[t][g]: 8 t + g covers 32 banks once
#define QTHREADS 256

#include "quadform_common.cuh"  // pair_scale, quad_score: shared with kernels/quadform.cu

__device__ __forceinline__ unsigned tf32_hi(float a)
{
    return __float_as_uint(a) & 0xffffe000u;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // (the caller takes kernels/quadform.cu below compute capability 8.0)
#endif
}

// One thread's share of a band step's staging, into registers: 4 values of its pixel (bands k0 + sh ..
// + 3) and 4 of U (row k0 + ur, columns col .. col + 3), zero past the matrix.
__device__ __forceinline__ void load_step(float (&xv)[4], float (&uv)[4], const float* __restrict__ xr, bool pin,
                                          bool vec, int nb, int k0, int sh, const float* __restrict__ U, int ur,
                                          int col)
{
    if (pin && vec && k0 + sh + 3 < nb) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(xr + k0 + sh));
        xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w;
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) xv[e] = (pin && k0 + sh + e < nb) ? __ldg(xr + k0 + sh + e) : 0.0f;
    }
    const int ku = k0 + ur;
#pragma unroll
    for (int e = 0; e < 4; ++e) uv[e] = (ku < nb && col + e < nb) ? __ldg(U + (long long)ku * nb + col + e) : 0.0f;
}

extern "C" __global__ void __launch_bounds__(QTHREADS, 2)
hyperapp_quad_rows_tc(const float* __restrict__ X, long long n, int nb, int normalize, const float* __restrict__ c,
                      const float* __restrict__ U, int tri,
                      const float* __restrict__ v, float ss, int mode, float* __restrict__ out)
{
    __shared__ __align__(16) float Xs[TP][XLD];
    __shared__ __align__(16) float Us[8][ULD];
    __shared__ __align__(16) float Ul[8][ULD];
    __shared__ float qs[TP], ts[TP], sc[TP];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;       // the mma fragments' row group and thread in group
    const int m0 = (warp & 3) * 32;              // this warp's pixels: m0 .. m0 + 31 of the tile
    const int h = warp >> 2;                     // its n-tiles: h, h + 2, ..., h + 14 (8 columns each)
    const int sp = tid >> 1, sh = (tid & 1) * 4; // staging: pixel sp, bands sh .. sh + 3 of a step
    const int ur = tid >> 5, uc = (tid & 31) * 4;  // staging: U's row ur of a step, columns uc .. uc + 3
    const bool vec = (nb & 3) == 0;              // rows start 16-byte aligned: float4 loads
    for (long long p0 = (long long)blockIdx.x * TP; p0 < n; p0 += (long long)gridDim.x * TP) {
        const long long pr = p0 + sp;
        const bool pin = pr < n;
        const float* xr = X + (pin ? pr : 0) * nb;
        if (sh == 0) { qs[sp] = 0.0f; ts[sp] = 0.0f; }
        float s2 = 0.0f;
        if (normalize && pin) {  // the two threads of a pixel each sum every other group of 4 bands
            if (vec) {  // 16-byte loads, four in flight
#pragma unroll 4
                for (int k = sh; k < nb; k += 8) {
                    const float4 a = __ldg(reinterpret_cast<const float4*>(xr + k));
                    s2 = fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(a.z, a.z, fmaf(a.w, a.w, s2))));
                }
            } else {
                for (int k = sh; k < nb; k += 8)
                    for (int e = 0; e < 4 && k + e < nb; ++e) s2 = fmaf(__ldg(xr + k + e), __ldg(xr + k + e), s2);
            }
        }
        const float scale = pair_scale(s2, normalize);
        if (sh == 0) sc[sp] = scale;
        __syncthreads();
        const float s_r = sc[sp];
        for (int j0 = 0; j0 < nb; j0 += TCOL) {
            const bool dot = mode == 0 && j0 == 0;  // ACE's d.v needs every band, once
            const int kend = (tri && !dot) ? min(nb, j0 + TCOL) : nb;
            float acc[2][8][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
            float xv[4], uv[4];  // the next step's pixel values and U entries, loaded a step ahead
            load_step(xv, uv, xr, pin, vec, nb, 0, sh, U, ur, j0 + uc);
            for (int k0 = 0; k0 < kend; k0 += 8) {
                // stage d = x s_r - c for bands k0 .. k0 + 7 (and its dot with v) and U's rows, split
                float tp = 0.0f;
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int k = k0 + sh + e;
                    const float d = (pin && k < nb) ? fmaf(xv[e], s_r, -__ldg(c + k)) : 0.0f;
                    Xs[sp][sh + e] = d;
                    if (dot && k < nb) tp = fmaf(d, __ldg(v + k), tp);
                }
                if (dot) {
                    tp += __shfl_xor_sync(0xffffffffu, tp, 1);
                    if (sh == 0) ts[sp] += tp;
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float uh = __uint_as_float(tf32_hi(uv[e]));
                    Us[ur][uc + e] = uh;
                    Ul[ur][uc + e] = __uint_as_float(tf32_hi(uv[e] - uh));
                }
                __syncthreads();
                if (k0 + 8 < kend)  // the next step's loads, in flight during this step's products
                    load_step(xv, uv, xr, pin, vec, nb, k0 + 8, sh, U, ur, j0 + uc);
                // this warp's A fragments (two 16-row tiles), split into TF32 high and low parts
                unsigned ah[2][4], al[2][4];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const float a[4] = {Xs[m0 + 16 * i + g][t], Xs[m0 + 16 * i + g + 8][t],
                                        Xs[m0 + 16 * i + g][t + 4], Xs[m0 + 16 * i + g + 8][t + 4]};
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        ah[i][e] = tf32_hi(a[e]);
                        al[i][e] = tf32_hi(a[e] - __uint_as_float(ah[i][e]));
                    }
                }
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const int cn = (h + 2 * j) * 8;  // the n-tile's first column in the tile
                    // triangular: the n-tile's columns cn .. cn + 7 need bands up to j0 + cn + 7 only
                    if (j0 + cn >= nb || (tri && k0 >= j0 + cn + 8)) continue;
                    const unsigned bh0 = __float_as_uint(Us[t][cn + g]), bh1 = __float_as_uint(Us[t + 4][cn + g]);
                    const unsigned bl0 = __float_as_uint(Ul[t][cn + g]), bl1 = __float_as_uint(Ul[t + 4][cn + g]);
#pragma unroll
                    for (int i = 0; i < 2; ++i) {
                        mma_tf32(acc[i][j], al[i], bh0, bh1);
                        mma_tf32(acc[i][j], ah[i], bl0, bl1);
                        mma_tf32(acc[i][j], ah[i], bh0, bh1);
                    }
                }
                __syncthreads();
            }
            // epilogue: rows g and g + 8 of each 16-row tile; the four lanes of a row hold its columns
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                float lo = 0.0f, hi = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    lo = fmaf(acc[i][j][0], acc[i][j][0], fmaf(acc[i][j][1], acc[i][j][1], lo));
                    hi = fmaf(acc[i][j][2], acc[i][j][2], fmaf(acc[i][j][3], acc[i][j][3], hi));
                }
                lo += __shfl_xor_sync(0xffffffffu, lo, 1);
                lo += __shfl_xor_sync(0xffffffffu, lo, 2);
                hi += __shfl_xor_sync(0xffffffffu, hi, 1);
                hi += __shfl_xor_sync(0xffffffffu, hi, 2);
                if (t == 0) {
                    atomicAdd(&qs[m0 + 16 * i + g], lo);
                    atomicAdd(&qs[m0 + 16 * i + g + 8], hi);
                }
            }
        }
        __syncthreads();
        if (sh == 0 && pin) out[pr] = quad_score(qs[sp], ts[sp], ss, mode);  // RX or ACE
        __syncthreads();
    }
}
