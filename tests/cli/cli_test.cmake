# tests/cli/cli_test.cmake -- the psa command as a user runs it: exit codes, messages and
# files. Run by ctest (cli/CMakeLists.txt) as
#   cmake -DPSA=<psa> -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DCASE=<name> -P cli_test.cmake
include("${CMAKE_CURRENT_LIST_DIR}/cli_common.cmake")

set(small_run --model Wan2.1_1.3b --preset psa_topk --grid 2,8,16 --heads 2 --head-dim 64)

if(CASE STREQUAL "usage")
  psa_expect(2)
  expect_match("${ERR}" "usage: psa <command>" "no command")
  psa_expect(2 frobnicate)
  expect_match("${ERR}" "unknown command 'frobnicate'" "unknown command")
  psa_expect(2 run --grid 2,8,16)
  expect_match("${ERR}" "--model is required" "run without --model")
  psa_expect(2 run --model Wan2.1_1.3b --grid 2,8)
  expect_match("${ERR}" "--grid '2,8'" "bad --grid")
  psa_expect(2 run ${small_run} --dtype f64)
  expect_match("${ERR}" "--dtype 'f64': expected one of f32, f16, bf16" "bad --dtype")
  psa_expect(2 run ${small_run} --precision int4)
  expect_match("${ERR}" "--precision 'int4': expected one of default, fp8" "bad --precision")
  psa_expect(2 run ${small_run} --no-such-flag)
  psa_expect(2 check-config)
  psa_expect(0 run --help)
  expect_match("${OUT}" "--save-inputs" "run --help")
  psa_expect(0 version)
  expect_match("${OUT}" "^psa [0-9]+\\.[0-9]+\\.[0-9]+" "version")

elseif(CASE STREQUAL "presets")
  psa_expect(0 presets)
  expect_match("${OUT}" "^8 models" "model count")
  foreach(model CogVideo_5b CogVideo1.5_5b Wan2.1_1.3b Wan2.1_14b Wan2.2_5B Wan2.2_A14B)
    string(REPLACE "." "\\." model_re "${model}")
    expect_match("${OUT}" "\n${model_re}  \\(default " "model ${model}")
  endforeach()
  expect_match("${OUT}" "\\* psa_balanced +psa +thresholdbound +levels\\+sim +block 128x128"
               "Wan2.1_1.3b psa_balanced line")
  # psa_causal presets choose levels as psa does: mask mode, format and level ends, not a sparsity.
  expect_match("${OUT}" "\\* psa_balanced +psa_causal +energybound +levels\\+sim +block 128x128 tile 32 +ends 1:0.7 2:0.8 4:0.9 8:0.9 0:1 +none +warmup 0\n"
               "Qwen psa_causal line")
  psa_expect(0 run --model Qwen2.5-VL-7B --preset psa_topk --grid 2,16,16 --heads 2 --head-dim 64)
  expect_match("${OUT}" "\n  preset +type psa_causal, mask mode topk, mask format levels\\+sim, blocks 128x128 \\(tile 32\\), antidiagonal importance stride 16, level ends 1:0.05 "
               "Qwen psa_causal run label")
  psa_expect(0 presets --config "${SOURCE_DIR}/configs/attention_config.yaml")
  expect_match("${OUT}" "^8 models" "model count from the file")

elseif(CASE STREQUAL "check_config_ok")
  psa_expect(0 check-config "${SOURCE_DIR}/configs/attention_config.yaml")
  expect_match("${OUT}" "^OK: .*attention_config.yaml: 8 models, [0-9]+ presets" "check-config")

