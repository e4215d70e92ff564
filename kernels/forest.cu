// Decision trees and random forests grown level by level (seed 000, after CUDT: counts, prefix sums
// of class counts, the Gini impurity of every candidate threshold in parallel, the best split by
// reduction), with the spectra quantised once into NBINS bins per band so a node's candidate
// thresholds are its histogram's bin edges.
//
// A "sample" below is one (tree, spectrum) pair: every tree of a forest grows at once, each spectrum
// weighted by how often the tree's bootstrap drew it. node_of[t * n + i] is the level-local index of
// the node that holds spectrum i in tree t, or -1 once it sits in a leaf (or is out of bag).
//
// Histogram layout: hist[node][bin][class][slot], the feature slot fastest, so the split kernel's
// threads (one per slot) read consecutive words.

#ifndef MAXC
#define MAXC 64
#endif

// Quantise: Xb[i, f] = number of edges of band f below X[i, f] (a lower bound), so that
// Xb <= b  <=>  X <= edges[f, b]. Thread per element; edges (F, E) ascending, padded with +inf.
extern "C" __global__ void forest_bin(const float* __restrict__ X, const float* __restrict__ edges,
                                      unsigned char* __restrict__ Xb, long long total, int F, int E) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    int f = (int)(e % F);
    float x = X[e];
    const float* ed = edges + (long long)f * E;
    int lo = 0, hi = E;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (ed[mid] < x) lo = mid + 1; else hi = mid;
    }
    Xb[e] = (unsigned char)lo;
}

// Class-count histograms of the nodes lo..hi-1 of this level, over each node's m candidate bands.
// Thread per (tree, spectrum) sample; global atomics (the samples of one node spread over m x NBINS
// x C counters, so contention is low below the first levels).
extern "C" __global__ void forest_hist(const unsigned char* __restrict__ Xb, const int* __restrict__ y,
                                       const int* __restrict__ w, const int* __restrict__ node_of,
                                       const int* __restrict__ feats, int* __restrict__ hist,
                                       long long total, int n, int F, int m, int C, int lo, int hi) {
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= total) return;
    int node = node_of[s];
    if (node < lo || node >= hi) return;
    int i = (int)(s % n);
    int wt = w[s];
    int c = y[i];
    const unsigned char* row = Xb + (long long)i * F;
    const int* fs = feats + (long long)node * m;
    int* h = hist + (long long)(node - lo) * NBINS * C * m;
    for (int j = 0; j < m; ++j) {
        int b = row[fs[j]];
        atomicAdd(h + ((long long)b * C + c) * m + j, wt);
    }
}

// Best split of every node: one block per node, a thread per candidate band (slot). Each thread
// scans its band's bins once for the node totals and once more with running left counts; a split
// after bin b scores sum_c L_c^2 / n_L + sum_c R_c^2 / n_R (maximising it minimises the children's
// weighted Gini impurity). Ties go to the lowest (slot, bin), as the NumPy path's argmax does.
extern "C" __global__ void forest_split(const int* __restrict__ hist, int m, int C, int min_leaf,
                                        double* __restrict__ best_score, int* __restrict__ best_slot,
                                        int* __restrict__ best_bin, int* __restrict__ totals) {
    int node = blockIdx.x;
    const int* h = hist + (long long)node * NBINS * C * m;
    __shared__ double s_score[256];
    __shared__ int s_key[256];
    double best = -1.0;
    int key = 0x7fffffff;
    int tot[MAXC];
    int left[MAXC];
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
        int n = 0;
        for (int c = 0; c < C; ++c) tot[c] = 0;
        for (int b = 0; b < NBINS; ++b)
            for (int c = 0; c < C; ++c) tot[c] += h[((long long)b * C + c) * m + j];
        for (int c = 0; c < C; ++c) { n += tot[c]; left[c] = 0; }
        if (j == 0 && threadIdx.x == 0)
            for (int c = 0; c < C; ++c) totals[(long long)node * C + c] = tot[c];
        int nl = 0;
        for (int b = 0; b < NBINS - 1; ++b) {
            int add = 0;
            for (int c = 0; c < C; ++c) {
                int v = h[((long long)b * C + c) * m + j];
                left[c] += v;
                add += v;
            }
            if (add == 0) continue;  // same partition as the previous bin
            nl += add;
            int nr = n - nl;
            if (nl < min_leaf || nr < min_leaf) continue;
            double sl = 0.0, sr = 0.0;
            for (int c = 0; c < C; ++c) {
                double l = left[c], r = tot[c] - left[c];
                sl += l * l;
                sr += r * r;
            }
            double score = sl / nl + sr / nr;
            int k = j * NBINS + b;
            if (score > best || (score == best && k < key)) { best = score; key = k; }
        }
    }
    s_score[threadIdx.x] = best;
    s_key[threadIdx.x] = key;
    __syncthreads();
    for (int step = blockDim.x >> 1; step > 0; step >>= 1) {
        if (threadIdx.x < step) {
            double o = s_score[threadIdx.x + step];
            int ok = s_key[threadIdx.x + step];
            if (o > s_score[threadIdx.x] || (o == s_score[threadIdx.x] && ok < s_key[threadIdx.x])) {
                s_score[threadIdx.x] = o;
                s_key[threadIdx.x] = ok;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        best_score[node] = s_score[0];
        best_slot[node] = s_key[0] == 0x7fffffff ? -1 : s_key[0] / NBINS;
        best_bin[node] = s_key[0] == 0x7fffffff ? -1 : s_key[0] % NBINS;
    }
}

// Send every sample one level down: to child[node] (left, bin <= split_bin) or child[node] + 1, or
// to -1 when its node became a leaf. Thread per sample.
extern "C" __global__ void forest_route(const unsigned char* __restrict__ Xb, int* __restrict__ node_of,
                                        const int* __restrict__ split_feat, const int* __restrict__ split_bin,
                                        const int* __restrict__ child, long long total, int n, int F) {
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= total) return;
    int node = node_of[s];
    if (node < 0) return;
    int f = split_feat[node];
    if (f < 0) { node_of[s] = -1; return; }
    int i = (int)(s % n);
    node_of[s] = child[node] + (Xb[(long long)i * F + f] > split_bin[node] ? 1 : 0);
}

// Class probabilities averaged over the trees, from the raw spectra: thread per spectrum, each tree
// walked from its root (x <= threshold goes left). With ``inbag`` (trees x n, nullable), a tree only
// votes for the spectra it did not train on (out-of-bag estimates); ``votes`` counts the trees that did.
extern "C" __global__ void forest_predict(const float* __restrict__ X, long long n, int F,
                                          const int* __restrict__ roots, int T,
                                          const int* __restrict__ feature, const float* __restrict__ thr,
                                          const int* __restrict__ left, const float* __restrict__ value,
                                          int C, const int* __restrict__ inbag, float* __restrict__ proba,
                                          int* __restrict__ votes) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* x = X + i * F;
    float acc[MAXC];
    for (int c = 0; c < C; ++c) acc[c] = 0.f;
    int used = 0;
    for (int t = 0; t < T; ++t) {
        if (inbag != nullptr && inbag[(long long)t * n + i] > 0) continue;
        int node = roots[t];
        while (left[node] >= 0) node = left[node] + (x[feature[node]] <= thr[node] ? 0 : 1);
        const float* v = value + (long long)node * C;
        for (int c = 0; c < C; ++c) acc[c] += v[c];
        ++used;
    }
    float inv = used > 0 ? 1.f / used : 0.f;
    for (int c = 0; c < C; ++c) proba[i * C + c] = acc[c] * inv;
    if (votes != nullptr) votes[i] = used;
}
