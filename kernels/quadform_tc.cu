// hyperapp_quad_rows_tc: kernels/quadform.cu's RX or ACE of every row of a BIP float32 cube in one pass,
// its GEMM on the tensor cores (sm_80 and later) at float32's accuracy.
//
// For row r: d = x * s_r - c, where s_r is 1 or (normalize) 1 / ||x||, and z = d U (U: nb x nb). mode 1
// writes RX = z.z; mode 0 writes ACE = (d.v)^2 / (ss z.z), clipped to [0, 1] and 0 where the denominator
// is 0.
//
// Precision (3xTF32). A TF32 operand keeps 10 of float32's 23 mantissa bits; each operand is split into
// its TF32 part and the TF32 part of the rest (a = a_hi + a_lo, exact to about 2^-21 of a), and
// z = a_lo b_hi + a_hi b_lo + a_hi b_hi, accumulated in float32: the products' error is that of float32
// arithmetic (a few units of 2^-22). Both operands are split as their fragments are read from shared
// memory (a few integer operations, where a pre-split U would double the shared-memory traffic).
//
// Tiling. A block takes TP = 32 WM pixels at a time (grid-stride over pixel tiles) and walks the z columns
// in tiles of 128; for each column tile, the bands in chunks of KC. Every chunk (the tile's raw pixel
// values and U's KC x 128 entries, from a copy of U zero-padded to whole chunks and tiles:
// hyperapp_quad_pad) is copied into shared memory with cp.async into one of two buffers while the block
// computes the other: one wait and two barriers per chunk, and the copies run ahead across column tiles
// and pixel tiles. d = x s_r - c is formed as each A fragment is read. Within a chunk, warp w computes 32
// pixels (32 (w % WM) .. +32: two 16-row tiles) x 64 columns (8 n-tiles of 8: h, h + 2, ..., h + 14 of
// the column tile, h = w / WM), in steps of one mma.m16n8k8's depth, so that where U is upper triangular
// (tri: column j needs bands k <= j only; a group of JG n-tiles skips the steps past its last column) the
// two halves of the warps do near equal work. A group's products have no branch between them, so the
// compiler interleaves them (with one n-tile per group, each waited on the one before it). Each thread
// keeps the squares of its accumulator's columns (the mma layout gives it rows lane / 4 and lane / 4 + 8
// of each 16-row tile) in registers across column tiles; the four lanes of a row add theirs (two
// shuffles) and the two column halves meet in shared memory. s_r and ACE's d.v (all bands) come from a
// pass over the tile's rows before its first chunk (two threads per pixel), whose rows the previous tile
// asked into L2. Band count, columns and pixels are runtime values (nothing is compiled per cube); KC, WM
// and JG are tunables (hyperapp.models.classic picks KC by the block's shared memory).

#ifndef WM
#define WM 4      // warps along the pixels: TP = 32 WM pixels a tile, 64 WM threads a block
#endif
#define TP (32 * WM)
#define TCOL 128
#ifndef JG
#define JG 2      // n-tiles per branch-free group of products
#endif
#ifndef KC
#define KC 32     // bands per chunk (16 where a block may not have the shared memory of 32)
#endif
#define XLD (KC + 4)  // Xs row stride (floats): lane (g, t) reads Xs[g][t]: (KC + 4) g + t covers 32 banks once
#define ULD 136   // Us row stride: lane (g, t) reads Us[t][g]: 136 t + g covers 32 banks once
#define QTHREADS (64 * WM)
#define XBUF (TP * XLD)
#define UBUF (KC * ULD)
#define BUF (XBUF + UBUF)  // one buffer: the pixels' chunk, then U's rows

// what the tiling below assumes of the tunables
static_assert(WM >= 1 && WM <= 8, "1 to 8 warps along the pixels (2 * 32 WM threads, 128 registers each)");
static_assert(8 % JG == 0, "the groups cut a warp's 8 n-tiles evenly");
static_assert(KC % 8 == 0 && (KC * TCOL / 4) % QTHREADS == 0, "each thread copies whole 16-byte pieces of U");
static_assert(TCOL / 4 == 32, "a chunk row of U is 32 copies of 16 bytes (q >> 5 below)");

