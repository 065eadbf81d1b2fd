# Included before project() in `pip install .` builds (pyproject.toml sets
# CMAKE_PROJECT_INCLUDE_BEFORE): FUSEOPT_CUDA defaults to whether nvcc is on
# PATH (or CUDACXX names a compiler), as tools/build.sh decides for the plain
# build. A value given with -Ccmake.define.FUSEOPT_CUDA=... wins.
if(NOT DEFINED FUSEOPT_CUDA AND NOT DEFINED CACHE{FUSEOPT_CUDA})
  if(DEFINED ENV{CUDACXX} AND EXISTS "$ENV{CUDACXX}")
    set(fuseopt_nvcc "$ENV{CUDACXX}")
  else()
    find_program(fuseopt_nvcc nvcc NO_CACHE)
  endif()
  if(fuseopt_nvcc)
    set(FUSEOPT_CUDA ON CACHE BOOL "Build the CUDA backend")
    message(STATUS "fuseopt: CUDA compiler ${fuseopt_nvcc}: building the CUDA backend")
  else()
    set(FUSEOPT_CUDA OFF CACHE BOOL "Build the CUDA backend")
    message(STATUS "fuseopt: no nvcc on PATH: building the CPU backend only")
  endif()
endif()
