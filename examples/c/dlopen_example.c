/* examples/c/dlopen_example.c -- libpsa loaded at run time with dlopen/dlsym: no link-time
 * dependency (psa.h is used for its types only). Loads a preset, runs a sparse forward on a
 * small video-like input on the CPU backend, and compares it with a dense forward (a second
 * context with PSA_PARAM_METHOD = PSA_METHOD_DENSE).
 * From the repository root, against the build in build/ (examples/README.md):
 *   cc -std=c11 -Iinclude examples/c/dlopen_example.c -ldl -lm -o build/examples/dlopen_example && build/examples/dlopen_example build/libpsa.so.0
 * The argument is the library to load (default: libpsa.so.0 on the loader's path). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "psa.h"
#include "video_input.h"

/* The functions this program uses, resolved by name. */
typedef struct {
  unsigned (*version_number)(void);
  const char* (*version_string)(void);
  const char* (*last_error_message)(void);
  const char* (*status_name)(psa_status);
  psa_status (*config_load_embedded)(const char*, const char*, psa_config**);
  psa_status (*config_set_int)(psa_config*, psa_param, int64_t);
  psa_status (*config_get_int)(const psa_config*, psa_param, int64_t*);
  void (*config_destroy)(psa_config*);
  psa_status (*context_create)(const psa_config*, psa_backend, int32_t, psa_context**);
  void (*context_destroy)(psa_context*);
  psa_status (*context_set_video_grid)(psa_context*, int64_t, int64_t, int64_t, int64_t,
                                       psa_text_position);
  psa_status (*context_set_step)(psa_context*, int64_t);
  psa_status (*tensor_desc_init)(psa_tensor_desc*, psa_layout, psa_dtype, int64_t, int64_t,
                                 int64_t, int64_t);
  psa_status (*workspace_size)(psa_context*, const psa_tensor_desc*, const psa_tensor_desc*,
                               const psa_tensor_desc*, const psa_tensor_desc*, uint64_t*);
  psa_status (*attention_forward)(psa_context*, const psa_tensor_desc*, const void*,
                                  const psa_tensor_desc*, const void*, const psa_tensor_desc*,
                                  const void*, const psa_tensor_desc*, void*, float*, void*,
                                  uint64_t, void*);
  psa_status (*context_get_stats)(psa_context*, psa_stats*);
} psa_api;

static psa_api api;

/* ISO C leaves void* -> function pointer undefined; POSIX requires it for dlsym results
 * and its dlsym example assigns through a void** as done here. */
#define LOAD(field, name)                                                  \
  do {                                                                     \
    void* sym = dlsym(lib, name);                                          \
    if (!sym) {                                                            \
      fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());                 \
      return 0;                                                            \
    }                                                                      \
    *(void**)(&api.field) = sym;                                           \
  } while (0)

static int load_api(void* lib) {
  LOAD(version_number, "psa_version_number");
  LOAD(version_string, "psa_version_string");
  LOAD(last_error_message, "psa_last_error_message");
  LOAD(status_name, "psa_status_name");
  LOAD(config_load_embedded, "psa_config_load_embedded");
  LOAD(config_set_int, "psa_config_set_int");
  LOAD(config_get_int, "psa_config_get_int");
  LOAD(config_destroy, "psa_config_destroy");
  LOAD(context_create, "psa_context_create");
  LOAD(context_destroy, "psa_context_destroy");
  LOAD(context_set_video_grid, "psa_context_set_video_grid");
  LOAD(context_set_step, "psa_context_set_step");
  LOAD(tensor_desc_init, "psa_tensor_desc_init");
  LOAD(workspace_size, "psa_workspace_size");
  LOAD(attention_forward, "psa_attention_forward");
  LOAD(context_get_stats, "psa_context_get_stats");
  return 1;
}

/* Prints the failing call and the library's message; returns 0 on failure. */
static int ok(psa_status status, const char* call) {
  if (status == PSA_OK) return 1;
  fprintf(stderr, "%s failed: %s: %s\n", call, api.status_name(status), api.last_error_message());
  return 0;
}

enum { HEADS = 2, T = 4, H = 16, W = 16, DIM = 64, LEN = T * H * W };

