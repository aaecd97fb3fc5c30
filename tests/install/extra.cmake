# Installs the freshly built SDK into a temporary prefix and builds
# examples/minimal against it with find_package(aoti_cuda), then runs it on the
# bundled mlp program (without a GPU it must fail cleanly with "no_device"), and
# examples/generate likewise (built, then run with --help).
add_test(NAME install_consumer
  COMMAND ${CMAKE_COMMAND}
    -DAOTI_CUDA_BUILD=${CMAKE_BINARY_DIR}
    -DAOTI_CUDA_SRC=${CMAKE_SOURCE_DIR}
    -DWORK=${CMAKE_BINARY_DIR}/install_consumer
    -DGENERATOR=${CMAKE_GENERATOR}
    -P ${CMAKE_CURRENT_LIST_DIR}/install_consumer.cmake)
set_tests_properties(install_consumer PROPERTIES TIMEOUT 600)
