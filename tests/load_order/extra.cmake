# Load-order test (tests/load_order): libcudart (and libcuda) first in the
# global scope, libaoti_cuda.so loaded RTLD_LOCAL behind them; the hook cases
# of support/hook_cases.hpp must pass there too. Runs without a GPU.
get_target_property(_cudart_path CUDA::cudart LOCATION)
set(_driver_stub "")
if(TARGET CUDA::cuda_driver)
  get_target_property(_driver_stub CUDA::cuda_driver LOCATION)
endif()
add_library(aoti_cuda_load_order_cases MODULE
  ${CMAKE_CURRENT_LIST_DIR}/cases.cpp ${CMAKE_CURRENT_LIST_DIR}/gpu_cases.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/support/pte_builder.cpp)
target_include_directories(aoti_cuda_load_order_cases PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${AOTI_CUDA_DOCTEST_INCLUDE})
target_link_libraries(aoti_cuda_load_order_cases PRIVATE aoti_cuda aoti_cuda_schema_headers CUDA::cudart ${CMAKE_DL_LIBS})
target_compile_definitions(aoti_cuda_load_order_cases PRIVATE
  AOTI_CUDA_FAKE_MODEL_AFFINE_CUDA="$<TARGET_FILE:aoti_cuda_fake_model_affine_cuda>"
  AOTI_CUDA_TEST_FIXTURES="${AOTI_CUDA_TEST_FIXTURES}")
set_target_properties(aoti_cuda_load_order_cases PROPERTIES CXX_VISIBILITY_PRESET hidden PREFIX "lib")
add_dependencies(aoti_cuda_load_order_cases aoti_cuda_fake_model_affine_cuda)

add_executable(aoti_cuda_load_order_tests ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
target_link_libraries(aoti_cuda_load_order_tests PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(aoti_cuda_load_order_tests PRIVATE
  AOTI_CUDA_CUDART_PATH="${_cudart_path}"
  AOTI_CUDA_DRIVER_STUB_PATH="${_driver_stub}"
  AOTI_CUDA_LOAD_ORDER_CASES="$<TARGET_FILE:aoti_cuda_load_order_cases>")
add_dependencies(aoti_cuda_load_order_tests aoti_cuda_load_order_cases)
add_test(NAME load_order COMMAND aoti_cuda_load_order_tests)
