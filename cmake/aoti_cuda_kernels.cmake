# CUDA kernels of the operator shims (src/shim/ops/*.cu) and the small-copy kernel
# (src/common/small_copy.cu): the only units compiled by nvcc;
# everything else stays plain C++ against the CUDA runtime headers.
# SASS for sm_80 (A100) and sm_90 (H100/H200), plus sm_90 PTX that newer GPUs JIT-compile.
# Building needs nvcc, not a GPU.
set(AOTI_CUDA_KERNEL_ARCHITECTURES "80-real;90-real;90-virtual" CACHE STRING
    "CUDA architectures of the shim's kernels (sm_80 or newer: they use bf16 mma.sync and cp.async)")
if(AOTI_CUDA_CCACHE)
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${AOTI_CUDA_CCACHE})
endif()
if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
# Every target (tests, tools) that links these objects must use the process's shared cudart.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
enable_language(CUDA)
file(GLOB AOTI_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/shim/ops/*.cu
     ${CMAKE_CURRENT_SOURCE_DIR}/src/common/*.cu)
target_sources(aoti_cuda_core PRIVATE ${AOTI_CUDA_KERNEL_SOURCES})
set_target_properties(aoti_cuda_core PROPERTIES
  CUDA_ARCHITECTURES "${AOTI_CUDA_KERNEL_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  # The model libraries resolve cuda* from the process's (shared) cudart: use the same one.
  CUDA_RUNTIME_LIBRARY Shared
  CUDA_VISIBILITY_PRESET hidden)
target_compile_options(aoti_cuda_core PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