#include "quadform_common.cuh"  // pair_scale, quad_score: shared with kernels/quadform.cu

__device__ __forceinline__ unsigned tf32_hi(float a)
{
    return __float_as_uint(a) & 0xffffe000u;
}

// U (nb x nb, row-major) into Up (rows x cols, zero past nb). One thread per entry of Up.
extern "C" __global__ void hyperapp_quad_pad(const float* __restrict__ U, int nb, int rows, int cols,
                                             float* __restrict__ Up)
{
    const long long total = (long long)rows * cols;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int r = (int)(i / cols), c = (int)(i - (long long)r * cols);
        Up[i] = (r < nb && c < nb) ? U[(long long)r * nb + c] : 0.0f;
    }
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
#if __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "  // (not volatile: ptxas may interleave them)
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // (the caller takes kernels/quadform.cu below compute capability 8.0)
#endif
}

// Asynchronous copies into shared memory; `bytes` below the copy's size fills the rest with zeros.
__device__ __forceinline__ void copy16(float* dst, const float* src, int bytes)
{
#if __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
#endif
}
__device__ __forceinline__ void copy4(float* dst, const float* src, int bytes)
{
#if __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
#endif
}
__device__ __forceinline__ void copies_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void copies_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// The chunks of one pixel tile: column tile j0's bands 0 .. kend(j0), kend = nb (or, tri, the tile's last
// column + 1), in chunks of KC. Step s of the tile -> (j0, k0).
__device__ __forceinline__ int chunks_of(int j0, int nb, int tri)
{
    const int kend = tri ? min(nb, j0 + TCOL) : nb;
    return (kend + KC - 1) / KC;
}
__device__ __forceinline__ void step_at(int s, int nb, int tri, int& j0, int& k0, bool& last)
{
    j0 = 0;
    int m = chunks_of(0, nb, tri);
    while (s >= m) {
        s -= m;
        j0 += TCOL;
        m = chunks_of(j0, nb, tri);
    }
    k0 = s * KC;
    last = s == m - 1;
}

// Start copying step (tile p0, column tile j0, bands k0 ..) into buffer buf: the TP pixels' KC raw values
// (zero past the cube) and U's rows k0 .. k0 + KC - 1, columns j0 .. j0 + TCOL - 1 (Up: zero-padded).
__device__ __forceinline__ void issue_step(float* buf, const float* __restrict__ X, long long n, int nb,
                                           long long p0, int j0, int k0, const float* __restrict__ Up,
                                           int ldu, int tid)
{
    if ((nb & 3) == 0) {  // rows start 16-byte aligned: KC / 4 vectors of 4 per pixel
#pragma unroll
        for (int i = 0; i < TP * KC / 4 / QTHREADS; ++i) {
            const int q = tid + i * QTHREADS, p = q / (KC / 4), e = (q % (KC / 4)) * 4;
            const bool in = p0 + p < n && k0 + e < nb;
            copy16(buf + p * XLD + e, in ? X + (p0 + p) * nb + k0 + e : X, in ? 16 : 0);
        }
    } else {
#pragma unroll 4
        for (int i = 0; i < TP * KC / QTHREADS; ++i) {
            const int q = tid + i * QTHREADS, p = q / KC, e = q % KC;
            const bool in = p0 + p < n && k0 + e < nb;
            copy4(buf + p * XLD + e, in ? X + (p0 + p) * nb + k0 + e : X, in ? 4 : 0);
        }
    }
#pragma unroll
    for (int i = 0; i < KC * TCOL / 4 / QTHREADS; ++i) {
        const int q = tid + i * QTHREADS, r = q >> 5, e = (q & 31) * 4;
        copy16(buf + XBUF + r * ULD + e, Up + (long long)(k0 + r) * ldu + j0 + e, 16);
    }
    copies_commit();
}

