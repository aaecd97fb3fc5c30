# The fuzz seeds' builders (tiny ELF, seed programs) are also used by the unit
# tests: they check the seeds are valid and replay tests/fuzz/regressions.
target_sources(aoti_cuda_test_support PRIVATE ${CMAKE_CURRENT_LIST_DIR}/tiny_elf.cpp
                                              ${CMAKE_CURRENT_LIST_DIR}/seed_programs.cpp)
target_compile_definitions(aoti_cuda_test_support PUBLIC
  AOTI_CUDA_FUZZ_REGRESSIONS="${CMAKE_CURRENT_LIST_DIR}/regressions")

# Each fuzz target with a plain driver (replay_main.cpp), in the normal test
# build: it replays the kept corpus and the regressions, so a fuzz source that
# stops compiling, or an input that crashes again, fails the ordinary build
# and test run (the libFuzzer builds need clang: tests/fuzz/CMakeLists.txt).
foreach(t pte ptd elf)
  set(_sources ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp ${CMAKE_CURRENT_LIST_DIR}/fuzz_${t}.cpp)
  if(t STREQUAL "ptd")
    list(APPEND _sources ${CMAKE_CURRENT_LIST_DIR}/tiny_elf.cpp ${CMAKE_CURRENT_LIST_DIR}/seed_programs.cpp
         ${CMAKE_CURRENT_SOURCE_DIR}/support/pte_builder.cpp)
  endif()
  add_executable(aoti_cuda_fuzz_replay_${t} ${_sources})
  target_include_directories(aoti_cuda_fuzz_replay_${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_SOURCE_DIR}
                             ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(aoti_cuda_fuzz_replay_${t} PRIVATE aoti_cuda_core aoti_cuda_schema_headers ${CMAKE_DL_LIBS})
  add_test(NAME fuzz_replay_${t} COMMAND aoti_cuda_fuzz_replay_${t} ${CMAKE_CURRENT_LIST_DIR}/corpus/${t})
endforeach()
