// The toy family's vector algorithm (tests/toy_family.py). Its searches run on the synthetic evaluator, so this
// is never compiled there; it exists because a space's templates must exist.
extern "C" __global__ void toy_vector(float* out) { out[threadIdx.x] = 0.0f; }
