# The Python package's tests (tests/python, pytest): a generator of fake
# programs on the fake model libraries (tests/fake_model), so that the CPU
# tests can load them on Device::cpu(). Included by tests/CMakeLists.txt after
# tests/fake_model/extra.cmake (alphabetical order), whose targets it names.
add_executable(aoti_cuda_fake_programs ${CMAKE_CURRENT_LIST_DIR}/fake_programs.cpp
                                       ${CMAKE_CURRENT_LIST_DIR}/../support/pte_builder.cpp)
target_include_directories(aoti_cuda_fake_programs PRIVATE ${CMAKE_CURRENT_LIST_DIR}/.. ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(aoti_cuda_fake_programs PRIVATE aoti_cuda_schema_headers)
target_compile_definitions(aoti_cuda_fake_programs PRIVATE
  FAKE_AFFINE_SO="$<TARGET_FILE:aoti_cuda_fake_model_affine>"
  FAKE_KV_SO="$<TARGET_FILE:aoti_cuda_fake_model_kv>")
add_dependencies(aoti_cuda_fake_programs aoti_cuda_fake_model_affine aoti_cuda_fake_model_kv)
