# Unpacks the bundled programs' binaries (tests/fixtures.tar.xz: every
# fixture's .pte, .ptd and .bin) into tests/fixtures/, beside the manifests
# and import lists that git keeps as text. The binaries are stored compressed
# (~7 MB instead of ~51 MB) so that the repository stays small enough to
# travel; they are git-ignored once unpacked. Runs when the archive changed
# since the last unpack or files are missing (a stamp holds the archive's
# SHA-256 and how many binaries it unpacked).
#
# Included by the top-level CMakeLists.txt at configure time, or run alone:
#   cmake -P cmake/unpack_fixtures.cmake
if(NOT DEFINED AOTI_CUDA_SOURCE_ROOT)
  get_filename_component(AOTI_CUDA_SOURCE_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
set(_fixtures_archive "${AOTI_CUDA_SOURCE_ROOT}/tests/fixtures.tar.xz")
set(_fixtures_stamp "${AOTI_CUDA_SOURCE_ROOT}/tests/fixtures/.unpacked")
function(_aoti_cuda_fixture_binaries out)
  file(GLOB_RECURSE _found "${AOTI_CUDA_SOURCE_ROOT}/tests/fixtures/*.pte" "${AOTI_CUDA_SOURCE_ROOT}/tests/fixtures/*.ptd"
       "${AOTI_CUDA_SOURCE_ROOT}/tests/fixtures/*.bin")
  list(LENGTH _found _count)
  set(${out} ${_count} PARENT_SCOPE)
endfunction()
if(EXISTS "${_fixtures_archive}")
  file(SHA256 "${_fixtures_archive}" _fixtures_hash)
  _aoti_cuda_fixture_binaries(_fixtures_count)
  set(_fixtures_hash "${_fixtures_hash} ${_fixtures_count}")
  set(_fixtures_old "")
  if(EXISTS "${_fixtures_stamp}")
    file(READ "${_fixtures_stamp}" _fixtures_old)
  endif()
  if(NOT _fixtures_old STREQUAL _fixtures_hash)
    message(STATUS "aoti_cuda: unpacking tests/fixtures.tar.xz into tests/fixtures")
    file(ARCHIVE_EXTRACT INPUT "${_fixtures_archive}" DESTINATION "${AOTI_CUDA_SOURCE_ROOT}")
    file(SHA256 "${_fixtures_archive}" _fixtures_hash)
    _aoti_cuda_fixture_binaries(_fixtures_count)
    file(WRITE "${_fixtures_stamp}" "${_fixtures_hash} ${_fixtures_count}")
  endif()
else()
  message(WARNING "aoti_cuda: ${_fixtures_archive} is missing; the bundled programs are not available")
endif()
