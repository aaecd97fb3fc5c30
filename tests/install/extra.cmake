# Installs the freshly built SDK into a temporary prefix, builds every example
# (examples/) against it with find_package(aoti_cuda) and runs each on its
# fixture (without a GPU each must exit 3 saying why it cannot run);
# examples/generate is run with --help (it needs an exported LLM).
add_test(NAME install_consumer
  COMMAND ${CMAKE_COMMAND}
    -DAOTI_CUDA_BUILD=${CMAKE_BINARY_DIR}
    -DAOTI_CUDA_SRC=${CMAKE_SOURCE_DIR}
    -DWORK=${CMAKE_BINARY_DIR}/install_consumer
    -DGENERATOR=${CMAKE_GENERATOR}
    -P ${CMAKE_CURRENT_LIST_DIR}/install_consumer.cmake)
set_tests_properties(install_consumer PROPERTIES TIMEOUT 600)
