# tests/cli/hostile_files_test.cmake -- the psa command against hostile files: .npy inputs
# that are not regular files or whose headers lie, and outputs whose writes fail midway.
# Run by ctest (cli/CMakeLists.txt) as
#   cmake -DPSA=<psa> -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DCASE=<name> -P hostile_files_test.cmake
include("${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake")

find_program(PYTHON3 python3 REQUIRED)
find_program(SH sh REQUIRED)

# q, k, v of shape (1, 2, 1920, 64) '<f4' fit this run (bnsd: batch 1, 2 heads, L = 1920).
set(base run --model Wan2.1_1.3b --grid 5,16,24 --quiet)
set(good_bytes 983040)  # 1 * 2 * 1920 * 64 * 4

# npy_file(<name> <header> <data bytes>): a version 1.0 .npy file in WORK_DIR whose header
# is the text <header> (padded with spaces and '\n' to 64 bytes, as NumPy pads it), followed
# by <data bytes> zero bytes.
function(npy_file name header data_bytes)
  execute_process(COMMAND "${PYTHON3}" -c [=[
import struct, sys
name, header, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
header += b' ' * (-(10 + len(header) + 1) % 64) + b'\n'
with open(name, 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header + bytes(n))
]=] "${WORK_DIR}/${name}" "${header}" "${data_bytes}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "could not write ${name}")
  endif()
endfunction()

# psa_expect_soon(<exit code> <args>...): psa_expect, killed after 20 s (a hang fails).
function(psa_expect_soon expected)
  execute_process(COMMAND "${PSA}" ${ARGN}
    WORKING_DIRECTORY "${WORK_DIR}" TIMEOUT 20
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expected}")
    message(FATAL_ERROR "psa ${ARGN}\n  exit code ${rc}, expected ${expected}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

# psa_expect_fsize_limited(<exit code> <args>...): psa_expect with the file size limit at one
# block, so that any write of more than 1 KiB fails midway with EFBIG (SIGXFSZ ignored).
function(psa_expect_fsize_limited expected)
  execute_process(COMMAND "${SH}" -c "trap '' XFSZ; ulimit -f 1 && exec \"$@\"" sh "${PSA}" ${ARGN}
    WORKING_DIRECTORY "${WORK_DIR}" TIMEOUT 60
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expected}")
    message(FATAL_ERROR "psa ${ARGN} (ulimit -f 1)\n  exit code ${rc}, expected ${expected}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

# expect_only_files(<names>...): WORK_DIR holds exactly these entries (no temporary or
# partial file left behind).
function(expect_only_files)
  file(GLOB present RELATIVE "${WORK_DIR}" LIST_DIRECTORIES true "${WORK_DIR}/*" "${WORK_DIR}/.*")
  list(SORT present)
  set(expected ${ARGN})
  list(SORT expected)
  if(NOT present STREQUAL expected)
    message(FATAL_ERROR "expected exactly '${expected}' in ${WORK_DIR}, found '${present}'")
  endif()
endfunction()

set(good_header "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1920, 64), }")

if(CASE STREQUAL "files_non_regular_inputs")
  # Only regular files are read: a directory, a FIFO with no writer (opening it used to block
  # forever) and /dev/zero (read until memory ran out) are refused at once, by name.
  npy_file(good.npy "${good_header}" ${good_bytes})
  file(MAKE_DIRECTORY "${WORK_DIR}/dir.npy")
  psa_expect_soon(1 ${base} --q dir.npy --k good.npy --v good.npy)
  expect_match("${ERR}" "^psa: error: dir\\.npy: is a directory; \\.npy inputs must be regular files"
               "directory input")
  if(EXISTS /dev/zero)
    psa_expect_soon(1 ${base} --q good.npy --k /dev/zero --v good.npy)
    expect_match("${ERR}" "^psa: error: /dev/zero: is a character device" "/dev/zero input")
  endif()
  find_program(MKFIFO mkfifo)
  if(MKFIFO)
    execute_process(COMMAND "${MKFIFO}" "${WORK_DIR}/fifo.npy" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "mkfifo failed: ${rc}")
    endif()
    psa_expect_soon(1 ${base} --q good.npy --k good.npy --v fifo.npy)
    expect_match("${ERR}" "^psa: error: fifo\\.npy: is a FIFO; \\.npy inputs must be regular files"
                 "FIFO input")
  else()
    message(STATUS "mkfifo not found: the FIFO input is not tried")
  endif()

elseif(CASE STREQUAL "files_shape_overflow")
  # The byte count a header promises is multiplied with overflow checks: it used to wrap,
  # reporting a bogus count or letting a 2^64-byte shape pass with no data at all.
  npy_file(good.npy "${good_header}" ${good_bytes})
  npy_file(huge.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 1000000, 64), }" 16)
  psa_expect(1 ${base} --q huge.npy --k good.npy --v good.npy)
  expect_match("${ERR}" "^psa: error: huge\\.npy: header <f4 \\(1000000, 1000000, 1000000, 64\\) promises more than 2\\^64 data bytes\n$"
               "shape whose byte count overflows")
  npy_file(wraps.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 1, 1), }" 0)
  psa_expect(1 ${base} --q good.npy --k wraps.npy --v good.npy)
  expect_match("${ERR}" "^psa: error: wraps\\.npy: header <f4 \\(4294967296, 4294967296, 1, 1\\) promises more than 2\\^64 data bytes\n$"
               "shape whose byte count wraps to 0")
  npy_file(long.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 99999999999999999999, 64), }" 0)
  psa_expect(1 ${base} --q good.npy --k good.npy --v long.npy)
  expect_match("${ERR}" "^psa: error: long\\.npy: bad \\.npy header: a dimension of 'shape' does not fit in 64 bits"
               "dimension past int64")

