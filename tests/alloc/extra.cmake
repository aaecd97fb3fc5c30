# Heap allocations of steady-state calls: a test program of its own, because
# it replaces the global operator new (to count) for the whole program.
add_executable(aoti_cuda_alloc_tests ${CMAKE_CURRENT_LIST_DIR}/test_call_allocations.cpp)
target_link_libraries(aoti_cuda_alloc_tests PRIVATE aoti_cuda_test_support)
set_target_properties(aoti_cuda_alloc_tests PROPERTIES ENABLE_EXPORTS ON)
add_test(NAME call_allocations COMMAND aoti_cuda_alloc_tests)
# Every object of the library, not only those the test calls: the fixtures'
# model libraries resolve all the shim functions they import from this program.
target_sources(aoti_cuda_alloc_tests PRIVATE $<TARGET_OBJECTS:aoti_cuda_core>)
