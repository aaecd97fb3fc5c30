# Replaces ExecuTorch v1.2.0's third-party/CMakeLists.txt in the peer build (build.sh copies it over the exported
# tree). The git mirror's `git archive` carries no submodules, so instead of building flatc/flatcc/gflags/json from
# third-party/ we take flatc and the flatbuffers headers from Debian (flatbuffers-compiler, libflatbuffers-dev).
# flatcc (etdump), gflags (example runners), json (LLM tokenizers) and googletest serve only targets this peer
# build turns off, so nothing stands in for them.
find_program(ET_PEER_FLATC flatc REQUIRED)
add_executable(flatc IMPORTED GLOBAL)
set_target_properties(flatc PROPERTIES IMPORTED_LOCATION "${ET_PEER_FLATC}")
