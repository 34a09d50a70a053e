/* The shape of DeepSpeed's CPU Adam step (tests/data/a64/README.md): an SVE path chosen at build time
   the way DeepSpeed >= 0.19.7 chooses it (-D__SVE__ from simd_width() on a machine with SVE, and the
   compiler's __ARM_FEATURE_SVE from -march=native), else the portable loop GCC vectorizes with NEON. */
#include <math.h>
#include <stddef.h>
#if defined(__SVE__) && defined(__ARM_FEATURE_SVE)
#include <arm_sve.h>
#endif

void adam_step(float* restrict params, const float* restrict grads, float* restrict exp_avg,
               float* restrict exp_avg_sq, size_t n, float lr, float beta1, float beta2, float eps)
{
#if defined(__SVE__) && defined(__ARM_FEATURE_SVE)
    for (size_t i = 0; i < n; i += svcntw()) {
        svbool_t pg = svwhilelt_b32((uint64_t)i, (uint64_t)n);
        svfloat32_t g = svld1_f32(pg, grads + i);
        svfloat32_t m = svmla_n_f32_x(pg, svmul_n_f32_x(pg, g, 1.0f - beta1), svld1_f32(pg, exp_avg + i), beta1);
        svfloat32_t v = svmla_n_f32_x(pg, svmul_n_f32_x(pg, svmul_f32_x(pg, g, g), 1.0f - beta2),
                                      svld1_f32(pg, exp_avg_sq + i), beta2);
        svfloat32_t step = svdiv_f32_x(pg, svmul_n_f32_x(pg, m, lr), svadd_n_f32_x(pg, svsqrt_f32_x(pg, v), eps));
        svst1_f32(pg, exp_avg + i, m);
        svst1_f32(pg, exp_avg_sq + i, v);
        svst1_f32(pg, params + i, svsub_f32_x(pg, svld1_f32(pg, params + i), step));
    }
#else
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        exp_avg[i] = beta1 * exp_avg[i] + (1.0f - beta1) * g;
        exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
        params[i] -= lr * exp_avg[i] / (sqrtf(exp_avg_sq[i]) + eps);
    }
#endif
}
