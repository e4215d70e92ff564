// The per-pixel arithmetic that kernels/quadform.cu (SIMT) and kernels/quadform_tc.cu (tensor cores) share,
// included by both (hyperapp.kernels.kernel_source expands it in place). Both kernels split each pixel's
// row between two adjacent lanes and reduce the whitened row z = d U to q = z.z in shared memory; only
// their GEMMs differ.

#ifndef HYPERAPP_QUADFORM_COMMON_CUH
#define HYPERAPP_QUADFORM_COMMON_CUH

// The row's scale s_r: 1 / ||x|| (normalize) or 1, where s2 is this lane's part of the pixel's sum of
// squares and lane ^ 1 holds the rest (1 also where the sum is 0). Every lane of the warp calls it.
__device__ __forceinline__ float pair_scale(float s2, int normalize)
{
    s2 += __shfl_xor_sync(0xffffffffu, s2, 1);
    return (normalize && s2 > 0.0f) ? 1.0f / sqrtf(s2) : 1.0f;
}

// A pixel's score from q = z.z and t = d.v: mode 1 RX = q; otherwise ACE = t^2 / (ss q), clipped to
// [0, 1] and 0 where the denominator ss q is 0 (t is unused for RX).
__device__ __forceinline__ float quad_score(float q, float t, float ss, int mode)
{
    if (mode == 1) return q;
    const float den = ss * q;
    return den > 0.0f ? fminf(fmaxf(t * t / den, 0.0f), 1.0f) : 0.0f;
}

#endif  // HYPERAPP_QUADFORM_COMMON_CUH