__device__ __forceinline__ void zero(float (&acc)[2][8][4])
{
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}

// A pixel's scale s_r (1 / ||x||, or 1) and (ACE) t = d.v, d = x s_r - c, from the two threads that share its
// row (this one sums bands sh .. sh + 3, sh + 8 .., the other the groups between: pair_scale adds the two).
// Up to 128 bands with 16-byte loads, the row is read once into registers, every load in flight at once;
// otherwise in two passes (the second from the cache), 16-byte loads where the rows are 16-byte aligned.
__device__ __forceinline__ float row_terms(const float* __restrict__ X, long long n, int nb, long long p, int sh,
                                           int normalize, int mode, bool vec, const float* __restrict__ c,
                                           const float* __restrict__ v, float& tp)
{
    const bool pin = p < n;
    const float* xr = X + (pin ? p : 0) * nb;
    float s2 = 0.0f;
    tp = 0.0f;
    if (vec && nb <= 128) {
        float4 a[16];
#pragma unroll
        for (int e = 0; e < 16; ++e)
            a[e] = (pin && sh + 8 * e < nb) ? __ldg(reinterpret_cast<const float4*>(xr + sh + 8 * e))
                                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (normalize)
#pragma unroll
            for (int e = 0; e < 16; ++e)
                s2 = fmaf(a[e].x, a[e].x, fmaf(a[e].y, a[e].y, fmaf(a[e].z, a[e].z, fmaf(a[e].w, a[e].w, s2))));
        const float scale = pair_scale(s2, normalize);
        if (mode == 0)
#pragma unroll
            for (int e = 0; e < 16; ++e) {
                const int k = sh + 8 * e;
                if (pin && k < nb) {
                    const float4 m = __ldg(reinterpret_cast<const float4*>(c + k));
                    const float4 w = __ldg(reinterpret_cast<const float4*>(v + k));
                    tp = fmaf(fmaf(a[e].x, scale, -m.x), w.x, fmaf(fmaf(a[e].y, scale, -m.y), w.y, tp));
                    tp = fmaf(fmaf(a[e].z, scale, -m.z), w.z, fmaf(fmaf(a[e].w, scale, -m.w), w.w, tp));
                }
            }
        tp += __shfl_xor_sync(0xffffffffu, tp, 1);
        return scale;
    }
    if (normalize && pin) {
        if (vec) {
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
    if (mode == 0 && pin) {
        if (vec) {
#pragma unroll 2
            for (int k = sh; k < nb; k += 8) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(xr + k));
                const float4 m = __ldg(reinterpret_cast<const float4*>(c + k));
                const float4 w = __ldg(reinterpret_cast<const float4*>(v + k));
                tp = fmaf(fmaf(a.x, scale, -m.x), w.x, fmaf(fmaf(a.y, scale, -m.y), w.y, tp));
                tp = fmaf(fmaf(a.z, scale, -m.z), w.z, fmaf(fmaf(a.w, scale, -m.w), w.w, tp));
            }
        } else {
            for (int k = sh; k < nb; k += 8)
                for (int e = 0; e < 4 && k + e < nb; ++e)
                    tp = fmaf(fmaf(__ldg(xr + k + e), scale, -__ldg(c + k + e)), __ldg(v + k + e), tp);
        }
    }
    tp += __shfl_xor_sync(0xffffffffu, tp, 1);
    return scale;
}

