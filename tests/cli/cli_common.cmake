# tests/cli/cli_common.cmake -- what every command-level test script (tests/cli/*_test.cmake)
# starts with: the required -D variables, a fresh WORK_DIR, and psa_expect / expect_match /
# expect_npy. A script's cases are `if(CASE STREQUAL "<name>")` branches; cli/CMakeLists.txt
# registers one ctest `cli.<name>` per branch it finds.
cmake_minimum_required(VERSION 3.22)
foreach(_v PSA SOURCE_DIR WORK_DIR CASE)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "${CMAKE_SCRIPT_MODE_FILE}: -D${_v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# psa_expect(<exit code> <args>...): runs psa; sets OUT and ERR in the caller.
function(psa_expect expected)
  execute_process(COMMAND "${PSA}" ${ARGN}
    WORKING_DIRECTORY "${WORK_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expected}")
    message(FATAL_ERROR "psa ${ARGN}\n  exit code ${rc}, expected ${expected}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

# expect_match(<text> <regex> <what>)
function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected to match '${regex}', got:\n${text}")
  endif()
endfunction()

# expect_npy(<file> <descr> <shape literal> <data bytes>): header fields and file size.
function(expect_npy file descr shape data_bytes)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "${file} was not written")
  endif()
  file(READ "${file}" magic LIMIT 6 HEX)
  if(NOT magic STREQUAL "934e554d5059")
    message(FATAL_ERROR "${file}: bad .npy magic ${magic}")
  endif()
  file(READ "${file}" header OFFSET 10 LIMIT 118)
  expect_match("${header}" "'descr': '${descr}'" "${file} descr")
  expect_match("${header}" "'fortran_order': False" "${file} fortran_order")
  string(REPLACE "(" "\\(" shape_re "${shape}")
  string(REPLACE ")" "\\)" shape_re "${shape_re}")
  expect_match("${header}" "'shape': ${shape_re}" "${file} shape")
  file(SIZE "${file}" size)
  math(EXPR header_bytes "${size} - ${data_bytes}")
  math(EXPR header_rem "${header_bytes} % 64")
  if(header_bytes LESS 64 OR NOT header_rem EQUAL 0)
    message(FATAL_ERROR "${file}: ${size} bytes; expected a 64-byte aligned header + ${data_bytes}")
  endif()
endfunction()

