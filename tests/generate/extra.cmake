# examples/generate's --decode-at planning (decode_plan.hpp) and its teacher-forced misses told apart
# (reference_check.hpp), on the CPU: header-only functions with their own small doctest program, so that checking
# them does not rebuild the unit suite.
add_executable(aoti_cuda_generate_plan_tests ${CMAKE_CURRENT_LIST_DIR}/test_decode_plan.cpp
               ${CMAKE_CURRENT_LIST_DIR}/test_reference_check.cpp)
target_include_directories(aoti_cuda_generate_plan_tests PRIVATE ${CMAKE_SOURCE_DIR}/examples/generate
                           ${AOTI_CUDA_DOCTEST_INCLUDE})
target_compile_features(aoti_cuda_generate_plan_tests PRIVATE cxx_std_17)
add_test(NAME generate_decode_plan COMMAND aoti_cuda_generate_plan_tests)
