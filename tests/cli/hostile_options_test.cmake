# tests/cli/hostile_options_test.cmake -- the psa command given hostile option values: numbers
# out of range or out of int64, trailing garbage, repeated list items, options that contradict
# each other, unknown options, and bytes that are not UTF-8. Each is refused with a message
# that names the option and the value as typed (exit 2), or, for JSON, escaped into valid JSON.
# Run by ctest (cli/CMakeLists.txt) as
#   cmake -DPSA=<psa> -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DCASE=<name> -P hostile_options_test.cmake
include("${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake")

# A mask forward of a few hundred milliseconds on the CPU backend.
set(small_mask --model Wan2.1_1.3b --preset psa_topk --grid 2,8,16 --heads 2 --head-dim 64
    --backend cpu --quiet)

# expect_refused(<regex> <psa args>...): exit 2 and `regex` on stderr.
function(expect_refused regex)
  psa_expect(2 ${ARGN})
  expect_match("${ERR}" "${regex}" "psa ${ARGN}")
endfunction()

if(CASE STREQUAL "opts_bench_ranges")
  # Every check runs before the CUDA check, so these hold with or without a GPU.
  expect_refused("^psa: --warmup = 2147483647: allowed \\[0, 1000\\]\n"
                 bench --max-reps 2147483647 --warmup 2147483647 --min-ms 1e308)
  expect_refused("^psa: --max-reps = 2147483647: allowed \\[1, 100000\\]\n" bench --max-reps 2147483647)
  expect_refused("^psa: --warmup = -1: allowed \\[0, 1000\\]\n" bench --warmup -1)
  expect_refused("^psa: --max-reps = 0: allowed \\[1, 100000\\]\n" bench --max-reps 0)
  expect_refused("^psa: --min-ms = -5: allowed \\[0, 600000\\]\n" bench --min-ms -5)
  expect_refused("^psa: --min-ms = 1e308: allowed \\[0, 600000\\]\n" bench --min-ms 1e308)
  expect_refused("^psa: --min-ms = 1e400: allowed \\[0, 600000\\]\n" bench --min-ms=1e400)
  expect_refused("^psa: --min-ms = 600000.5: allowed \\[0, 600000\\]\n" bench --min-ms 600000.5)
  foreach(bad 5abc nan inf 0x10 " 5")
    expect_refused("^psa: --min-ms: '${bad}' is not a valid value for this option" bench --min-ms "${bad}")
  endforeach()
  expect_refused("^psa: --min-ms: '-inf' is not a valid value for this option" bench --min-ms=-inf)
  expect_refused("^psa: --max-reps: '2.5' is not a valid value" bench --max-reps 2.5)
  psa_expect(0 bench --help)
  expect_match("${OUT}" "0 to 1000" "--help gives --warmup's range")
  expect_match("${OUT}" "1 to 100000" "--help gives --max-reps' range")
  expect_match("${OUT}" "0 to 600000" "--help gives --min-ms' range")
  # The ends of the ranges pass the checks: without a device the command then stops at the
  # CUDA check (with one it would time them, so that machine checks only the refusals).
  execute_process(COMMAND "${PSA}" version OUTPUT_VARIABLE v)
  if(NOT v MATCHES "cuda available")
    psa_expect(2 bench --shapes wan13 --warmup 0 --max-reps 1 --min-ms 0)
    expect_match("${ERR}" "^psa bench: needs a CUDA device: " "lower ends")
    psa_expect(2 bench --shapes wan13 --warmup 1000 --max-reps 100000 --min-ms 6e5)
    expect_match("${ERR}" "^psa bench: needs a CUDA device: " "upper ends")
  endif()

elseif(CASE STREQUAL "opts_bench_duplicates")
  expect_refused("^psa: --shapes: 'wan13' is listed twice\n" bench --shapes wan13,wan13)
  expect_refused("^psa: --shapes: 'wan13' is listed twice\n" bench --shapes wan13,cogvideox,wan13)
  expect_refused("^psa: --shapes: unknown shape ''" bench --shapes wan13,)

elseif(CASE STREQUAL "opts_mask_integers")
  # Out of int64: refused as typed, not clamped to 9223372036854775807.
  expect_refused("^psa: --head '99999999999999999999': out of range\n\nusage: psa mask "
                 mask --png a.png --head 99999999999999999999)
  expect_refused("^psa: --batch-index '-99999999999999999999': out of range\n"
                 mask --png a.png --batch-index -99999999999999999999)
  expect_refused("^psa: --query-at '1,99999999999999999999,2': out of range\n"
                 mask --png a.png --view video --query-at 1,99999999999999999999,2)
  expect_refused("^psa: --query-at '1, 2,3': expected three integers T,H,W\n"
                 mask --png a.png --view video "--query-at=1, 2,3")
  expect_refused("^psa: --cell '\\+3': expected an integer\n" mask --png a.png --cell +3)
  expect_refused("^psa: --cell ' 3': expected an integer\n" mask --png a.png --cell " 3")
  if(EXISTS "${WORK_DIR}/a.png")
    message(FATAL_ERROR "a refused command wrote a.png")
  endif()

