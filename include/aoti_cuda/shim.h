/* aoti_cuda — the AOTInductor shim C ABI provided by libaoti_cuda.so.
 *
 * An AOTInductor model library compiled with aot_inductor.link_libtorch=False
 * leaves every aoti_torch_* function undefined and resolves them from the
 * process's global symbol scope when it is dlopen'ed. libaoti_cuda.so defines
 * them here, over its own tensor objects (no libtorch):
 *
 *   - A handle (AtenTensorHandle) is a heap tensor object: shared refcounted
 *     storage + sizes, strides (in elements), storage offset (in elements),
 *     dtype and device. Views and aliases share storage; deleting a handle
 *     drops one reference. Borrowed memory (create_tensor_from_blob*) is never
 *     freed by the shim.
 *   - CUDA memory is allocated stream-ordered (cudaMallocAsync/cudaFreeAsync)
 *     on the calling thread's current stream for the device; the stream guard
 *     created by the model's Run installs that stream.
 *   - Every function returning AOTITorchError returns 0 on success and 1 on
 *     failure and never throws or aborts; the reason of the last failure on
 *     this thread is available from aoti_cuda_shim_last_error().
 *
 * Enum codes are PyTorch's c10 values (device cpu=0, cuda=1; dtype float32=6,
 * ...; layout strided=0), matching aoti_cuda/dtype.hpp.
 *
 * Thread-compatibility: every function may be called from any thread; a handle
 * must not be mutated (assign_tensors, copy_ into it, delete) concurrently with
 * other use of the same handle. Grad mode and current streams are per thread.
 *
 * Declarations only; this header is C-compatible. */
#ifndef AOTI_CUDA_SHIM_H_
#define AOTI_CUDA_SHIM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aoti_cuda/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Types -------------------------------------------------------------- */
struct AtenTensorOpaque;
typedef struct AtenTensorOpaque* AtenTensorHandle;
struct AtenGeneratorOpaque;
typedef struct AtenGeneratorOpaque* AtenGeneratorHandle;
struct AOTIProxyExecutorOpaque;
typedef struct AOTIProxyExecutorOpaque* AOTIProxyExecutorHandle;
struct CUDAGuardOpaque;
typedef struct CUDAGuardOpaque* CUDAGuardHandle;
struct CUDAStreamGuardOpaque;
typedef struct CUDAStreamGuardOpaque* CUDAStreamGuardHandle;

typedef int32_t AOTITorchError;
#define AOTI_TORCH_SUCCESS 0
#define AOTI_TORCH_FAILURE 1

/* ---- Version -------------------------------------------------------------- */
/* The PyTorch ABI this shim implements: 2.11.0 = 0x020B000000000000. */
AOTI_CUDA_SHIM_API uint64_t aoti_torch_abi_version(void);

