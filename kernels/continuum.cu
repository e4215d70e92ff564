// Continuum of spectra: each spectrum's upper convex hull over wavelength, evaluated at every band
// (models/continuum.py). One thread per spectrum, grid-stride over the spectra.
//
// Andrew's monotone chain over the bands (the wavelengths x ascending, sorted by the caller): a band is
// pushed after popping every stacked vertex that lies on or below the line from the vertex under it
// to the new band (cross product >= 0, so collinear points are dropped). The stack lives in the
// spectrum's own output row, as doubles holding band indices: the segments are then filled from the
// right, and segment j (between vertices s[j] and s[j+1]) writes only bands >= s[j] >= j, after s[j] is
// read, so no stack entry still needed is overwritten.
//
// Y and H are (n, B) row-major float64; H may not alias Y.

extern "C" __global__ void hyperapp_continuum(const double* __restrict__ Y, const double* __restrict__ x,
                                              double* __restrict__ H, const long long n, const int B) {
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n;
         p += (long long)gridDim.x * blockDim.x) {
        const double* y = Y + p * B;
        double* h = H + p * B;
        int top = -1;
        for (int k = 0; k < B; ++k) {
            const double xk = x[k], yk = y[k];
            while (top >= 1) {
                const int a = (int)h[top - 1], b = (int)h[top];
                const double cross = (x[b] - x[a]) * (yk - y[a]) - (y[b] - y[a]) * (xk - x[a]);
                if (cross >= 0.0) {
                    --top;
                } else {
                    break;
                }
            }
            h[++top] = (double)k;
        }
        int b = (int)h[top];
        const double yb0 = y[b];
        h[b] = yb0;
        for (int j = top - 1; j >= 0; --j) {
            const int a = (int)h[j];
            const double xa = x[a], ya = y[a], span = x[b] - xa, rise = y[b] - ya;
            for (int k = a; k < b; ++k) {
                h[k] = ya + rise * ((x[k] - xa) / span);  // exactly y[a] at k = a
            }
            b = a;
        }
    }
}