extern "C" __global__ void __launch_bounds__(QTHREADS, 512 / QTHREADS)
hyperapp_quad_rows_tc(const float* __restrict__ X, long long n, int nb, int normalize, const float* __restrict__ c,
                      const float* __restrict__ Up, int ldu, int tri,
                      const float* __restrict__ v, float ss, int mode, float* __restrict__ out)
{
    extern __shared__ __align__(16) float smem[];  // two buffers of BUF floats
    __shared__ float sc[TP], ts[TP], qh[2][TP];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;  // the mma fragments' row group and thread in group
    const int m0 = (warp % WM) * 32;        // this warp's pixels: m0 .. m0 + 31 of the tile
    const int h = warp / WM;                // its n-tiles: h, h + 2, ..., h + 14 (8 columns each)
    const long long ntiles = (n + TP - 1) / TP;
    if ((long long)blockIdx.x >= ntiles) return;
    int steps = 0;  // steps per pixel tile
    for (int j0 = 0; j0 < nb; j0 += TCOL) steps += chunks_of(j0, nb, tri);
    const long long mine = (ntiles - blockIdx.x + gridDim.x - 1) / gridDim.x;  // this block's tiles
    const long long total = mine * steps;
    const bool pre = normalize || mode == 0;  // a pass over the rows before the tile's first chunk
    const bool vec = (nb & 3) == 0;           // rows start 16-byte aligned: float4 loads

    float acc[2][8][4];
    float q[2][2];   // this thread's squares of rows m0 + 16 i + g (+ 8), over its columns
    float srow[2][2];
    {
        int j0, k0;
        bool last;
        step_at(0, nb, tri, j0, k0, last);
        issue_step(smem, X, n, nb, (long long)blockIdx.x * TP, j0, k0, Up, ldu, tid);
    }
    for (long long gs = 0; gs < total; ++gs) {
        const int s = (int)(gs % steps);
        const long long p0 = ((long long)blockIdx.x + (gs / steps) * gridDim.x) * TP;
        int j0, k0;
        bool last;
        step_at(s, nb, tri, j0, k0, last);
        if (s == 0) {  // a new pixel tile: its rows' scale and ACE's d.v, zero sums
            if (pre) {
                const int sp = tid >> 1;  // two threads per pixel, every other 4 bands
                float tp;
                const float scale = row_terms(X, n, nb, p0 + sp, (tid & 1) * 4, normalize, mode, vec, c, v, tp);
                if ((tid & 1) == 0) { sc[sp] = scale; ts[sp] = tp; }
                // the block's next tile's rows into L2, for this pass there (it would wait on memory)
                const long long pn = p0 + (long long)gridDim.x * TP;
                if (pn < n) {
                    const char* base = reinterpret_cast<const char*>(X + pn * nb);
                    const long long bytes = min((long long)TP, n - pn) * nb * 4;
                    for (long long o = (long long)tid * 128; o < bytes; o += QTHREADS * 128)
                        asm volatile("prefetch.global.L2 [%0];" ::"l"(base + o));
                }
            }
#pragma unroll
            for (int i = 0; i < 2; ++i) { q[i][0] = 0.0f; q[i][1] = 0.0f; }
            zero(acc);  // (in this branch too: the accumulators are dead during the pass above)
        } else if (k0 == 0) {
            zero(acc);  // a new column tile
        }
        if (gs + 1 < total) {  // the next step's copies, in flight during this step's products
            const int s1 = (int)((gs + 1) % steps);
            const long long p1 = ((long long)blockIdx.x + ((gs + 1) / steps) * gridDim.x) * TP;
            int j1, k1;
            bool l1;
            step_at(s1, nb, tri, j1, k1, l1);
            issue_step(smem + ((gs + 1) & 1) * BUF, X, n, nb, p1, j1, k1, Up, ldu, tid);
            copies_wait<1>();
        } else {
            copies_wait<0>();
        }
        __syncthreads();
        if (s == 0) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                srow[i][0] = pre ? sc[m0 + 16 * i + g] : 1.0f;
                srow[i][1] = pre ? sc[m0 + 16 * i + g + 8] : 1.0f;
            }
        }
        const float* Xs = smem + (gs & 1) * BUF;
        const float* Us = Xs + XBUF;
