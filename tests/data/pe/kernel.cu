// The device code of the PE fixture: one kernel, compiled by make.sh into a real fatbin.
__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
