# Driven by the install_consumer test (see extra.cmake).
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}${err}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${AOTI_CUDA_BUILD} --prefix ${prefix})
foreach(f include/aoti_cuda/aoti_cuda.hpp include/aoti_cuda/shim.h lib/libaoti_cuda.so
          lib/cmake/aoti_cuda/aoti_cudaConfig.cmake lib/cmake/aoti_cuda/aoti_cudaConfigVersion.cmake bin/aoti_cuda)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()

run(${CMAKE_COMMAND} -S ${AOTI_CUDA_SRC}/examples/minimal -B ${WORK}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK}/build)
run(${WORK}/build/minimal ${AOTI_CUDA_SRC}/tests/fixtures/mlp/mlp.pte)
message(STATUS "minimal example output:\n${last_output}")

# The LLM example too (examples/generate): builds against the installed SDK; --help runs without a GPU.
run(${CMAKE_COMMAND} -S ${AOTI_CUDA_SRC}/examples/generate -B ${WORK}/build-generate -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK}/build-generate)
run(${WORK}/build-generate/generate --help)