elseif(CASE STREQUAL "check_config_broken")
  # A valid model whose only preset has a bad mask_mode: the message must name the key.
  file(WRITE "${WORK_DIR}/bad_value.yaml" [=[
Tiny:
  default_attention: broken
  video_scale: {width_divisor: 16, height_divisor: 16, depth_divisor: 4}
  text_length: 0
  attention_configs:
    broken:
      type: psa
      attn_impl: new_mask_type
      use_sim_mask: false
      mask_mode: sideways
      block_size: {m: 128, n: 64, tile_n: 32}
      mask_ratios: {1: [0.0, 0.1], 2: [0.1, 0.2], 4: [0.2, 0.3], 8: [0.3, 0.5], 0: [0.5, 1.0]}
]=])
  psa_expect(1 check-config bad_value.yaml)
  expect_match("${ERR}" "^psa: error: .*mask_mode.*\\(PSA_ERR_INVALID_CONFIG\\)" "bad value")
  file(WRITE "${WORK_DIR}/bad_syntax.yaml" "Tiny:\n  attention_configs: [unclosed\n")
  psa_expect(1 check-config bad_syntax.yaml)
  expect_match("${ERR}" "^psa: error: .*\\(PSA_ERR_YAML_PARSE\\)" "bad syntax")
  psa_expect(1 check-config missing.yaml)
  expect_match("${ERR}" "^psa: error: .*missing\\.yaml.*\\(PSA_ERR_IO\\)" "missing file")
  psa_expect(1 presets --config bad_value.yaml)

elseif(CASE STREQUAL "demo")
  psa_expect(0 demo)
  expect_match("${OUT}" "levels +1: [0-9.]+%" "level fractions")
  expect_match("${OUT}" "\npsa demo: OK: " "verdict")
  psa_expect(0 demo --json)
  expect_match("${OUT}" "^{\"model\": \"Wan2.1_1.3b\".*\"ran_dense\": false.*\"verdict\": \"OK: "
               "demo --json")

elseif(CASE STREQUAL "run_out")
  psa_expect(0 run ${small_run} --layout bsnd --out o.npy)
  expect_match("${OUT}" "density +0\\.[0-9]+ of the dense work" "density line")
  expect_match("${OUT}" "step +15 \\(default: pinned to warmup_steps = 15" "default step")
  expect_npy("${WORK_DIR}/o.npy" "<f4" "(1, 256, 2, 64)" 131072)
  psa_expect(0 run ${small_run} --batch 2 --out o2.npy --json --step 0)
  expect_match("${OUT}" "\"step\": 0, \"step_pinned\": true.*\"ran_dense\": true" "--step 0")
  expect_npy("${WORK_DIR}/o2.npy" "<f4" "(2, 2, 256, 64)" 262144)

elseif(CASE STREQUAL "run_warmup_note")
  # A forward in warm-up runs dense: the report says so, why, and how to get a sparse one.
  psa_expect(0 run ${small_run} --step 0)
  expect_match("${OUT}" "\n  note +ran dense: step 0 < warmup_steps 15 \\(warm-up; pass --step 15 or later for a sparse forward\\)\n"
               "warm-up note")
  psa_expect(0 run ${small_run} --step 14 --json)
  expect_match("${OUT}" "\"step\": 14, .*\"ran_dense\": true, \"dense_reason\": \"warmup\", \"dense_note\": \"ran dense: step 14 < warmup_steps 15 "
               "warm-up --json")
  psa_expect(0 run --model Wan2.1_1.3b --preset baseline --grid 2,8,16)
  expect_match("${OUT}" "\n  note +ran dense: the preset's method is dense" "dense preset note")

elseif(CASE STREQUAL "run_default_no_note")
  # The default step is warmup_steps: the forward is sparse and no note is printed.
  psa_expect(0 run ${small_run})
  if(OUT MATCHES "note|ran dense")
    message(FATAL_ERROR "default run printed a dense note:\n${OUT}")
  endif()
  expect_match("${OUT}" "levels +1: [0-9.]+%" "level fractions of a sparse forward")
  psa_expect(0 run ${small_run} --step 15 --json)
  expect_match("${OUT}" "\"ran_dense\": false, \"dense_reason\": null," "--step 15 --json")

