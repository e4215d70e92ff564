// hyperapp_quad_rows: RX or ACE of every row of a BIP float32 cube in one pass, the whitening GEMM fused
// with the row reductions that follow it, so the whitened pixels never reach device memory.
//
// For row r: d = x * s_r - c, where s_r is 1 or (normalize) 1 / ||x||, and z = d U (U: nb x nb,
// row-major). mode 1 writes RX = z.z; mode 0 writes ACE = (d.v)^2 / (ss z.z), clipped to [0, 1] and 0
// where the denominator is 0 (spectral.ace; v = U s, ss = s.s for the whitened target s, so d.v = z.s).
// When U is upper triangular (tri = 1: the inverse transposed Cholesky factor), z_j needs d_k for k <= j
// only, and each warp skips the band steps past its columns: about half the FMAs.
// The array formulation this replaces made five passes over the cube's size in device memory (the
// centred copy, the GEMM's input and output, the row reduction): 7 ms for RX at 2048 x 2048 x 128 on
// an H200; this reads each pixel once from DRAM (a block's pixel tile stays in L2 across column tiles).
//
// Tiling (a SIMT GEMM with a row-norm epilogue). A block takes TP = 128 pixels (grid-stride over pixel
// tiles) and walks the z columns in tiles of TC = 128; for each column tile the bands in steps of KC = 16:
// the 256 threads stage d (KC x TP, band-major) and U's rows (KC x TC) in shared memory (each step's global loads issued
// into registers during the step before), then thread
// (warp w, lane l) accumulates an 8 x 8 block of z: pixels 8 (l / 2) .. +8 and columns 16 w + 8 (l % 2)
// .. +8 of the tile, four 16-byte shared loads feeding 64 FMAs per band. The epilogue adds each pixel's
// sum of squares over the thread's 8 columns into shared memory; the band count, the columns and the
// pixels are runtime values (nothing is compiled per cube).

#define TP 128
#define TC 128
#define KC 16
#define QTHREADS 256

#include "quadform_common.cuh"  // pair_scale, quad_score: shared with kernels/quadform_tc.cu

// One thread's share of a band step's staging: 8 floats of its pixel (bands 8 h .. 8 h + 7 of the step)
// and 8 of U (row r, columns 8 u .. 8 u + 7 of the tile), loaded into registers a step ahead.
struct Stage {
    float x[8], u[8];
};

__device__ __forceinline__ void load_stage(Stage& g, const float* __restrict__ xr, bool pin, bool vec, int nb,
                                           int kb, const float* __restrict__ U, int ku, int cu, int j0)
{
    if (pin && vec && kb + 7 < nb) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(xr + kb));
        const float4 b = __ldg(reinterpret_cast<const float4*>(xr + kb + 4));
        g.x[0] = a.x; g.x[1] = a.y; g.x[2] = a.z; g.x[3] = a.w;
        g.x[4] = b.x; g.x[5] = b.y; g.x[6] = b.z; g.x[7] = b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) g.x[e] = (pin && kb + e < nb) ? __ldg(xr + kb + e) : 0.0f;
    }
    const bool kin = ku < nb;
    const float* ur = U + (long long)(kin ? ku : 0) * nb + j0 + cu;
#pragma unroll
    for (int e = 0; e < 8; ++e) g.u[e] = (kin && j0 + cu + e < nb) ? __ldg(ur + e) : 0.0f;
}