/* ---- Enum getters (c10 codes) -------------------------------------------- */
AOTI_CUDA_SHIM_API int32_t aoti_torch_device_type_cpu(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_device_type_cuda(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_device_type_xpu(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_device_type_mps(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_device_type_meta(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_device_type_privateuse1(void);

AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_uint8(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_int8(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_int16(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_int32(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_int64(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float16(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float32(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float64(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_complex32(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_complex64(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_complex128(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_bool(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_bfloat16(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float8_e5m2(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float8_e4m3fn(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float8_e5m2fnuz(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float8_e4m3fnuz(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_uint16(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_uint32(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_uint64(void);
/* Added in PyTorch 2.12: the c10 codes 44 and 45. This build has no storage for these dtypes
 * (creating such a tensor fails with kInvalidArgument); the getters exist so that a library
 * importing them loads. */
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float8_e8m0fnu(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_dtype_float4_e2m1fn_x2(void);

AOTI_CUDA_SHIM_API int32_t aoti_torch_layout_strided(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_layout_sparse_coo(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_layout_sparse_csr(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_layout__mkldnn(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_layout_sparse_csc(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_layout_sparse_bsr(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_layout_sparse_bsc(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_layout_jagged(void);

AOTI_CUDA_SHIM_API int32_t aoti_torch_memory_format_contiguous_format(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_memory_format_preserve_format(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_memory_format_channels_last(void);
AOTI_CUDA_SHIM_API int32_t aoti_torch_memory_format_channels_last_3d(void);

/* Bytes per element of a dtype code; 0 for an unknown code. */
AOTI_CUDA_SHIM_API size_t aoti_torch_dtype_element_size(int32_t dtype);

/* ---- Tensor accessors ------------------------------------------------------
 * The handle is borrowed; ret_* must not be null. Arrays returned by
 * get_sizes/get_strides live as long as the handle and are not to be
 * modified. get_size/get_stride accept negative dimensions (PyTorch style).
 * Sizes are in elements except get_storage_size (bytes). get_layout is
 * always strided. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** ret_data_ptr);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_storage_size(AtenTensorHandle tensor, int64_t* ret_size);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_storage_numel(AtenTensorHandle tensor, int64_t* ret_numel);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret_dim);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_numel(AtenTensorHandle tensor, int64_t* ret_numel);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret_sizes);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_size(AtenTensorHandle tensor, int64_t d, int64_t* ret_size);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** ret_strides);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_stride(AtenTensorHandle tensor, int64_t d, int64_t* ret_stride);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_dtype(AtenTensorHandle tensor, int32_t* ret_dtype);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_device_type(AtenTensorHandle tensor, int32_t* ret_device_type);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_device_index(AtenTensorHandle tensor, int32_t* ret_device_index);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_layout(AtenTensorHandle tensor, int32_t* ret_layout);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle tensor, int64_t* ret_storage_offset);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_is_contiguous(AtenTensorHandle tensor, bool* ret_is_contiguous);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_is_defined(AtenTensorHandle tensor, bool* ret_is_defined);

/* ---- Creation and lifetime ----------------------------------------------------
 * Every ret is a new owning handle that the caller releases with
 * aoti_torch_delete_tensor_object; on failure *ret is set to NULL. Sizes and
 * strides are in elements; strides_ptr NULL means contiguous (except for as_strided). device_type /
 * dtype are c10 codes (see the enum getters). */
/* Drops one reference to the storage and frees the handle; NULL fails. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor);
/* A second handle on the same storage and metadata. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_new_tensor_handle(AtenTensorHandle orig_handle, AtenTensorHandle* new_handle);
/* An undefined tensor (aoti_torch_is_defined gives false), e.g. an output slot. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_new_uninitialized_tensor(AtenTensorHandle* ret);
/* Uninitialized owned memory: CUDA from the stream-ordered pool (see top),
 * host 64-byte aligned; the _pinned variant page-locks host memory when it
 * can (falling back to pageable memory). */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                                           int32_t dtype, int32_t device_type, int32_t device_index,
                                                           AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_empty_strided_pinned(int64_t ndim, const int64_t* sizes_ptr,
                                                                  const int64_t* strides_ptr, int32_t dtype,
                                                                  int32_t device_type, int32_t device_index,
                                                                  AtenTensorHandle* ret_new_tensor);
/* Borrowed memory (never freed by the shim); storage_offset in elements.
 * _v2 accepts only the strided layout and ignores opaque metadata. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_create_tensor_from_blob(void* data, int64_t ndim, const int64_t* sizes_ptr,
                                                                     const int64_t* strides_ptr, int64_t storage_offset,
                                                                     int32_t dtype, int32_t device_type,
                                                                     int32_t device_index, AtenTensorHandle* ret);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_create_tensor_from_blob_v2(
    void* data, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr, int64_t storage_offset,
    int32_t dtype, int32_t device_type, int32_t device_index, AtenTensorHandle* ret, int32_t layout,
    const uint8_t* opaque_metadata, int64_t opaque_metadata_size);
/* A view of self's storage starting offset_bytes into it, with a new dtype. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch__alloc_from_pool(AtenTensorHandle self, int64_t offset_bytes, int32_t dtype,
                                                              int64_t ndim, const int64_t* sizes_ptr,
                                                              const int64_t* strides_ptr, AtenTensorHandle* ret_new_tensor);
/* storage_offset is an increment on self's offset (libtorch semantics). */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim,
                                                                 const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                                                 int64_t storage_offset, AtenTensorHandle* ret_new_tensor);
/* A view of self's storage: self's dim and storage offset, the given sizes and
 * strides (strides required here); fails if it would reach outside the storage. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_as_strided(AtenTensorHandle self, const int64_t* sizes_ptr,
                                                        const int64_t* strides_ptr, AtenTensorHandle* ret);
/* dst becomes an alias of src (same storage and metadata); both stay owned
 * by their callers. _out returns the alias as a new handle. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_assign_tensors(AtenTensorHandle src, AtenTensorHandle dst);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_assign_tensors_out(AtenTensorHandle src, AtenTensorHandle* ret_dst);
/* New owned copies on self's device: clone keeps a dense layout's strides
 * (else row-major); clone_preserve_strides keeps self's strides exactly. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_clone(AtenTensorHandle self, AtenTensorHandle* ret);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self, AtenTensorHandle* ret);
/* Element copies into self/dst, in any direction between host and CUDA, with
 * src broadcast to the destination's sizes and dtype conversion. Copies
 * touching host memory complete before return unless non_blocking and the
 * host side is shim-allocated pinned memory. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_copy_(AtenTensorHandle self, AtenTensorHandle src, int32_t non_blocking);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_tensor_copy_(AtenTensorHandle src, AtenTensorHandle dst);
/* Sets every element of self to zero. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_zero_(AtenTensorHandle self);

/* ---- Scalars -------------------------------------------------------------- */
/* item_*: the single element of a one-element tensor (host or CUDA; waits for
 * the copy), converted to the requested type. float16/bfloat16 values are
 * passed as their 16-bit patterns (c10::Half / c10::BFloat16 layout). */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_float16(AtenTensorHandle tensor, uint16_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_bfloat16(AtenTensorHandle tensor, uint16_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_float32(AtenTensorHandle tensor, float* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_float64(AtenTensorHandle tensor, double* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_uint8(AtenTensorHandle tensor, uint8_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_uint16(AtenTensorHandle tensor, uint16_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_uint32(AtenTensorHandle tensor, uint32_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_uint64(AtenTensorHandle tensor, uint64_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_int8(AtenTensorHandle tensor, int8_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_int16(AtenTensorHandle tensor, int16_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_int32(AtenTensorHandle tensor, int32_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_int64(AtenTensorHandle tensor, int64_t* ret_value);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_bool(AtenTensorHandle tensor, bool* ret_value);
/* complex64 as two floats {real, imag}. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_item_complex64(AtenTensorHandle tensor, float* ret_value);

/* New 0-d CPU tensors. complex values are passed as {real, imag} pairs by value (two floats / two doubles). */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_float32(float value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_float64(double value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_uint8(uint8_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_uint16(uint16_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_uint32(uint32_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_uint64(uint64_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_int8(int8_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_int16(int16_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_int32(int32_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_int64(int64_t value, AtenTensorHandle* ret_new_tensor);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_scalar_to_tensor_bool(bool value, AtenTensorHandle* ret_new_tensor);

/* ---- Grad mode, diagnostics ---------------------------------------------- */
/* Per-thread flag, stored and reported only: nothing here computes gradients. */
AOTI_CUDA_SHIM_API bool aoti_torch_grad_mode_is_enabled(void);
AOTI_CUDA_SHIM_API void aoti_torch_grad_mode_set_enabled(bool enabled);
/* Logs a warning (to stderr unless AOTI_CUDA_QUIET is set) and records it. */
AOTI_CUDA_SHIM_API void aoti_torch_warn(const char* func, const char* file, uint32_t line, const char* msg);
/* On a false condition: records the message and throws std::runtime_error,
 * which the model library catches and turns into a failed Run. */
AOTI_CUDA_SHIM_API void aoti_torch_check(bool cond, const char* func, const char* file, uint32_t line, const char* msg);
/* Fails (naming tensor_name) when a floating-point tensor holds a NaN or an
 * infinity; integer tensors always pass. Copies CUDA data to the host. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_check_inf_and_nan(const char* tensor_name, AtenTensorHandle tensor);
/* Debug print of metadata and the first values to stderr; never fails. */
AOTI_CUDA_SHIM_API void aoti_torch_print_tensor_handle(AtenTensorHandle self, const char* msg);

/* ---- CUDA: device and stream guards, current stream ----------------------
 * A device guard makes device_index current and restores the previous device
 * when deleted; a stream guard also installs `stream` as the thread's current
 * stream for that device and restores the previous one. device_index -1 means
 * the current device. Guards are per thread: delete them on the thread that
 * created them, innermost first. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index, CUDAGuardHandle* ret_guard);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_guard_set_index(CUDAGuardHandle guard, int32_t device_index);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_create_cuda_stream_guard(void* stream, int32_t device_index,
                                                                      CUDAStreamGuardHandle* ret_guard);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_delete_cuda_stream_guard(CUDAStreamGuardHandle guard);
/* Writes the calling thread's current cudaStream_t for the device (-1 = current device). */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index, void** ret_stream);
/* Untyped device memory on the current device, stream-ordered on its current
 * stream (nbytes 0 gives NULL); raw_delete frees only pointers raw_alloc returned. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_caching_allocator_raw_alloc(uint64_t nbytes, void** ret_ptr);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_caching_allocator_raw_delete(void* ptr);

/* ---- Operator shims ---------------------------------------------------------
 * _weight_int4pack_mm (int4 weight-only linear; torchao "tile_packed_to_4d" weights, the
 * fallback kernel ExecuTorch's CUDA backend keeps): *ret0 = a new bf16 [M, N] CUDA tensor
 * self · W^T, where self is bf16 [M, K] contiguous; mat2 holds W as PyTorch's
 * _convert_weight_to_int4pack packs it for CUDA: int32 [N/8, K/(innerKTiles*16), 32,
 * innerKTiles/2] contiguous, innerKTiles 2, 4 or 8; qScaleAndZeros is bf16 [K/qGroupSize, N, 2]
 * contiguous, qGroupSize 32, 64, 128 or 256; W[n][k] = (q - 8) * scale + zero of group k/qGroupSize
 * (q the unsigned 4-bit value), rounded to bf16; fp32 accumulation. All three on one CUDA device
 * (sm_80 or newer); the output is allocated and the kernel enqueued on the calling thread's
 * current stream for that device (asynchronous). Invalid dtypes, shapes, devices, group sizes
 * or misaligned data fail with a message naming the operand. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda__weight_int4pack_mm(AtenTensorHandle self, AtenTensorHandle mat2,
                                                                      int64_t qGroupSize,
                                                                      AtenTensorHandle qScaleAndZeros,
                                                                      AtenTensorHandle* ret0);

/* _scaled_dot_product_flash_attention (PyTorch's flash attention forward, which AOTInductor
 * calls for scaled_dot_product_attention in a program lowered with SDPBackend.FLASH_ATTENTION):
 * query [B, H, L, D], key and value [B, Hkv, S, D], bfloat16 or float16, one CUDA device, any
 * strides with a unit-stride last dimension; H a multiple of Hkv (grouped-query attention);
 * D 64 or 128. *ret0 = a new [B, H, L, D] output laid out like query (PyTorch's empty_like);
 * *ret1 = logsumexp [B, H, L] float32; *ret4 = L, *ret5 = S; ret2, ret3 and ret6-ret8 (varlen,
 * RNG and debug outputs) are empty tensors. Every ret pointer may be null except ret0: what is
 * not asked for is not made. scale null means 1/sqrt(D); is_causal masks key j > query i and
 * needs L == S. dropout_p must be 0 and return_debug_mask 0 (inference). Float32 scores and
 * accumulation; enqueued on the calling thread's current stream (asynchronous). Other dtypes,
 * shapes, head dimensions or devices fail with a message naming the operand. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda__scaled_dot_product_flash_attention(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, double dropout_p, int32_t is_causal,
    int32_t return_debug_mask, double* scale, AtenTensorHandle* ret0, AtenTensorHandle* ret1, AtenTensorHandle* ret2,
    AtenTensorHandle* ret3, int64_t* ret4, int64_t* ret5, AtenTensorHandle* ret6, AtenTensorHandle* ret7,
    AtenTensorHandle* ret8);

/* aoti_cuda's own decode attention: the C shim of the custom operator
 * aoti_cuda::aoti_cuda_decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor input_pos,
 * float scale) -> Tensor that tools/export/llm defines (--sdpa decode-op; AOTInductor emits this
 * call for it through aot_inductor.custom_ops_to_c_shims). No other runtime provides it.
 * q [B, H, 1, D], k_cache and v_cache [B, Hkv, L, D], bfloat16 or float16, one CUDA device, unit
 * stride along D (K/V 16-byte aligned, strides multiples of 8 elements); H a multiple of Hkv; D 64
 * or 128. input_pos int64 on the same device, [1] or [B]: the query attends over cache positions
 * 0..pos inclusive (clamped to L - 1; none, so zeros, for pos < 0), read by the kernel, so a
 * CUDA graph replays for any position. *ret0 = a new contiguous [B, H, 1, D] output. Float32
 * scores and sums; the work grows with pos, not L (split over positions, then a merge). Enqueued
 * on the calling thread's current stream with stream-ordered scratch; no host synchronization.
 * Wrong shapes, dtypes, strides or devices fail with a message naming the operand. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_aoti_cuda_decode_attention(AtenTensorHandle q,
                                                                            AtenTensorHandle k_cache,
                                                                            AtenTensorHandle v_cache,
                                                                            AtenTensorHandle input_pos, double scale,
                                                                            AtenTensorHandle* ret0);

/* Its update form, the C shim of aoti_cuda::aoti_cuda_decode_attention_update(Tensor q, Tensor k_new,
 * Tensor v_new, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor input_pos, float scale) -> Tensor
 * (--sdpa decode-op-update): for each batch b whose position p = input_pos[b] lies in [0, L), first
 * k_cache[b, :, p, :] = k_new[b, :, 0, :] and v_cache likewise, then the attention above (which
 * sees the new row). Positions outside [0, L) store nothing. k_new and v_new [B, Hkv, 1, D], the
 * caches' dtype, 16-byte aligned with strides multiples of 8 elements. One kernel pass does both:
 * an exported model then has no separate kernels writing the KV cache before its attention. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_aoti_cuda_decode_attention_update(
    AtenTensorHandle q, AtenTensorHandle k_new, AtenTensorHandle v_new, AtenTensorHandle k_cache,
    AtenTensorHandle v_cache, AtenTensorHandle input_pos, double scale, AtenTensorHandle* ret0);

/* Its qkv form, the C shim of aoti_cuda::aoti_cuda_decode_attention_qkv(Tensor qkv, Tensor rope_cos,
 * Tensor rope_sin, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor input_pos, int n_heads, float scale)
 * -> Tensor (--sdpa decode-op-qkv): qkv [B, 1, (H + 2 Hkv) D] is the fused projection's output, the
 * H query heads, then the Hkv key heads, then the Hkv value heads, unit-stride, 16-byte aligned, its
 * batch stride a multiple of 8 elements; H = n_heads. rope_cos / rope_sin float32 [R, D/2], rows
 * unit-stride: q and the step's key row are rotated with row r = input_pos[b] clamped to [0, R)
 * (first halves x1, second halves x2: x1 c - x2 s and x2 c + x1 s in float32, each product rounded,
 * then rounded to the dtype: the model's rotary embedding), then the update form runs with the
 * rotated key row and the value row as they are. An exported decode step then has no kernel between
 * the projection and the attention. *ret0 = a new contiguous [B, H, 1, D] output. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_aoti_cuda_decode_attention_qkv(
    AtenTensorHandle qkv, AtenTensorHandle rope_cos, AtenTensorHandle rope_sin, AtenTensorHandle k_cache,
    AtenTensorHandle v_cache, AtenTensorHandle input_pos, int64_t n_heads, double scale, AtenTensorHandle* ret0);

/* aoti_cuda's fused linear, the C shim of aoti_cuda::aoti_cuda_fused_linear(Tensor x, Tensor? norm_weight,
 * float eps, bool swiglu, Tensor weight, Tensor? residual) -> Tensor (tools/export/llm/fused_linear_op.py): one
 * projection of a decode step with the pointwise work around it folded in. Per row of x [..., K] (K a multiple of 8
 * up to 12032, rows 16-byte aligned): optionally RMSNorm with eps and norm_weight [K]; then a @ weight^T (weight
 * [N, K], unit-stride rows, 16-byte aligned); with swiglu (N even), silu(first N/2 columns) * last N/2 columns
 * (weight's rows: the gate projection's, then the up projection's); then optionally + residual [..., N or N/2];
 * each step rounded to x's dtype (bf16 or fp16) where a PyTorch model rounds it. An absent optional operand is a
 * null pointer. *ret0 = a new contiguous output, x's leading sizes and N (N/2 with swiglu) columns. One kernel on
 * the calling thread's current stream. Wrong shapes, dtypes, strides or devices fail with a message naming the
 * operand. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_aoti_cuda_fused_linear(AtenTensorHandle x,
                                                                        AtenTensorHandle* norm_weight, double eps,
                                                                        int32_t swiglu, AtenTensorHandle weight,
                                                                        AtenTensorHandle* residual,
                                                                        AtenTensorHandle* ret0);

/* Its int4 form, aoti_cuda::aoti_cuda_fused_linear_int4(Tensor x, Tensor? norm_weight, float eps, bool swiglu,
 * Tensor qdata, Tensor scale_and_zero, int group_size, int n, Tensor? residual) -> Tensor: the weight as torchao's
 * tile_packed_to_4d packs it (_weight_int4pack_mm's int32 qdata [N/8, Kp/(innerKTiles*16), 32, innerKTiles/2] and
 * bf16 scale_and_zero [Kp/group_size, N, 2]; the packing pads K to Kp >= x's K and N to a multiple of 8), n its
 * logical output features (a multiple of 32 with swiglu); x bf16. Computes what the bf16 form computes with the
 * dequantized weight, x zero-padded to Kp, and the first n columns. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_aoti_cuda_fused_linear_int4(
    AtenTensorHandle x, AtenTensorHandle* norm_weight, double eps, int32_t swiglu, AtenTensorHandle qdata,
    AtenTensorHandle scale_and_zero, int64_t group_size, int64_t n, AtenTensorHandle* residual, AtenTensorHandle* ret0);

/* aoti_cuda's argmax, the C shim of aoti_cuda::aoti_cuda_argmax(Tensor x) -> Tensor
 * (tools/export/llm/argmax_op.py): torch.argmax(x, dim=-1, keepdim=True). x bf16, fp16 or float32 on a CUDA
 * device, its last dimension (1 to 2^30 - 1 elements) unit-stride and its leading dimensions of one row stride.
 * *ret0 = a new contiguous int64 tensor of x's sizes with the last one 1: per row, the index of the largest
 * element, the first of equal ones, a NaN above every number (the first NaN's index). One kernel on the calling
 * thread's current stream. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_aoti_cuda_argmax(AtenTensorHandle x, AtenTensorHandle* ret0);

/* Extern GEMMs (a program exported with Inductor's ATEN GEMM backend calls these instead of
 * Triton GEMM kernels), PyTorch's mm.out / addmm.out / bmm.out:
 *   mm:    out[M,N] = self[M,K] · mat2[K,N]
 *   addmm: out[M,N] = beta * self + alpha * (mat1[M,K] · mat2[K,N]), self broadcast to [M,N]
 *          ([], [N], [1,N], [M,1] or [M,N]) and ignored when beta == 0
 *   bmm:   out[B,M,N] = self[B,M,K] · mat2[B,K,N]
 * float32, float16 or bfloat16, one dtype and one CUDA device for all operands, out preallocated
 * with exactly the result's sizes; any strides (views with one unit stride go straight to cuBLAS,
 * others through a contiguous copy). fp32 accumulation, no TF32. Enqueued on the calling thread's
 * current stream. cuBLAS (libcublas of the CUDA toolkit) is opened on first use; when it cannot
 * be, the call fails naming what was tried (AOTI_CUDA_CUBLAS may name the file). */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                         AtenTensorHandle mat2);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                            AtenTensorHandle mat1, AtenTensorHandle mat2, double beta,
                                                            double alpha);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_bmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                          AtenTensorHandle mat2);

/* ExecuTorch's quantized decode linears (custom ops executorch_cuda::int{4,5,6,8}_plain_mm of
 * ExecuTorch 1.3 and later, which AOTInductor calls through these names): *ret0 = a new
 * [M, N] CUDA tensor self · W^T in self's dtype, self [M, K] bfloat16, float16 or float32 with
 * a unit stride along K; fp32 dequantization and accumulation. Weights, contiguous, by format
 * (G = K / group_size groups per row, S = K / 256 super-blocks, codes uint8 or int8 read by
 * their dtype, steps float16; the bit layouts are in docs/shim-abi.md):
 *   int4 (1.4+): qdata [N, K/2] two 4-bit q per byte (even k low nibble); scale, zero codes
 *        [N, G]; scale_step, zero_point_step [N, S]; W = (q - zero*zstep) * scale*sstep.
 *   int4 (1.3):  called (self, qdata, scale, zero, group_size, ret0) through the same symbol:
 *        scale, zero bfloat16 [G, N]; W = (q - zero) * scale. The two forms are told apart
 *        by the fifth argument (a group size in 1.3, a tensor handle in 1.4).
 *   int5: ql [N, K/2] low 4 bits, qh [N, K/8] fifth bit; u in 0..31; W = scale * (u - zero).
 *   int6: ql [N, K/2], qh [N, K/4] top 2 bits; q = u - 32; scale codes [N, G], steps [N, S']
 *        with S' dividing G; W = q * scale * step.
 *   int8: qdata int8 [N, K]; scale bfloat16 [N, G]; zero int8 [N, G]; W = (q - zero) * scale.
 * Enqueued on the calling thread's current stream; wrong dtypes, shapes or devices fail with a
 * message naming the operand. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_int4_plain_mm(AtenTensorHandle self, AtenTensorHandle qdata,
                                                                AtenTensorHandle scale, AtenTensorHandle scale_step,
                                                                AtenTensorHandle zero,
                                                                AtenTensorHandle zero_point_step, int64_t group_size,
                                                                AtenTensorHandle* ret0);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_int5_plain_mm(AtenTensorHandle self, AtenTensorHandle ql,
                                                                AtenTensorHandle qh, AtenTensorHandle scale,
                                                                AtenTensorHandle scale_step, AtenTensorHandle zero,
                                                                AtenTensorHandle zero_point_step, int64_t group_size,
                                                                AtenTensorHandle* ret0);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_int6_plain_mm(AtenTensorHandle self, AtenTensorHandle ql,
                                                                AtenTensorHandle qh, AtenTensorHandle scale,
                                                                AtenTensorHandle steps, int64_t group_size,
                                                                AtenTensorHandle* ret0);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_int8_plain_mm(AtenTensorHandle self, AtenTensorHandle qdata,
                                                                AtenTensorHandle scale, AtenTensorHandle zero,
                                                                int64_t group_size, AtenTensorHandle* ret0);

/* torch.sort(self, stable, dim, descending) on a CUDA tensor (bool, integers, float16,
 * bfloat16, float32, float64; any strides; at most 2^31 - 1 elements): *ret0 = the sorted
 * values, *ret1 = int64 positions along dim, both new contiguous tensors of self's sizes.
 * PyTorch's order: NaN above every number, -0.0 equal to 0.0, and always stable (stable may be
 * null or false: a stable order is valid then too). Enqueued on the current stream. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_sort_stable(AtenTensorHandle self, int32_t* stable, int64_t dim,
                                                              int32_t descending, AtenTensorHandle* ret0,
                                                              AtenTensorHandle* ret1);

/* Random tensors, enqueued on the current stream. rand: *ret0 = a new contiguous CUDA tensor
 * of `size` (dtype null = float32; float16, bfloat16, float32 or float64) uniform in [0, 1);
 * layout null or strided, device null or CUDA, device_index -1 = the current device,
 * pin_memory ignored. randint_low_out: fills `out` (a non-overlapping dense CUDA tensor whose
 * sizes equal `size`; integer or floating dtype that holds [low, high)) with integers uniform
 * in [low, high), high > low. A counter-based generator whose state lives on the GPU, so CUDA
 * graph replays draw new numbers; seeded with a fixed value, or AOTI_CUDA_RNG_SEED. The values
 * differ from PyTorch's; their distribution is the same. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_rand(const int64_t* size, int64_t size_len_, int32_t* dtype,
                                                       int32_t* layout, int32_t* device, int32_t device_index_,
                                                       int32_t* pin_memory, AtenTensorHandle* ret0);
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_cuda_randint_low_out(AtenTensorHandle out, int64_t low, int64_t high,
                                                                  const int64_t* size, int64_t size_len_);

/* ---- Ops without a C shim ------------------------------------------------- */
/* Always fails: there is no libtorch dispatcher to replay the op. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_torch_proxy_executor_call_function(AOTIProxyExecutorHandle proxy_executor,
                                                                          int extern_node_index, int num_ints,
                                                                          int64_t* flatten_int_args, int num_tensors,
                                                                          AtenTensorHandle* flatten_tensor_args);

/* ---- aoti_cuda extensions (not part of PyTorch's shim) ------------------- */
/* Message of the last failed shim call on this thread ("" if none). Valid until the next shim call on this thread. */
AOTI_CUDA_SHIM_API const char* aoti_cuda_shim_last_error(void);
/* Resets this thread's last error to "". */
AOTI_CUDA_SHIM_API void aoti_cuda_shim_clear_error(void);
/* Number of live tensor handles in the process (for leak checks). */
AOTI_CUDA_SHIM_API int64_t aoti_cuda_shim_live_handles(void);
/* Sets the calling thread's current stream for a device (-1 = current device)
 * without a guard; writes the previous one to *ret_previous unless it is NULL. */
AOTI_CUDA_SHIM_API AOTITorchError aoti_cuda_shim_set_current_stream(int32_t device_index, void* stream, void** ret_previous);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AOTI_CUDA_SHIM_H_ */
