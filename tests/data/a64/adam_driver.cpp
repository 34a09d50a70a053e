// An AdamW step of DeepSpeed's shape over N floats (N from argv), printed one "param exp_avg exp_avg_sq" line
// per element. The step is DeepSpeed's own SVE path (csrc/includes/sve.h, sve_adam_update) when the build says
// -D__SVE__ and the compiler has SVE, as DeepSpeed's cpu_adam.h chooses it; else a loop written here that the
// compiler vectorizes for the target (NEON). Inputs are deterministic: tests/integration/test_qemu_aarch64.py
// computes the same step in Python and compares.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sve.h"

extern "C" int adam_step_sve(void)
{
#if defined(__SVE__) && defined(__ARM_FEATURE_SVE)
    return 1;
#else
    return 0;
#endif
}

extern "C" void adam_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, size_t n,
                          float beta1, float beta2, float bias_correction1, float bias_correction2, float eps,
                          float lr, float weight_decay)
{
#if defined(__SVE__) && defined(__ARM_FEATURE_SVE)
    sve_adam_update<1>(params, grads, exp_avg, exp_avg_sq, n, beta1, beta2, bias_correction1, bias_correction2,
                       eps, lr, weight_decay, true, false);
#else
    const float step_size = -lr / bias_correction1;
    const float decay = 1.0f - lr * weight_decay;
    for (size_t i = 0; i < n; ++i) {
        const float m = exp_avg[i] * beta1 + grads[i] * (1.0f - beta1);
        const float v = exp_avg_sq[i] * beta2 + grads[i] * grads[i] * (1.0f - beta2);
        const float update = m / (std::sqrt(v) * bias_correction2 + eps);
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        params[i] = params[i] * decay + update * step_size;
    }
#endif
}

#ifndef ADAM_STEP_LIBRARY
int main(int argc, char** argv)
{
    const size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000;
    std::vector<float> p(n), g(n), m(n), v(n);
    for (size_t i = 0; i < n; ++i) {
        p[i] = 0.5f * std::sin(static_cast<float>(i));
        g[i] = 0.1f * std::cos(0.7f * static_cast<float>(i));
        m[i] = 0.01f * std::sin(0.3f * static_cast<float>(i));
        v[i] = 0.001f * (1.0f + std::cos(static_cast<float>(i)));
    }
    // step 3 of beta1 0.9, beta2 0.999: bias_correction1 = 1 - 0.9^3, bias_correction2 = 1 / sqrt(1 - 0.999^3)
    adam_step(p.data(), g.data(), m.data(), v.data(), n, 0.9f, 0.999f, 0.271f, 1.0f / std::sqrt(0.002997001f),
              1e-8f, 1e-3f, 0.01f);
    std::printf("sve %d\n", adam_step_sve());
    for (size_t i = 0; i < n; ++i) std::printf("%.9g %.9g %.9g\n", p[i], m[i], v[i]);
    return 0;
}
#endif
