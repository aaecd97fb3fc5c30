# The fuzz seeds' builders (tiny ELF, seed programs) are also used by the unit
# tests: they check the seeds are valid and replay tests/fuzz/regressions.
target_sources(aoti_cuda_test_support PRIVATE ${CMAKE_CURRENT_LIST_DIR}/tiny_elf.cpp
                                              ${CMAKE_CURRENT_LIST_DIR}/seed_programs.cpp)
target_compile_definitions(aoti_cuda_test_support PUBLIC
  AOTI_CUDA_FUZZ_REGRESSIONS="${CMAKE_CURRENT_LIST_DIR}/regressions")