#pragma unroll
        for (int ks = 0; ks < KC / 8; ++ks) {
            const int kb = k0 + 8 * ks;  // the step's first band
            if (kb >= nb) break;
            const float c0 = kb + t < nb ? __ldg(c + kb + t) : 0.0f;
            const float c1 = kb + t + 4 < nb ? __ldg(c + kb + t + 4) : 0.0f;
            // this warp's A fragments (two 16-row tiles): d = x s_r - c, split into TF32 high and low parts
            unsigned ah[2][4], al[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const float* r0 = Xs + (m0 + 16 * i + g) * XLD + 8 * ks;
                const float* r1 = r0 + 8 * XLD;
                const float a[4] = {fmaf(r0[t], srow[i][0], -c0), fmaf(r1[t], srow[i][1], -c0),
                                    fmaf(r0[t + 4], srow[i][0], -c1), fmaf(r1[t + 4], srow[i][1], -c1)};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    ah[i][e] = tf32_hi(a[e]);
                    al[i][e] = tf32_hi(a[e] - __uint_as_float(ah[i][e]));
                }
            }
            const float* ub = Us + (8 * ks + t) * ULD + g;
            // the n-tiles in groups of JG, with no branch inside a group, so that the group's products
            // interleave (an n-tile of a group past its last band multiplies U's zeros: tri skips whole groups)
#pragma unroll
            for (int jg = 0; jg < 8; jg += JG) {
                const int cg = (h + 2 * (jg + JG - 1)) * 8;  // the group's last n-tile's first column
                if (j0 + (h + 2 * jg) * 8 >= nb || (tri && kb >= j0 + cg + 8)) continue;
                unsigned bh[JG][2], bl[JG][2];
#pragma unroll
                for (int j = 0; j < JG; ++j) {
                    const int cn = (h + 2 * (jg + j)) * 8;  // the n-tile's first column in the tile
                    const float u0 = ub[cn], u1 = ub[cn + 4 * ULD];  // split here: half the shared reads
                    bh[j][0] = tf32_hi(u0);
                    bh[j][1] = tf32_hi(u1);
                    bl[j][0] = tf32_hi(u0 - __uint_as_float(bh[j][0]));
                    bl[j][1] = tf32_hi(u1 - __uint_as_float(bh[j][1]));
                }
                // small products first; the row tiles and n-tiles alternate, so no mma waits on the one before
#pragma unroll
                for (int j = 0; j < JG; ++j)
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma_tf32(acc[i][jg + j], al[i], bh[j][0], bh[j][1]);
#pragma unroll
                for (int j = 0; j < JG; ++j)
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma_tf32(acc[i][jg + j], ah[i], bl[j][0], bl[j][1]);
#pragma unroll
                for (int j = 0; j < JG; ++j)
#pragma unroll
                    for (int i = 0; i < 2; ++i) mma_tf32(acc[i][jg + j], ah[i], bh[j][0], bh[j][1]);
            }
        }
        if (last) {  // the column tile is done: its squares into the row sums
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    q[i][0] = fmaf(acc[i][j][0], acc[i][j][0], fmaf(acc[i][j][1], acc[i][j][1], q[i][0]));
                    q[i][1] = fmaf(acc[i][j][2], acc[i][j][2], fmaf(acc[i][j][3], acc[i][j][3], q[i][1]));
                }
        }
        if (s == steps - 1) {  // the pixel tile is done: rows' sums over lanes and column halves, scores
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    float x = q[i][r];
                    x += __shfl_xor_sync(0xffffffffu, x, 1);
                    x += __shfl_xor_sync(0xffffffffu, x, 2);
                    if (t == 0) qh[h][m0 + 16 * i + g + 8 * r] = x;
                }
            __syncthreads();
            if (tid < TP && p0 + tid < n)
                out[p0 + tid] = quad_score(qh[0][tid] + qh[1][tid], pre ? ts[tid] : 0.0f, ss, mode);  // RX or ACE
        }
        __syncthreads();  // the buffer just read is the next step's copy target
    }
}
