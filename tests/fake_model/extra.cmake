# Fake AOTInductor model libraries for CPU-only Module tests (see fake_model.cpp).
# Deliberately NOT linked against aoti_cuda: like a real model .so they leave
# aoti_torch_* undefined and resolve them from the global scope at dlopen.
# affine_static is "affine" linked like a real AOTInductor library: libstdc++
# and libgcc statically (their start-up allocates the exception-handling
# emergency pool inside the library; see ModelLibrary's unload).
foreach(kind_name affine kv bad_import kv_wide affine_untyped affine_unknown affine_static affine_mm affine_cuda)
  set(extra_defs "")
  if(kind_name STREQUAL "affine" OR kind_name STREQUAL "affine_static")
    set(kind 1)
  elseif(kind_name STREQUAL "kv")
    set(kind 2)
  elseif(kind_name STREQUAL "kv_wide")
    set(kind 2)
    set(extra_defs FAKE_KV_ROWS=8)
  elseif(kind_name STREQUAL "affine_untyped")
    set(kind 1)
    set(extra_defs FAKE_NO_CONSTANT_TYPE)
  elseif(kind_name STREQUAL "affine_mm")  # imports aoti_torch_cuda_mm_out, as a program exported with cuBLAS GEMMs
    set(kind 1)
    set(extra_defs FAKE_IMPORTS_MM)
  elseif(kind_name STREQUAL "affine_cuda")  # imports the CUDA functions the SDK hooks (runtime/cuda_hooks.hpp)
    set(kind 1)
    set(extra_defs FAKE_IMPORTS_CUDA)
  elseif(kind_name STREQUAL "affine_unknown")  # reports ConstantType Unknown (0), as ExecuTorch's lifted weights
    set(kind 1)
    set(extra_defs FAKE_CONSTANT_TYPE_UNKNOWN)
  else()
    set(kind 3)
  endif()
  set(target aoti_cuda_fake_model_${kind_name})
  add_library(${target} MODULE ${CMAKE_CURRENT_LIST_DIR}/fake_model.cpp)
  target_compile_definitions(${target} PRIVATE FAKE_MODEL_KIND=${kind} ${extra_defs})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/include)
  if(kind_name STREQUAL "affine_static")
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON PREFIX "lib")
  add_dependencies(aoti_cuda_test_support ${target})
  string(TOUPPER ${kind_name} upper)
  target_compile_definitions(aoti_cuda_test_support PUBLIC AOTI_CUDA_FAKE_MODEL_${upper}="$<TARGET_FILE:${target}>")
endforeach()
