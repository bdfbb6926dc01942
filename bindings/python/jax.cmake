# bindings/python/jax.cmake -- psa/_jax_ffi.so, the XLA FFI handlers of psa.jax.attention
# (psa_jax_ffi.cc), included by bindings/python/CMakeLists.txt once the Python interpreter is
# known. Needs only the header-only XLA FFI API that jaxlib ships (jax.ffi.include_dir()):
#   PSA_BUILD_JAX        AUTO (default): built when PSA_JAX_INCLUDE_DIR is given or the
#                        configured Python can `import jax`; ON: the same, an error otherwise;
#                        OFF: never.
#   PSA_JAX_INCLUDE_DIR  jaxlib's include directory (holds xla/ffi/api/ffi.h); default: asked
#                        from the configured Python. Pass it to a `pip install .` under build
#                        isolation, whose Python has no jax:
#                          pip install . -C cmake.define.PSA_JAX_INCLUDE_DIR="$(python -c \
#                            'import jax.ffi; print(jax.ffi.include_dir())')"
# The library is not a Python extension: psa/jax.py loads it with ctypes and registers its
# handlers (PsaJaxAttentionHost for "cpu", PsaJaxAttentionCuda for "CUDA"). It links libpsa
# and finds it next to itself (RPATH $ORIGIN); the CUDA handler needs no CUDA headers (the
# stream is an opaque pointer) and works when libpsa has its CUDA backend. For its fallback
# workspace (stream-ordered cuMemAllocAsync when XLA's scratch allocator refuses) it opens the
# CUDA driver with dlopen: no link to cudart or libcuda here.
set(PSA_BUILD_JAX "AUTO" CACHE STRING "Build psa/_jax_ffi.so (the JAX FFI handlers): AUTO, ON, OFF")
set_property(CACHE PSA_BUILD_JAX PROPERTY STRINGS AUTO ON OFF)
set(PSA_JAX_INCLUDE_DIR "" CACHE PATH "jaxlib's include directory (jax.ffi.include_dir())")

if(PSA_BUILD_JAX STREQUAL "OFF")
  return()
endif()
set(_psa_jax_inc "${PSA_JAX_INCLUDE_DIR}")
if(NOT _psa_jax_inc)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import jax.ffi; print(jax.ffi.include_dir())"
                  RESULT_VARIABLE _psa_rc OUTPUT_VARIABLE _psa_jax_inc
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _psa_rc EQUAL 0)
    set(_psa_jax_inc "")
  endif()
endif()
if(NOT _psa_jax_inc OR NOT EXISTS "${_psa_jax_inc}/xla/ffi/api/ffi.h")
  set(_psa_why "no XLA FFI headers: ${Python3_EXECUTABLE} cannot `import jax` and PSA_JAX_INCLUDE_DIR is not set")
  if(_psa_jax_inc)
    set(_psa_why "no xla/ffi/api/ffi.h under ${_psa_jax_inc}")
  endif()
  if(PSA_BUILD_JAX STREQUAL "ON")
    message(FATAL_ERROR "PSA_BUILD_JAX=ON: ${_psa_why}")
  endif()
  message(STATUS "bindings: JAX FFI handlers: skipped (${_psa_why})")
  return()
endif()
message(STATUS "bindings: JAX FFI handlers (psa/_jax_ffi.so) against ${_psa_jax_inc}")

add_library(psa_jax_ffi MODULE ${CMAKE_CURRENT_LIST_DIR}/psa_jax_ffi.cc)
target_include_directories(psa_jax_ffi SYSTEM PRIVATE "${_psa_jax_inc}")
target_link_libraries(psa_jax_ffi PRIVATE psa ${CMAKE_DL_LIBS})
target_compile_features(psa_jax_ffi PRIVATE cxx_std_17)
set_target_properties(psa_jax_ffi PROPERTIES
  OUTPUT_NAME _jax_ffi
  PREFIX ""
  SUFFIX ".so"
  LIBRARY_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/psa"
  CXX_VISIBILITY_PRESET hidden)
if(PSA_PYTHON_WHEEL)
  set_target_properties(psa_jax_ffi PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS psa_jax_ffi LIBRARY DESTINATION psa)
endif()