extern "C" __global__ void __launch_bounds__(QTHREADS, 2)
hyperapp_quad_rows(const float* __restrict__ X, long long n, int nb, int normalize, const float* __restrict__ c,
                   const float* __restrict__ U, int tri, const float* __restrict__ v, float ss, int mode,
                   float* __restrict__ out)
{
    __shared__ __align__(16) float Xs[KC][TP];
    __shared__ __align__(16) float Us[KC][TC];
    __shared__ float qs[TP], ts[TP], sc[TP];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int pg = lane >> 1;                    // this thread's 8 pixels: 8 pg .. 8 pg + 7
    const int cl = warp * 16 + (lane & 1) * 8;   // its 8 columns in the tile: cl .. cl + 7
    const int lp = tid >> 1, lh = tid & 1;       // staging: pixel lp, bands 8 lh .. 8 lh + 7 of a step
    const int ur = tid >> 4, uc = (tid & 15) * 8;  // staging: U's row ur of a step, columns uc .. uc + 7
    const bool vec = (nb & 3) == 0;
    for (long long p0 = (long long)blockIdx.x * TP; p0 < n; p0 += (long long)gridDim.x * TP) {
        const long long pr = p0 + lp;
        const bool pin = pr < n;
        const float* xr = X + (pin ? pr : 0) * nb;
        if (lh == 0) { qs[lp] = 0.0f; ts[lp] = 0.0f; }
        float s2 = 0.0f;
        if (normalize && pin)  // the two threads of a pixel each sum every other group of 4 bands
            for (int k = 4 * lh; k < nb; k += 8)
                for (int e = 0; e < 4 && k + e < nb; ++e) s2 = fmaf(xr[k + e], xr[k + e], s2);
        const float scale = pair_scale(s2, normalize);
        if (lh == 0) sc[lp] = scale;
        __syncthreads();
        const float s_r = sc[lp];
        for (int j0 = 0; j0 < nb; j0 += TC) {
            // the bands this warp's columns need: all, or (upper triangular) up to its last column; ACE's
            // dot with v needs every band on the first column tile
            const bool dot = mode == 0 && j0 == 0;
            const int kneed = j0 + warp * 16 >= nb ? 0 : (tri ? min(nb, j0 + warp * 16 + 16) : nb);
            const int kend = (tri && !dot) ? min(nb, j0 + TC) : nb;
            float acc[8][8];
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
            Stage g;
            load_stage(g, xr, pin, vec, nb, 8 * lh, U, ur, uc, j0);
            for (int k0 = 0; k0 < kend; k0 += KC) {
                // stage d = x s_r - c for bands k0 .. k0 + KC - 1 (and its dot with v) and U's rows
                float tp = 0.0f;
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const int k = k0 + 8 * lh + e;
                    const float d = (pin && k < nb) ? fmaf(g.x[e], s_r, -__ldg(c + k)) : 0.0f;
                    Xs[8 * lh + e][lp] = d;
                    if (dot && k < nb) tp = fmaf(d, __ldg(v + k), tp);
                }
                if (dot) {
                    tp += __shfl_xor_sync(0xffffffffu, tp, 1);
                    if (lh == 0) ts[lp] += tp;
                }
                *reinterpret_cast<float4*>(&Us[ur][uc]) = make_float4(g.u[0], g.u[1], g.u[2], g.u[3]);
                *reinterpret_cast<float4*>(&Us[ur][uc + 4]) = make_float4(g.u[4], g.u[5], g.u[6], g.u[7]);
                __syncthreads();
                if (k0 + KC < kend)  // the next step's loads, in flight during this step's FMAs
                    load_stage(g, xr, pin, vec, nb, k0 + KC + 8 * lh, U, k0 + KC + ur, uc, j0);
                if (k0 < kneed) {
#pragma unroll
                    for (int kk = 0; kk < KC; ++kk) {
                        const float4 a0 = *reinterpret_cast<const float4*>(&Xs[kk][pg * 8]);
                        const float4 a1 = *reinterpret_cast<const float4*>(&Xs[kk][pg * 8 + 4]);
                        const float4 b0 = *reinterpret_cast<const float4*>(&Us[kk][cl]);
                        const float4 b1 = *reinterpret_cast<const float4*>(&Us[kk][cl + 4]);
                        const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                        for (int i = 0; i < 8; ++i)
#pragma unroll
                            for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
                    }
                }
                __syncthreads();
            }
            // epilogue: each pixel's sum of squares over this thread's 8 columns (zero past the matrix),
            // with its lane pair's (the warp's other 8 columns), then across warps (shared atomics)
            const bool cols_in = j0 + warp * 16 < nb;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                float s = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; ++j) s = fmaf(acc[i][j], acc[i][j], s);
                s += __shfl_xor_sync(0xffffffffu, s, 1);
                if ((lane & 1) == 0 && cols_in) atomicAdd(&qs[pg * 8 + i], s);
            }
        }
        __syncthreads();
        if (lh == 0 && pin) out[pr] = quad_score(qs[lp], ts[lp], ss, mode);  // RX or ACE
        __syncthreads();
    }
}
