/* examples/c/linked_example.c -- libpsa linked the usual way. Build and run from the
 * repository root against the build in build/ (examples/README.md; the rpath lets the
 * loader find libpsa.so.0 without LD_LIBRARY_PATH):
 *   cc -std=c11 -Iinclude examples/c/linked_example.c -Lbuild -lpsa -lm -Wl,-rpath,"$PWD/build" -o build/examples/linked_example && build/examples/linked_example
 * The packaging test builds it with nothing but pkg-config on an install prefix:
 *   cc examples/c/linked_example.c $(pkg-config --cflags --libs psa) -lm -o linked_example
 * Loads a preset, runs a sparse forward on a small video-like input on the CPU backend and
 * compares it with a dense forward (PSA_PARAM_METHOD = PSA_METHOD_DENSE). */
#include <stdio.h>
#include <stdlib.h>

#include "psa.h"
#include "video_input.h"

#define CHECK(call)                                                                    \
  do {                                                                                 \
    psa_status status_ = (call);                                                       \
    if (status_ != PSA_OK) {                                                           \
      fprintf(stderr, "%s failed: %s: %s\n", #call, psa_status_name(status_),          \
              psa_last_error_message());                                               \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

enum { HEADS = 2, T = 4, H = 16, W = 16, DIM = 64, LEN = T * H * W };

static void run(const psa_config* cfg, int64_t step, const float* q, const float* k,
                const float* v, float* out, psa_stats* stats) {
  psa_context* ctx = NULL;
  psa_tensor_desc desc;
  uint64_t bytes = 0;
  CHECK(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx));
  CHECK(psa_context_set_video_grid(ctx, T, H, W, 0, PSA_TEXT_NONE));
  CHECK(psa_context_set_step(ctx, step));
  CHECK(psa_tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, HEADS, LEN, DIM));
  CHECK(psa_workspace_size(ctx, &desc, &desc, &desc, &desc, &bytes));
  void* workspace = bytes ? malloc(bytes) : NULL;
  CHECK(psa_attention_forward(ctx, &desc, q, &desc, k, &desc, v, &desc, out, NULL, workspace,
                              bytes, NULL));
  CHECK(psa_context_get_stats(ctx, stats));
  free(workspace);
  psa_context_destroy(ctx);
}

int main(void) {
  const size_t n = (size_t)HEADS * LEN * DIM;
  float* buf = malloc(5 * n * sizeof(float));
  if (!buf) return 1;
  float *q = buf, *k = buf + n, *v = buf + 2 * n, *sparse = buf + 3 * n, *dense = buf + 4 * n;
  example_video_qkv(HEADS, T, H, W, DIM, q, k, v);

  psa_config* cfg = NULL;
  psa_stats sparse_stats = {0}, dense_stats = {0};
  sparse_stats.struct_size = dense_stats.struct_size = sizeof(psa_stats);
  int64_t warmup = 0;
  CHECK(psa_config_load_embedded("Wan2.1_1.3b", "psa_balanced", &cfg));
  CHECK(psa_config_get_int(cfg, PSA_PARAM_WARMUP_STEPS, &warmup));
  run(cfg, warmup, q, k, v, sparse, &sparse_stats);  /* first step after warm-up: sparse */
  CHECK(psa_config_set_int(cfg, PSA_PARAM_METHOD, PSA_METHOD_DENSE));
  run(cfg, warmup, q, k, v, dense, &dense_stats);
  psa_config_destroy(cfg);

  const double err = example_rel_l2(sparse, dense, (int64_t)n);
  printf("libpsa %s (header %s), linked with -lpsa\n", psa_version_string(),
         PSA_VERSION_STRING);
  printf("density %.4f, rel-L2 vs dense %.4e\n", sparse_stats.density, err);
  free(buf);
  return sparse_stats.density > 0.0 && sparse_stats.density < 1.0 && err < 0.5 ? 0 : 1;
}
