# cmake/wheel.cmake -- install layout of the Python wheel (PSA_PYTHON_WHEEL, set by the
# root pyproject.toml for scikit-build-core). Everything goes into the package directory
# `psa/` of the wheel: libpsa.so.0 (one file, no version symlinks: wheels cannot hold
# links), the SWIG extension (bindings/python/CMakeLists.txt) and every non-system shared
# library libpsa needs (yaml-cpp; the CUDA runtime is linked statically). Each finds the
# others through RPATH $ORIGIN, so the installed package works from anywhere.
# The JAX FFI handlers, psa/_jax_ffi.so, are installed there too when they are built
# (bindings/python/jax.cmake: PSA_BUILD_JAX, PSA_JAX_INCLUDE_DIR).
set_target_properties(psa PROPERTIES
  VERSION ${PROJECT_VERSION_MAJOR}
  INSTALL_RPATH "$ORIGIN"
  PUBLIC_HEADER "")
install(TARGETS psa LIBRARY DESTINATION psa NAMELINK_SKIP)

# The shared libraries libpsa links that a fresh system lacks (yaml-cpp is not part of the
# base system): copied under the name libpsa records (its DT_NEEDED, e.g.
# libyaml-cpp.so.0.7). The C/C++ runtime and glibc stay with the system.
install(CODE [[
  file(GET_RUNTIME_DEPENDENCIES
    LIBRARIES "$<TARGET_FILE:psa>"
    RESOLVED_DEPENDENCIES_VAR _psa_deps
    UNRESOLVED_DEPENDENCIES_VAR _psa_missing
    PRE_EXCLUDE_REGEXES "^(ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\\+\\+)[.-]")
  foreach(_dep IN LISTS _psa_deps)
    get_filename_component(_name "${_dep}" NAME)
    if(_name MATCHES "^libyaml-cpp")
      file(REAL_PATH "${_dep}" _real)
      message(STATUS "Bundling ${_real} as psa/${_name}")
      file(COPY_FILE "${_real}" "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/psa/${_name}")
    endif()
  endforeach()
  if(_psa_missing)
    message(WARNING "libpsa: unresolved runtime dependencies: ${_psa_missing}")
  endif()
]])