elseif(CASE STREQUAL "run_bad_preset")
  psa_expect(1 run --model Wan2.1_1.3b --preset no_such_preset --grid 2,8,16)
  expect_match("${ERR}" "^psa: error: .*no_such_preset.*\\(PSA_ERR_NOT_FOUND\\)\n$" "bad preset")
  psa_expect(1 run --model NoSuchModel --grid 2,8,16)
  expect_match("${ERR}" "^psa: error: .*NoSuchModel.*\\(PSA_ERR_NOT_FOUND\\)" "bad model")
  # A shape the library refuses (GQA: 3 key/value heads do not divide 2 query heads).
  psa_expect(1 run --model Wan2.1_1.3b --grid 2,8,16 --heads 2 --kv-heads 3)
  expect_match("${ERR}" "^psa: error: .*\\(PSA_ERR_[A-Z_]+\\)" "bad kv heads")

elseif(CASE STREQUAL "npy_roundtrip")
  # Inputs written by --save-inputs and read back through --q/--k/--v must give the same
  # output bit for bit, in each dtype and layout.
  foreach(variant "bf16;bnsd" "f16;bsnd" "f32;bnsd")
    list(GET variant 0 dtype)
    list(GET variant 1 layout)
    set(common ${small_run} --dtype ${dtype} --layout ${layout})
    psa_expect(0 run ${common} --seed 7 --save-inputs in_${dtype}_ --out a_${dtype}.npy)
    psa_expect(0 run --model Wan2.1_1.3b --preset psa_topk --grid 2,8,16 --dtype ${dtype}
               --layout ${layout} --q in_${dtype}_q.npy --k in_${dtype}_k.npy
               --v in_${dtype}_v.npy --out b_${dtype}.npy)
    expect_match("${OUT}" "inputs +in_${dtype}_q.npy, in_${dtype}_k.npy" "file inputs")
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files a_${dtype}.npy b_${dtype}.npy
                    WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE same)
    if(NOT same EQUAL 0)
      message(FATAL_ERROR "${dtype}/${layout}: output from the saved inputs differs")
    endif()
  endforeach()
  expect_npy("${WORK_DIR}/in_bf16_q.npy" "<u2" "(1, 2, 256, 64)" 65536)
  expect_npy("${WORK_DIR}/in_f16_k.npy" "<f2" "(1, 256, 2, 64)" 65536)
  expect_npy("${WORK_DIR}/in_f32_v.npy" "<f4" "(1, 2, 256, 64)" 131072)
  # f16 files run as f32 when --dtype f32 is asked for (exact widening).
  psa_expect(0 run --model Wan2.1_1.3b --preset psa_topk --grid 2,8,16 --dtype f32
             --layout bsnd --q in_f16_q.npy --k in_f16_k.npy --v in_f16_v.npy)

elseif(CASE STREQUAL "npy_bad_file")
  file(WRITE "${WORK_DIR}/not.npy" "hello\n")
  set(args --model Wan2.1_1.3b --preset psa_topk --grid 2,8,16)
  psa_expect(1 run ${args} --q not.npy --k not.npy --v not.npy)
  expect_match("${ERR}" "^psa: error: not\\.npy: not a \\.npy file" "bad magic")
  psa_expect(0 run ${small_run} --dtype bf16 --save-inputs raw_)
  psa_expect(1 run ${args} --q raw_q.npy --k raw_k.npy --v raw_v.npy)
  expect_match("${ERR}" "raw_q\\.npy: dtype '<u2' is raw 16-bit data; pass --dtype bf16" "<u2")
  psa_expect(2 run ${args} --q raw_q.npy)
  expect_match("${ERR}" "--q, --k and --v go together" "--q alone")

elseif(CASE STREQUAL "help_exit_zero")
  # Every help exits 0 (issue 18: `psa version --help` exited 2).
  foreach(args "help" "--help" "version;--help" "run;--help" "demo;--help" "presets;--help"
               "check-config;--help" "bench;--help" "help;run" "help;version" "help;bench")
    psa_expect(0 ${args})
    expect_match("${OUT}" "[Uu]sage" "psa ${args}")
  endforeach()
  psa_expect(2 version --frobnicate)