/* One forward of `cfg` on q, k, v into out; fills stats. */
static int run(const psa_config* cfg, int64_t step, const float* q, const float* k,
               const float* v, float* out, psa_stats* stats) {
  psa_context* ctx = NULL;
  psa_tensor_desc desc;
  uint64_t bytes = 0;
  void* workspace = NULL;
  int good = ok(api.context_create(cfg, PSA_BACKEND_CPU, -1, &ctx), "psa_context_create") &&
             ok(api.context_set_video_grid(ctx, T, H, W, 0, PSA_TEXT_NONE), "set_video_grid") &&
             ok(api.context_set_step(ctx, step), "psa_context_set_step") &&
             ok(api.tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, HEADS, LEN, DIM),
                "psa_tensor_desc_init") &&
             ok(api.workspace_size(ctx, &desc, &desc, &desc, &desc, &bytes), "psa_workspace_size");
  if (good && bytes) {
    workspace = malloc(bytes);
    good = workspace != NULL;
  }
  good = good &&
         ok(api.attention_forward(ctx, &desc, q, &desc, k, &desc, v, &desc, out, NULL,
                                  workspace, bytes, NULL),
            "psa_attention_forward") &&
         ok(api.context_get_stats(ctx, stats), "psa_context_get_stats");
  free(workspace);
  api.context_destroy(ctx);
  return good;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "libpsa.so.0";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    return 1;
  }
  if (!load_api(lib)) return 1;
  if (api.version_number() / 10000 != PSA_VERSION_MAJOR) {
    fprintf(stderr, "libpsa %s does not match psa.h %s (major version)\n", api.version_string(),
            PSA_VERSION_STRING);
    return 1;
  }
  printf("libpsa %s loaded with dlopen from %s\n", api.version_string(), path);

  const size_t n = (size_t)HEADS * LEN * DIM;
  float* buf = malloc(5 * n * sizeof(float));
  if (!buf) return 1;
  float *q = buf, *k = buf + n, *v = buf + 2 * n, *sparse = buf + 3 * n, *dense = buf + 4 * n;
  example_video_qkv(HEADS, T, H, W, DIM, q, k, v);

  psa_config* cfg = NULL;
  psa_stats sparse_stats = {0}, dense_stats = {0};
  sparse_stats.struct_size = dense_stats.struct_size = sizeof(psa_stats);
  int64_t warmup = 0;
  int good = ok(api.config_load_embedded("Wan2.1_1.3b", "psa_balanced", &cfg),
                "psa_config_load_embedded") &&
             ok(api.config_get_int(cfg, PSA_PARAM_WARMUP_STEPS, &warmup), "psa_config_get_int") &&
             /* the first step after warm-up: a sparse forward */
             run(cfg, warmup, q, k, v, sparse, &sparse_stats) &&
             ok(api.config_set_int(cfg, PSA_PARAM_METHOD, PSA_METHOD_DENSE), "psa_config_set_int") &&
             run(cfg, warmup, q, k, v, dense, &dense_stats);
  if (good) {
    const double err = example_rel_l2(sparse, dense, (int64_t)n);
    printf("Wan2.1_1.3b/psa_balanced on [1, %d, %d, %d] (grid %dx%dx%d), CPU backend\n", HEADS,
           LEN, DIM, T, H, W);
    printf("density %.4f (levels 1:%.3f 2:%.3f 4:%.3f 8:%.3f skip:%.3f)\n", sparse_stats.density,
           sparse_stats.level_fraction[PSA_STAT_LEVEL_1], sparse_stats.level_fraction[PSA_STAT_LEVEL_2],
           sparse_stats.level_fraction[PSA_STAT_LEVEL_4], sparse_stats.level_fraction[PSA_STAT_LEVEL_8],
           sparse_stats.level_fraction[PSA_STAT_LEVEL_SKIP]);
    printf("rel-L2 vs dense %.4e; time sparse %.1f ms, dense %.1f ms\n", err,
           sparse_stats.stage_ms[PSA_STAGE_TOTAL], dense_stats.stage_ms[PSA_STAGE_TOTAL]);
    good = sparse_stats.density > 0.0 && sparse_stats.density < 1.0 && dense_stats.ran_dense &&
           err < 0.5;
  }
  api.config_destroy(cfg);
  free(buf);
  dlclose(lib);
  return good ? 0 : 1;
}
