# tests/cli/hostile_run_test.cmake -- `psa run`, `psa mask` and the shared option rules with
# command lines a user should be stopped at: flags given a value, empty values, repeated
# options, numbers with trailing text or out of range, outputs that cannot be written (found
# before any work or any other output), and the Qwen presets' dense reference.
include("${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake")

set(small_run --model Wan2.1_1.3b --preset psa_topk --grid 2,8,16 --heads 2 --head-dim 64)

# psa_expect_sh(<exit code> <shell command line>): for arguments CMake lists cannot carry
# (an empty string); the command line names psa as "$PSA".
function(psa_expect_sh expected line)
  execute_process(COMMAND sh -c "${line}" WORKING_DIRECTORY "${WORK_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expected}")
    message(FATAL_ERROR "${line}\n  exit code ${rc}, expected ${expected}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()
set(ENV{PSA} "${PSA}")

if(CASE STREQUAL "run_flag_values")
  # cxxopts counts "--causal=false" as given: a flag with a value is refused, not turned on.
  psa_expect(2 run ${small_run} --causal=false)
  expect_match("${ERR}" "^psa: --causal=false: a flag takes no value \\(leave --causal out to turn it off\\)\n" "--causal=false")
  psa_expect(2 run ${small_run} --json=0)
  expect_match("${ERR}" "^psa: --json=0: a flag takes no value" "--json=0")
  psa_expect(2 version --json=false)
  expect_match("${ERR}" "^psa: --json=false: a flag takes no value" "version --json=false")
  psa_expect(2 check-config x.yaml --json=0)
  expect_match("${ERR}" "^psa: --json=0: a flag takes no value" "check-config --json=0")
  if(NOT OUT STREQUAL "")
    message(FATAL_ERROR "a refused flag printed on stdout:\n${OUT}")
  endif()
  # An unknown option is named as typed, by every command (options.h parse_options).
  psa_expect(2 run ${small_run} --nope)
  expect_match("${ERR}" "^psa: unknown option '--nope'\n" "run --nope")
  psa_expect(2 presets -n)
  expect_match("${ERR}" "^psa: unknown option '-n'\n" "presets -n")
  psa_expect(0 version --json=true)  # the flag's own value spelled out is the flag
  expect_match("${OUT}" "^\\{\"library\": " "--json=true")

elseif(CASE STREQUAL "run_empty_values")
  # An empty value is not "not given": --q '' once ran on synthetic inputs, and
  # check-config '' validated the embedded file.
  psa_expect(2 run ${small_run} --q= --k=k.npy --v=v.npy)
  expect_match("${ERR}" "^psa: --query '': an empty value\n" "--q=")
  psa_expect(2 run ${small_run} --config=)
  expect_match("${ERR}" "^psa: --config '': an empty value\n" "--config=")
  psa_expect(2 presets --config=)
  expect_match("${ERR}" "^psa: --config '': an empty value\n" "presets --config=")
  psa_expect(2 run ${small_run} --out=)
  expect_match("${ERR}" "^psa: --out '': an empty value\n" "--out=")
  psa_expect_sh(2 "\"$PSA\" check-config ''")
  expect_match("${ERR}" "^psa: FILE '': an empty value\n" "check-config ''")
  psa_expect_sh(2 "\"$PSA\" run --model Wan2.1_1.3b --grid 2,8,16 --preset ''")
  expect_match("${ERR}" "^psa: --preset '': an empty value\n" "--preset ''")

elseif(CASE STREQUAL "run_repeated_options")
  # The last value used to win silently; --frames twice read as "--frames, --height and
  # --width go together".
  psa_expect(2 run ${small_run} --model Wan2.1_14b)
  expect_match("${ERR}" "^psa: --model is given more than once; give it once\n" "--model twice")
  psa_expect(2 run --model Wan2.1_1.3b --frames 17 --frames 18 --height 256 --width 384)
  expect_match("${ERR}" "^psa: --frames is given more than once" "--frames twice")
  psa_expect(2 run ${small_run} --quiet --quiet)
  expect_match("${ERR}" "^psa: --quiet is given more than once" "--quiet twice")
  psa_expect(2 run ${small_run} --q a.npy --q a.npy --k b.npy --v c.npy)
  expect_match("${ERR}" "^psa: --query is given more than once" "--q twice")

elseif(CASE STREQUAL "run_numbers_strict")
  foreach(bad 1abc 0x10 0.5.5 nan inf -1 1e999 " 1")
    psa_expect(2 run ${small_run} --max-error ${bad})
    expect_match("${ERR}" "^psa: --max-error '${bad}': expected a number >= 0\n" "--max-error ${bad}")
  endforeach()
  psa_expect(0 run ${small_run} --max-error 1e3 --quiet)
  expect_match("${OUT}" "; within \\(--max-error 1000\\)" "--max-error 1e3")
  # Past int64: refused as typed, not clamped to INT64_MAX and reported as too large.
  psa_expect(2 run --model Wan2.1_1.3b --grid 99999999999999999999,1,1)
  expect_match("${ERR}" "^psa: --grid '99999999999999999999,1,1': expected three positive integers" "--grid past int64")
  psa_expect(2 run --model CogVideo_5b --grid 1,1,1 --text-length -5)
  expect_match("${ERR}" "^psa: --text-length = -5: must be >= 0\n" "--text-length -5")
  # Options that would be ignored: a text position without text tokens.
  psa_expect(2 run --model Wan2.1_1.3b --grid 2,8,16 --text-length 0 --text-position last)
  expect_match("${ERR}" "^psa: --text-position last: there are no text tokens \\(text length 0, --text-length 0\\)" "--text-position without text")
  psa_expect(2 run --model Wan2.1_1.3b --grid 2,8,16 --text-position first)
  expect_match("${ERR}" "^psa: --text-position first: there are no text tokens \\(text length 0, the preset's\\)" "--text-position, preset without text")
  psa_expect(0 run --model CogVideo_5b --grid 2,8,16 --text-length 16 --text-position last --quiet)
  foreach(opt batch heads kv-heads head-dim)
    psa_expect(2 run --model Wan2.1_1.3b --grid 2,8,16 --${opt} 0)
    expect_match("${ERR}" "^psa: --${opt} = 0: must be >= 1\n" "--${opt} 0")
  endforeach()

elseif(CASE STREQUAL "run_outputs_before_work")
  # An output that cannot be written stops the run before the forwards and before any other
  # output is written.
  file(MAKE_DIRECTORY "${WORK_DIR}/outdir")
  psa_expect(1 run ${small_run} --save-inputs in_ --out missing/o.npy)
  expect_match("${ERR}" "^psa: error: --out 'missing/o.npy': cannot create: No such file or directory\n" "--out in a missing directory")
  psa_expect(1 run ${small_run} --save-inputs in_ --out outdir)
  expect_match("${ERR}" "^psa: error: --out 'outdir': is a directory\n" "--out a directory")
  psa_expect(1 run ${small_run} --out o.npy --mask-png missing/m.png)
  expect_match("${ERR}" "--mask-png 'missing/m.png': cannot create" "--mask-png in a missing directory")
  psa_expect(1 run ${small_run} --save-inputs missing/in_)
  expect_match("${ERR}" "--save-inputs 'missing/in_q.npy': cannot create" "--save-inputs in a missing directory")
  foreach(f in_q.npy in_k.npy in_v.npy o.npy)
    if(EXISTS "${WORK_DIR}/${f}")
      message(FATAL_ERROR "${f} was written by a run that failed on another output")
    endif()
  endforeach()
  # The probe leaves nothing behind, and an existing file is only replaced by the real write.
  psa_expect(0 run ${small_run} --out o.npy --quiet)
  expect_npy("${WORK_DIR}/o.npy" "<f4" "(1, 2, 256, 64)" 131072)

elseif(CASE STREQUAL "run_qwen_default_presets")
  # The Qwen presets (type psa_causal, mask_mode energybound): the dense reference is the
  # same config with method dense, whose mask mode goes back to topk.
  foreach(model Qwen2.5-VL-7B Qwen2-VL-7B)
    psa_expect(0 run --model ${model} --grid 4,16,16 --quiet)
    expect_match("${OUT}" "type psa_causal" "${model} preset line")
    expect_match("${OUT}" "\n  density +0\\.[0-9]+ of the dense work" "${model} ran sparse")
  endforeach()
  psa_expect(0 mask --model Qwen2-VL-7B --grid 4,16,16 --png m.png --quiet)
  if(NOT EXISTS "${WORK_DIR}/m.png")
    message(FATAL_ERROR "psa mask on Qwen2-VL-7B wrote no m.png")
  endif()

elseif(CASE STREQUAL "help_of_help")
  # `psa help --help` re-dispatched itself until the stack overflowed.
  foreach(args "help;--help" "help;-h" "--help;--help" "-h;--help" "help;help")
    psa_expect(0 ${args})
    expect_match("${OUT}" "^usage: psa <command>" "psa ${args}")
  endforeach()

else()
  message(FATAL_ERROR "hostile_run_test.cmake: unknown CASE '${CASE}'")
endif()