elseif(CASE STREQUAL "json_outputs")
  psa_expect(0 version --json)
  expect_match("${OUT}" "^{\"library\": \"[0-9.]+\", \"header\": .*\"cuda\": \"" "version --json")
  psa_expect(0 presets --json)
  expect_match("${OUT}" "^{\"source\": \"embedded\", \"models\": \\[{\"name\": \"Wan2.1_14b\", \"default_preset\": \"psa_balanced\"" "presets --json")
  expect_match("${OUT}" "\"name\": \"psa_balanced\", \"default\": true, \"type\": \"psa\", \"mask_mode\": \"thresholdbound\"" "presets --json preset")
  psa_expect(0 check-config --json "${SOURCE_DIR}/configs/attention_config.yaml")
  expect_match("${OUT}" "^{\"ok\": true, \"file\": \".*attention_config.yaml\", \"models\": 8, \"presets\": [0-9]+}" "check-config --json")
  psa_expect(1 check-config --json missing.yaml)
  expect_match("${OUT}" "^{\"ok\": false, \"file\": \"missing.yaml\", \"status\": \"PSA_ERR_IO\", \"message\": \"path = missing.yaml: cannot open" "check-config --json failure")
  # step_pinned agrees with the text ("pinned to warmup_steps"): the command always pins.
  psa_expect(0 run ${small_run} --json)
  expect_match("${OUT}" "\"step\": 15, \"step_pinned\": true, \"step_from\": \"warmup_steps\"" "step_pinned default")
  psa_expect(0 run ${small_run} --json --step 3)
  expect_match("${OUT}" "\"step\": 3, \"step_pinned\": true, \"step_from\": \"--step\"" "step_pinned --step")
  psa_expect(0 presets)
  expect_match("${OUT}" "\nlevels: 1 = full attention, 2/4/8 = keys pooled by 2/4/8, 0 = skip" "presets legend")

elseif(CASE STREQUAL "run_backend_line")
  # --backend defaults to auto; the report says which backend ran and why.
  psa_expect(0 run --help)
  expect_match("${OUT}" "--backend B +auto \\(CUDA when built in and a device is[ \n]+usable, else CPU\\), cpu or cuda \\(default: auto\\)" "--backend default")
  psa_expect(0 run ${small_run})
  expect_match("${OUT}" "\n  backend +(cpu: --backend auto: (this libpsa was built without CUDA|no usable CUDA device[^\n]*)|cuda: .* \\(--backend auto: the CUDA backend is built in and a device is usable\\))\n" "auto backend line")
  psa_expect(0 run ${small_run} --backend cpu --json)
  expect_match("${OUT}" "\"backend\": \"cpu\", \"backend_reason\": \"cpu: asked for with --backend cpu\"" "cpu backend reason")
  # f32 inputs with --backend auto run on the CPU (the CUDA kernels take f16 and bf16); where
  # auto picks CUDA for bf16 inputs, the line says why f32 did not.
  psa_expect(0 run ${small_run} --dtype bf16)
  set(bf16_line "${OUT}")
  psa_expect(0 run ${small_run} --dtype f32)
  if(bf16_line MATCHES "\n  backend +cuda: ")
    expect_match("${OUT}" "\n  backend +cpu: --backend auto: the inputs are f32 and the CUDA kernels take f16 and bf16 \\(--dtype bf16 or f16 runs on the GPU\\)\n" "f32 on a GPU machine")
  else()
    expect_match("${OUT}" "\n  backend +cpu: --backend auto: " "f32 without a GPU")
  endif()
  # Not a terminal: no progress on stderr.
  if(NOT ERR STREQUAL "")
    message(FATAL_ERROR "psa run wrote to stderr with stderr not a terminal:\n${ERR}")
  endif()

