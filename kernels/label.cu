// 8-connected component labelling of a binary image on the GPU: union-find over pixel indices, in the
// manner of Playne & Hawick (2018), "A new algorithm for parallel connected-component labelling on
// GPUs" (IEEE TPDS 29(6)).
//
// L[p] is pixel p's parent (an index <= p) for object pixels, -1 elsewhere. Every union points the
// larger of two roots at the smaller with atomicMin, so when the merge kernel is done each component's
// root is its first pixel in raster order: numbering the roots in raster order gives the labels
// scipy.ndimage.label gives (it numbers components by their first pixel too).
//
// Thread mapping: one thread per pixel, grid-stride loops over rows * cols (< 2^31, checked by the
// caller). The image is row-major.

__device__ __forceinline__ int find_root(const volatile int* L, int x) {
    int y;
    while ((y = L[x]) != x) {
        x = y;
    }
    return x;
}

// Join the trees of a and b. If another thread re-parents b between the find and the atomicMin, the
// atomicMin returns b's new parent and the join goes on from there, so no link is lost.
__device__ __forceinline__ void unite(int* L, int a, int b) {
    while (true) {
        a = find_root(L, a);
        b = find_root(L, b);
        if (a == b) {
            return;
        }
        if (a > b) {
            const int t = a;
            a = b;
            b = t;
        }
        const int old = atomicMin(&L[b], a);
        if (old == b) {
            return;
        }
        b = old;
    }
}

extern "C" __global__ void hyperapp_label_init(const unsigned char* __restrict__ mask, int* __restrict__ L,
                                               const int n) {
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        L[p] = mask[p] ? p : -1;
    }
}

// Each object pixel joins its backward neighbours (left, up-left, up, up-right); a neighbour already
// joined through another is skipped: up covers up-left and up-right (they touch it in its own row),
// and left is joined to up or up-left by its own merge whenever either is an object pixel.
extern "C" __global__ void hyperapp_label_merge(int* L, const int rows, const int cols) {
    const int n = rows * cols;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        if (L[p] < 0) {
            continue;
        }
        const int r = p / cols;
        const int c = p - r * cols;
        const bool has_left = c > 0, has_right = c + 1 < cols;
        bool up = false, up_left = false;
        if (r > 0) {
            const int q = p - cols;
            up = L[q] >= 0;
            up_left = has_left && L[q - 1] >= 0;
            if (up) {
                unite(L, p, q);
            } else {
                if (up_left) {
                    unite(L, p, q - 1);
                }
                if (has_right && L[q + 1] >= 0) {
                    unite(L, p, q + 1);
                }
            }
        }
        if (has_left && !up && !up_left && L[p - 1] >= 0) {
            unite(L, p, p - 1);
        }
    }
}

// Point every object pixel at its root, and flag the roots (for their raster-order numbering).
extern "C" __global__ void hyperapp_label_compress(int* L, int* __restrict__ root, const int n) {
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        int r = -1;
        if (L[p] >= 0) {
            r = find_root(L, p);
            L[p] = r;
        }
        root[p] = r == p;
    }
}

// Final labels: the root's rank among the roots in raster order (``rank`` is the inclusive prefix sum
// of the root flags, so 1 for the first component), 0 outside objects.
extern "C" __global__ void hyperapp_label_number(const int* __restrict__ L, const int* __restrict__ rank,
                                                 int* __restrict__ out, const int n) {
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        const int r = L[p];
        out[p] = r < 0 ? 0 : rank[r];
    }
}

// The 4-connected merge (ENVI's sieve with four neighbours): each object pixel joins the backward
// neighbours that share an edge with it, up and left. The other kernels serve both connectivities.
extern "C" __global__ void hyperapp_label_merge4(int* L, const int rows, const int cols) {
    const int n = rows * cols;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        if (L[p] < 0) {
            continue;
        }
        const int c = p % cols;
        if (p >= cols && L[p - cols] >= 0) {
            unite(L, p, p - cols);
        }
        if (c > 0 && L[p - 1] >= 0) {
            unite(L, p, p - 1);
        }
    }
}
