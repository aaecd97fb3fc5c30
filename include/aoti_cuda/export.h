/* aoti_cuda — symbol visibility for the shared library.
 *
 * libaoti_cuda.so is built with -fvisibility=hidden: only what is marked
 * AOTI_CUDA_API (the public C++ API) or AOTI_CUDA_SHIM_API (the aoti_torch_*
 * C ABI that model libraries import) is exported. Everything else stays
 * private so that it cannot clash with symbols in the model's .so, which
 * carries its own statically linked libstdc++. */
#ifndef AOTI_CUDA_EXPORT_H_
#define AOTI_CUDA_EXPORT_H_

#if defined(_WIN32)
#error "aoti_cuda supports Linux only"
#endif

#define AOTI_CUDA_API __attribute__((visibility("default")))
#define AOTI_CUDA_SHIM_API __attribute__((visibility("default")))

#endif /* AOTI_CUDA_EXPORT_H_ */