elseif(CASE STREQUAL "files_header_strict")
  # The header must be the dict NumPy writes; anything a lenient parser would guess at is
  # refused, naming the file.
  npy_file(good.npy "${good_header}" ${good_bytes})
  set(bad_headers
    "twice_shape|{'descr': '<f4', 'fortran_order': False, 'shape': (9, 9), 'shape': (1, 2, 1920, 64), }|'shape' appears twice"
    "twice_descr|{'descr': '<f2', 'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1920, 64), }|'descr' appears twice"
    "twice_order|{'descr': '<f4', 'fortran_order': True, 'fortran_order': False, 'shape': (1, 2, 1920, 64), }|fortran_order arrays are not supported"
    "twice_order_false|{'descr': '<f4', 'fortran_order': False, 'fortran_order': False, 'shape': (1, 2, 1920, 64), }|'fortran_order' appears twice"
    "no_commas|{'descr': '<f4', 'fortran_order': False, 'shape': (1 2 1920 64), }|expected ',' or '\\)' after a dimension of 'shape'"
    "not_a_tuple|{'descr': '<f4', 'fortran_order': False, 'shape': (983040), }|'shape' \\(n\\) is not a tuple"
    "trailing|{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1920, 64), } junk|unexpected characters after the closing '}'"
    "unknown_key|{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1920, 64), 'extra': 1, }|unknown key 'extra'"
    "no_shape|{'descr': '<f4', 'fortran_order': False, }|no 'shape'"
    "negative|{'descr': '<f4', 'fortran_order': False, 'shape': (1, -2, 1920, 64), }|a dimension of 'shape' is not a non-negative integer"
    "leading_zero|{'descr': '<f4', 'fortran_order': False, 'shape': (01, 2, 1920, 64), }|leading zero"
    "bad_order|{'descr': '<f4', 'fortran_order': 0, 'shape': (1, 2, 1920, 64), }|'fortran_order' must be True or False"
    "double_comma|{'descr': '<f4',, 'fortran_order': False, 'shape': (1, 2, 1920, 64), }|expected a quoted key"
    "unterminated|{'descr': '<f4, 'fortran_order': False, 'shape': (1, 2, 1920, 64), }|expected ',' or '}' after the value of 'descr'")
  foreach(entry IN LISTS bad_headers)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 header)
    list(GET parts 2 reason)
    npy_file(${name}.npy "${header}" ${good_bytes})
    psa_expect(1 ${base} --q ${name}.npy --k good.npy --v good.npy)
    expect_match("${ERR}" "^psa: error: ${name}\\.npy: .*${reason}" "header ${name}")
  endforeach()
  # What NumPy and Python 2 era writers produce still reads: double quotes, no trailing
  # comma, whitespace and newlines between tokens, long integers ('L').
  npy_file(variant.npy "{\"descr\": \"<f4\",\n \"shape\" : (1L, 2, 1920,64) ,\"fortran_order\":False}" ${good_bytes})
  psa_expect(0 ${base} --q variant.npy --k good.npy --v good.npy)