elseif(CASE STREQUAL "opts_mask_conflicts")
  # The blocks view draws every query block: a query block or position is a mistake, not a no-op.
  expect_refused("^psa: --query-block picks the query block of --view video; --view blocks "
                 mask --png a.png --query-block 3)
  expect_refused("^psa: --query-at picks the query block of --view video; --view blocks "
                 mask --png a.png --view blocks --query-at 1,2,3)
  expect_refused("^psa: give either --query-block or --query-at, not both\n"
                 mask --png a.png --view video --query-block 0 --query-at 1,2,3)

elseif(CASE STREQUAL "opts_mask_unknown_option")
  # An unknown option is named as typed, with the mask command's usage (not the demo's help).
  foreach(args "--nope" "--png;a.png;--nope=1" "--png;a.png;-z")
    list(GET args -1 last)
    string(REGEX REPLACE "=.*" "" typed "${last}")
    expect_refused("^psa: unknown option '${typed}'\n\nusage: psa mask --png FILE" mask ${args})
    if(ERR MATCHES "psa demo")
      message(FATAL_ERROR "psa mask ${args}: the demo's help:\n${ERR}")
    endif()
  endforeach()
  # A bad `psa run` option value also comes with the mask usage.
  expect_refused("\n\nusage: psa mask --png FILE" mask --png a.png --heads x)

elseif(CASE STREQUAL "opts_mask_out_of_forward")
  # Values past the forward's shape name the option, not the library's parameter.
  expect_refused("^psa: --batch-index 1: allowed 0 to 0 \\(the forward has batch 1\\)\n"
                 mask ${small_mask} --png a.png --batch-index 1)
  expect_refused("^psa: --head 2: allowed 0 to 1 \\(the forward has 2 heads\\)\n"
                 mask ${small_mask} --png a.png --head 2)
  expect_refused("^psa: --query-block 2: allowed 0 to 1 \\(the forward has 2 query blocks\\)\n"
                 mask ${small_mask} --png a.png --view video --query-block 2)
  psa_expect(0 mask ${small_mask} --png a.png --view video --query-block 1 --head 1)
  expect_match("${OUT}" "wrote +a.png \\(video view\\)" "the last query block of the last head")

elseif(CASE STREQUAL "opts_json_not_utf8")
  # Bytes that are not UTF-8 become U+FFFD, each; well-formed UTF-8 passes unchanged; control
  # characters are escaped. The file name is echoed in "file" and in "message".
  string(ASCII 239 191 189 fffd)
  string(ASCII 255 xff)
  string(ASCII 195 169 e_acute)                  # U+00E9
  string(ASCII 240 159 152 128 emoji)            # U+1F600
  string(ASCII 237 160 128 surrogate)            # U+D800 in the UTF-8 form: not UTF-8
  string(ASCII 192 175 overlong)                 # '/' in two bytes: not UTF-8
  string(ASCII 244 144 128 128 past_max)         # U+110000: not UTF-8
  string(ASCII 226 130 truncated)                # the first two of three bytes
  string(ASCII 1 ctl)
  set(name "a${xff}b${e_acute}${emoji}c${surrogate}d${overlong}e${past_max}f${ctl}g${truncated}")
  set(want "a${fffd}b${e_acute}${emoji}c${fffd}${fffd}${fffd}d${fffd}${fffd}e")
  string(APPEND want "${fffd}${fffd}${fffd}${fffd}f\\u0001g${fffd}${fffd}")
  psa_expect(1 check-config --json "${name}")
  string(FIND "${OUT}" "\"file\": \"${want}\"" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check-config --json: expected \"file\": \"${want}\" in:\n${OUT}")
  endif()
  foreach(bad xff surrogate overlong past_max ctl)
    string(FIND "${OUT}" "${${bad}}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "check-config --json: raw bytes (${bad}) in the JSON:\n${OUT}")
    endif()
  endforeach()

elseif(CASE STREQUAL "opts_yaml_too_deep")
  # Nesting past yaml-cpp's depth limit: the message says so (yaml-cpp's own text is "bad file").
  string(REPEAT "[" 100000 open)
  string(REPEAT "]" 100000 close)
  file(WRITE "${WORK_DIR}/deep.yaml" "M: ${open}${close}\n")
  psa_expect(1 check-config "${WORK_DIR}/deep.yaml")
  expect_match("${ERR}" "deep.yaml: line 1, column [0-9]+: maps and sequences nested deeper than yaml-cpp's limit of [0-9]+ levels \\(PSA_ERR_YAML_PARSE\\)"
               "deep YAML")

else()
  message(FATAL_ERROR "hostile_options_test.cmake: unknown CASE '${CASE}'")
endif()
