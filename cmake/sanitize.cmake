# Sanitizer and fuzzing builds (docs/testing.md). CPU only: nvcc's device code and the
# CUDA runtime are not instrumented, so both need -DFUSEOPT_CUDA=OFF.
#
#   -DFUSEOPT_SANITIZE=address,undefined   every target instrumented (-fsanitize= list, gcc or
#                                          clang); any report ends the process with an error
#                                          (UBSan does not recover), so a report fails its test
#   -DFUSEOPT_FUZZ=ON                      clang only: the libFuzzer targets in fuzz/, the library
#                                          built with coverage for them; implies address,undefined
#                                          when FUSEOPT_SANITIZE is empty
#
# Included before any target is defined: the flags apply to everything below, tools and
# tests included.
set(FUSEOPT_SANITIZE "" CACHE STRING
  "Sanitizers for every target, as a -fsanitize= list (e.g. address,undefined); needs FUSEOPT_CUDA=OFF")
option(FUSEOPT_FUZZ "Build the libFuzzer targets in fuzz/ (clang; needs FUSEOPT_CUDA=OFF)" OFF)

set(FUSEOPT_SANITIZERS "${FUSEOPT_SANITIZE}")
if(FUSEOPT_FUZZ AND NOT FUSEOPT_SANITIZERS)
  set(FUSEOPT_SANITIZERS "address,undefined")
endif()

if(FUSEOPT_SANITIZERS)
  if(FUSEOPT_CUDA)
    message(FATAL_ERROR "FUSEOPT_SANITIZE / FUSEOPT_FUZZ instrument host code only: configure with -DFUSEOPT_CUDA=OFF")
  endif()
  message(STATUS "FUSEOPT_SANITIZE: ${FUSEOPT_SANITIZERS} (reports are fatal)")
  add_compile_options(-fsanitize=${FUSEOPT_SANITIZERS} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # libstdc++'s own checks (vector/string operator[] in range, front() of an empty vector,
  # * of an empty optional): an index past size() but inside the allocation is no ASan report.
  add_compile_definitions(_GLIBCXX_ASSERTIONS)
  add_link_options(-fsanitize=${FUSEOPT_SANITIZERS})
  # File and line in every report's stack, at a fraction of full debug info's cost.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-gline-tables-only)
  else()
    add_compile_options(-g1)
  endif()
endif()

if(FUSEOPT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FUSEOPT_FUZZ=ON needs clang with libFuzzer (Debian: clang-15 libfuzzer-15-dev); "
                        "configure with -DCMAKE_CXX_COMPILER=clang++-15")
  endif()
  # Coverage feedback from the library and tools; the fuzz targets link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