elseif(CASE STREQUAL "run_labels_and_verdict")
  psa_expect(0 run ${small_run})
  expect_match("${OUT}" "\n  preset +type psa, mask mode topk, mask format segments, blocks 128x32 \\(tile 32\\), level ends 1:0.05 2:0.1 4:0.15 8:0.25 skip:1, rearrange gilbert, warm-up 15 steps\n" "labelled preset")
  expect_match("${OUT}" "\n +\\(level 1 = full attention; 2/4/8 = keys pooled by 2/4/8; skip = block pair not computed\\)\n" "levels explained")
  string(REGEX MATCHALL "keys pooled" pooled "${OUT}")
  list(LENGTH pooled n_pooled)
  if(NOT n_pooled EQUAL 1)
    message(FATAL_ERROR "levels explained ${n_pooled} times:\n${OUT}")
  endif()
  expect_match("${OUT}" "\n  verdict +(close to dense|fair|POOR)" "verdict line")
  psa_expect(0 demo)
  expect_match("${OUT}" "\n  verdict +close to dense attention: relative L2 [0-9.e+-]+ <= 0.05\n" "demo verdict")
  psa_expect(0 run ${small_run} --json)
  expect_match("${OUT}" "\"quality\": {\"grade\": \"(close|fair|poor)\", \"line\": " "--json quality")

elseif(CASE STREQUAL "run_max_error")
  # psa_topk on this grid is far from dense (relative L2 ~0.17): --max-error makes it an exit status.
  psa_expect(3 run ${small_run} --max-error 0.01)
  expect_match("${OUT}" "\n  verdict +.*; exceeds \\(--max-error 0.01\\), exit status 3\n" "max-error exceeded")
  psa_expect(0 run ${small_run} --max-error 10)
  expect_match("${OUT}" "; within \\(--max-error 10\\)" "max-error met")
  psa_expect(2 run ${small_run} --max-error -1)
  # The 8-bit rule on the CPU backend: its error against dense stays that of the mask (0.119
  # with the default precision, 0.119 with fp8 when this test was written).
  psa_expect(0 run ${small_run} --backend cpu --precision fp8 --max-error 0.13)
  expect_match("${OUT}" "; within \\(--max-error 0.13\\)" "fp8 run")
  expect_match("${OUT}" "\n  precision +fp8 \\(8-bit attention\\)\n" "fp8 run: the precision that ran")
  psa_expect(0 run ${small_run} --backend cpu --precision fp8 --json)
  expect_match("${OUT}" "\"precision\": \"fp8\"" "fp8 run --json")

elseif(CASE STREQUAL "bad_option_value")
  # A value that does not convert names its option and the value, in every spelling.
  psa_expect(2 run --model Wan2.1_1.3b --grid 2,4,4 --heads 99999999999999999999)
  expect_match("${ERR}" "psa: --heads: '99999999999999999999' is not a valid value" "--heads overflow")
  psa_expect(2 run --model Wan2.1_1.3b --grid 2,4,4 --preset a --head-dim=x1)
  expect_match("${ERR}" "psa: --head-dim: 'x1' is not a valid value" "--head-dim=x1")
  psa_expect(2 bench --max-reps 2.5)
  expect_match("${ERR}" "psa: --max-reps: '2.5' is not a valid value" "bench --max-reps 2.5")

elseif(CASE STREQUAL "run_too_large")
  # Synthetic inputs larger than the machine's memory: an error before anything is
  # allocated (on a machine that overcommits, the allocation would succeed and the process
  # would be killed while it fills it). 10^8 tokens x 12 heads x 64 = 1.2 TB of f32.
  psa_expect(1 run --model Wan2.1_1.3b --grid 100,1000,1000 --heads 12)
  expect_match("${ERR}" "psa: error: synthetic inputs of 100000000 tokens x 12 heads .* need [0-9.e+]+ GB of host memory; this machine has" "too large for the host")
  psa_expect(1 run --model Wan2.1_1.3b --grid 2,16,16 --heads 4000000000000)
  expect_match("${ERR}" "need [0-9.e+]+ GB of host memory" "too many heads for the host")
