# examples/install_prefix.cmake -- the packaging fixture (cmake -P): installs the build into a
# fresh prefix and checks what a consumer gets: psa.h, libpsa.so with SONAME libpsa.so.MAJOR
# and no libcudart.so dependency (static), psa.pc and the CMake package, with no private
# dependency (yaml-cpp, cxxopts, CUDA runtime) in the exported link interface or in psa.pc.
#   -DBUILD_DIR=<build> -DPREFIX=<dir> -DLIBDIR=<lib dir, relative> -DMAJOR=<n> [-DREADELF=...]
cmake_minimum_required(VERSION 3.22)
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()

set(lib "${PREFIX}/${LIBDIR}")
foreach(f "${PREFIX}/include/psa.h" "${lib}/libpsa.so" "${lib}/libpsa.so.${MAJOR}"
          "${lib}/pkgconfig/psa.pc" "${lib}/cmake/psa/psaConfig.cmake"
          "${lib}/cmake/psa/psaConfigVersion.cmake" "${lib}/cmake/psa/psaTargets.cmake")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# IMPORTED_LINK_DEPENDENT_LIBRARIES (CMake's record of a shared library's private shared
# dependencies, used for -rpath-link only) may name yaml-cpp; nothing else may.
file(GLOB targets "${lib}/cmake/psa/psaTargets*.cmake")
foreach(f IN LISTS targets "${lib}/pkgconfig/psa.pc")
  file(STRINGS "${f}" lines)
  list(FILTER lines EXCLUDE REGEX "IMPORTED_LINK_DEPENDENT_LIBRARIES")
  string(REGEX MATCH "yaml|cxxopts|cudart|CUDA::" leak "${lines}")
  if(leak)
    message(FATAL_ERROR "${f} mentions a private dependency ('${leak}')")
  endif()
endforeach()

if(READELF)
  execute_process(COMMAND ${READELF} -d "${lib}/libpsa.so" OUTPUT_VARIABLE dyn)
  string(REGEX MATCH "SONAME\\)[^[]*\\[([^]]*)\\]" m "${dyn}")
  if(NOT CMAKE_MATCH_1 STREQUAL "libpsa.so.${MAJOR}")
    message(FATAL_ERROR "SONAME is '${CMAKE_MATCH_1}', expected libpsa.so.${MAJOR}")
  endif()
  string(REGEX MATCHALL "NEEDED\\)[^[]*\\[([^]]*)\\]" needed "${dyn}")
  # yaml-cpp may be a shared library of the system (private, but loaded at run time);
  # the CUDA runtime is linked statically.
  string(REGEX MATCH "libcudart" leak "${needed}")
  if(leak)
    message(FATAL_ERROR "libpsa.so needs ${leak} at run time: ${needed}")
  endif()
  string(REGEX REPLACE "NEEDED\\)[^[]*\\[([^]]*)\\]" "\\1" needed "${needed}")
  message(STATUS "SONAME libpsa.so.${MAJOR}; NEEDED ${needed}")
endif()
message(STATUS "installed into ${PREFIX}")