elseif(CASE STREQUAL "files_empty_dim")
  # An empty array is refused by the reader, which names the file (the library's own shape
  # check cannot).
  npy_file(good.npy "${good_header}" ${good_bytes})
  npy_file(empty.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2, 1920, 64), }" 0)
  psa_expect(1 ${base} --q empty.npy --k good.npy --v good.npy)
  expect_match("${ERR}" "^psa: error: empty\\.npy: shape \\(0, 2, 1920, 64\\) is empty; every dimension must be >= 1"
               "zero dimension")

elseif(CASE STREQUAL "files_write_full_device")
  # A write that fails names the path and the reason.
  if(NOT EXISTS /dev/full)
    message(STATUS "no /dev/full: nothing to try")
    return()
  endif()
  npy_file(good.npy "${good_header}" ${good_bytes})
  psa_expect(1 ${base} --q good.npy --k good.npy --v good.npy --out /dev/full)
  expect_match("${ERR}" "^psa: error: /dev/full: cannot write: No space left on device" "--out /dev/full")
  psa_expect(1 mask --png /dev/full)
  expect_match("${ERR}" "^psa: error: path: writing '/dev/full' failed \\(No space left on device\\)"
               "mask --png /dev/full")

elseif(CASE STREQUAL "files_write_no_partial_npy")
  # --out and --save-inputs write a temporary file and rename it into place: a write that
  # fails midway (here past the file size limit; a full disk alike) leaves the old file as it
  # was, or no file, and no partial or temporary file behind.
  npy_file(good.npy "${good_header}" ${good_bytes})
  file(WRITE "${WORK_DIR}/o.npy" "the previous output\n")
  psa_expect_fsize_limited(1 ${base} --q good.npy --k good.npy --v good.npy --out o.npy)
  expect_match("${ERR}" "^psa: error: o\\.npy: cannot write: File too large" "--out past the size limit")
  file(READ "${WORK_DIR}/o.npy" kept)
  if(NOT kept STREQUAL "the previous output\n")
    message(FATAL_ERROR "o.npy was changed by the failed write")
  endif()
  psa_expect_fsize_limited(1 ${base} --q good.npy --k good.npy --v good.npy --save-inputs in_)
  expect_match("${ERR}" "^psa: error: in_q\\.npy: cannot write: File too large" "--save-inputs past the size limit")
  expect_only_files(good.npy o.npy)
  # Without the limit the same runs write whole files.
  psa_expect(0 ${base} --q good.npy --k good.npy --v good.npy --out o.npy --save-inputs in_)
  expect_npy("${WORK_DIR}/o.npy" "<f4" "(1, 2, 1920, 64)" ${good_bytes})
  expect_npy("${WORK_DIR}/in_v.npy" "<f4" "(1, 2, 1920, 64)" ${good_bytes})
  expect_only_files(good.npy in_k.npy in_q.npy in_v.npy o.npy)

elseif(CASE STREQUAL "files_write_no_partial_png")
  # The library's PNG writer (psa mask, psa run --mask-png) does the same.
  file(WRITE "${WORK_DIR}/m.png" "the previous picture\n")
  psa_expect_fsize_limited(1 mask --png m.png)
  expect_match("${ERR}" "^psa: error: path: writing 'm\\.png' failed \\(File too large\\)" "PNG past the size limit")
  file(READ "${WORK_DIR}/m.png" kept)
  if(NOT kept STREQUAL "the previous picture\n")
    message(FATAL_ERROR "m.png was changed by the failed write")
  endif()
  psa_expect_fsize_limited(1 mask --png new.png)
  expect_only_files(m.png)
  psa_expect(0 mask --png m.png)
  file(READ "${WORK_DIR}/m.png" magic LIMIT 8 HEX)
  if(NOT magic STREQUAL "89504e470d0a1a0a")
    message(FATAL_ERROR "m.png: not a PNG after a successful write (${magic})")
  endif()
  expect_only_files(m.png)

else()
  message(FATAL_ERROR "unknown case '${CASE}'")
endif()