elseif(CASE STREQUAL "run_nonfinite")
  # An f16 .npy whose bytes are all printable: 0x3c41 ("A<", about 1.06) everywhere, and q with
  # NaN (0x7e41, "A~") in every value (all-NaN output) or in one value.
  set(header "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2, 256, 64), }")
  string(LENGTH "${header}" hl)
  math(EXPR pad "64 - (10 + ${hl} + 1) % 64")
  string(REPEAT " " ${pad} spaces)
  string(REPEAT "A<" 32768 ones)
  string(REPEAT "A~" 32768 nans)
  string(REPEAT "A<" 32767 ones_but_one)
  # The .npy magic and version bytes (\x93NUMPY\x01\x00) and the header length are not
  # printable; they are copied from a file the command writes itself.
  psa_expect(0 run ${small_run} --dtype f16 --save-inputs ref_)
  file(READ "${WORK_DIR}/ref_q.npy" prefix LIMIT 10 HEX)
  file(READ "${WORK_DIR}/ref_q.npy" ref_header OFFSET 10 LIMIT 118)
  if(NOT ref_header MATCHES "^\\{'descr': '<f2', 'fortran_order': False, 'shape': \\(1, 2, 256, 64\\), \\} +\n$")
    message(FATAL_ERROR "unexpected .npy header: ${ref_header}")
  endif()
  # Rebuild each file as: the first 128 bytes of ref_q.npy (magic + header) + data.
  foreach(kind ones nans ones_but_one)
    if(kind STREQUAL "ones_but_one")
      set(data "A~${ones_but_one}")
    else()
      set(data "${${kind}}")
    endif()
    file(READ "${WORK_DIR}/ref_q.npy" head LIMIT 128)
    # The magic holds bytes CMake strings keep (\x93, \x01, NUL in the version?) -- check.
    string(LENGTH "${head}" head_len)
    if(NOT head_len EQUAL 128)
      message(FATAL_ERROR "cannot carry the .npy magic through CMake strings (${head_len} bytes)")
    endif()
    file(WRITE "${WORK_DIR}/${kind}.npy" "${head}${data}")
  endforeach()
  set(files_run --model Wan2.1_1.3b --preset psa_topk --grid 2,8,16 --dtype f16 --k ones.npy --v ones.npy)
  psa_expect(3 run ${files_run} --q nans.npy)
  expect_match("${OUT}" "\n  error +not defined: non-finite values \\(below\\), never a match\n" "all-NaN error line")
  expect_match("${OUT}" "\n  nonfinite +sparse out 32768 of 32768 \\(first at \\[b, h, l, d\\] = \\[0, 0, 0, 0\\]\\), dense out 32768 of 32768 .*, q 32768 of 32768" "all-NaN counts")
  expect_match("${OUT}" "\n  verdict +FAILED: " "all-NaN verdict")
  if(OUT MATCHES "relative L2 0")
    message(FATAL_ERROR "an all-NaN output was reported as a match:\n${OUT}")
  endif()
  psa_expect(3 run ${files_run} --q ones_but_one.npy --json)
  expect_match("${OUT}" "\"rel_l2\": null, \"cosine\": null, \"max_abs\": null, \"nonfinite\": {\"q\": {\"count\": 1, \"first\": \\[0, 0, 0, 0\\]}" "one NaN in q --json")
  expect_match("${OUT}" "\"quality\": {\"grade\": \"non-finite\"" "one NaN grade")

elseif(CASE STREQUAL "bench_without_gpu")
  # Without a usable CUDA device: one line on stderr, exit 2 (a GPU machine runs the real one).
  execute_process(COMMAND "${PSA}" version RESULT_VARIABLE rc OUTPUT_VARIABLE v)
  if(v MATCHES "cuda available")
    message(STATUS "a CUDA device is usable here: bench_without_gpu checks only --help")
    psa_expect(0 bench --help)
  else()
    psa_expect(2 bench --shapes wan13 --json)
    expect_match("${ERR}" "^psa bench: needs a CUDA device: [^\n]+\n$" "one line")
    if(NOT OUT STREQUAL "")
      message(FATAL_ERROR "bench without a GPU printed on stdout:\n${OUT}")
    endif()
  endif()
  psa_expect(2 bench --shapes nope)
  expect_match("${ERR}" "unknown shape 'nope'" "bad --shapes")

else()
  message(FATAL_ERROR "cli_test.cmake: unknown CASE '${CASE}'")
endif()
