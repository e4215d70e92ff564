// hyperapp_pack: up to PACK_SLOTS small device arrays (any of ten element types) into one buffer of 8-byte
// slots, so that they reach the host in one copy (hyperapp.kernels.pack.to_host_together). A float lands as
// the bits of a double, an integer (or a bool) as an int64, exactly; the host reads each segment as its
// kind. The CuPy formulation, a cast of each array and a concatenate, was two launches per array, each a
// few tens of microseconds of a host that the live click waits for.
//
// Thread mapping: a grid-stride loop over the output slots; each thread finds its slot's source by a scan
// of the segments' ends (at most PACK_SLOTS), reads the element at its offset in that source and converts it.

#define PACK_SLOTS 12

__device__ __forceinline__ unsigned long long pack_one(unsigned long long ptr, int type, long long i)
{
    switch (type) {
    case 0: return __double_as_longlong((double)((const float*)ptr)[i]);
    case 1: return __double_as_longlong(((const double*)ptr)[i]);
    case 2: return (unsigned long long)(long long)((const signed char*)ptr)[i];
    case 3: return (unsigned long long)((const unsigned char*)ptr)[i];
    case 4: return (unsigned long long)(long long)((const short*)ptr)[i];
    case 5: return (unsigned long long)((const unsigned short*)ptr)[i];
    case 6: return (unsigned long long)(long long)((const int*)ptr)[i];
    case 7: return (unsigned long long)((const unsigned int*)ptr)[i];
    case 8: return (unsigned long long)((const long long*)ptr)[i];
    default: return ((const unsigned long long*)ptr)[i];
    }
}

// ``types``: 4 bits per source, source j in bits 4j..4j+3; ``e0..e11``: each source's end in ``out``
// (cumulative element counts; unused sources repeat the total)
extern "C" __global__ void hyperapp_pack(
    unsigned long long* __restrict__ out, long long total, unsigned long long types,
    unsigned long long p0, unsigned long long p1, unsigned long long p2, unsigned long long p3,
    unsigned long long p4, unsigned long long p5, unsigned long long p6, unsigned long long p7,
    unsigned long long p8, unsigned long long p9, unsigned long long p10, unsigned long long p11,
    long long e0, long long e1, long long e2, long long e3, long long e4, long long e5,
    long long e6, long long e7, long long e8, long long e9, long long e10, long long e11)
{
    const unsigned long long ptr[PACK_SLOTS] = {p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11};
    const long long end[PACK_SLOTS] = {e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11};
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int j = 0;
        while (j < PACK_SLOTS - 1 && i >= end[j]) ++j;
        const long long start = j ? end[j - 1] : 0;
        out[i] = pack_one(ptr[j], (int)((types >> (4 * j)) & 15ull), i - start);
    }
}
