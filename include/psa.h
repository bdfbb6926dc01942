/*
 * psa.h -- libpsa: Pyramid Sparse Attention for video diffusion transformers.
 * The one public header: plain C11 (and C++), no CUDA or YAML types, stable ABI.
 *
 * =====================================================================================
 * Introduction
 * =====================================================================================
 * PSA computes attention O = softmax(s * Q K^T) V block by block. For every pair
 * (query block i, key block j) it picks a level from estimated importance:
 *   level 1  the key block at full resolution,
 *   level 2/4/8  the key block's K and V mean-pooled by 2/4/8 (a pooled key carries a
 *           +ln(p) logit bias, so it counts as the p keys it replaces),
 *   level 0  the block is skipped.
 *
 * One forward runs this pipeline (every stage on the CPU backend and on CUDA):
 *
 *   config --> context --> rearrange --> pool --> importance --> mask --> sparse attention
 *   (YAML       (backend,    (Gilbert     (K/V      (sampled        (topk /    (online softmax
 *    preset)     plan,        curve,       2x 4x    max-logit       threshold   over mixed
 *                workspace)   text last)   8x)      per block)      quotas)     levels) --> inverse rearrange
 *
 * Happy path (five calls; error handling omitted):
 *
 *   psa_config*  cfg;  psa_config_load_embedded("Wan2.1_1.3b", "psa_balanced", &cfg);
 *   psa_context* ctx;  psa_context_create(cfg, PSA_BACKEND_AUTO, -1, &ctx);
 *   psa_context_set_video_grid(ctx, 21, 30, 52, 0, PSA_TEXT_NONE);
 *   uint64_t bytes;    psa_workspace_size(ctx, &q, &k, &v, &o, &bytes);   -- allocate bytes
 *   psa_attention_forward(ctx, &q, qp, &k, kp, &v, vp, &o, op, NULL, ws, bytes, stream);
 *   psa_context_destroy(ctx); psa_config_destroy(cfg);
 *
 * Conventions used throughout
 *   - Every function returns psa_status (PSA_OK = 0) unless stated. On failure it records a
 *     thread-local message naming the argument and the value; read it with
 *     psa_last_error_message(). A failing call leaves every output buffer unchanged.
 *   - Tensors are described by shape + strides in elements (psa_tensor_desc): the logical
 *     order is always [B, H, L, D]; BNSD, BSND and BSH are stride patterns. K/V may have
 *     fewer heads than Q (GQA/MQA): query head h reads K/V head h / (Hq / Hkv).
 *   - `stream` is a cudaStream_t passed as void* (NULL = legacy default stream). CUDA calls
 *     enqueue and return; the CPU backend ignores the stream and runs synchronously.
 *   - No function aborts, exits or lets an exception escape.
 *
 * Thread safety: psa_config and psa_context objects may be used by one thread at a time.
 * Distinct objects may be used concurrently from different threads. Read-only functions
 * on a config (get, clone) may run concurrently with each other. The error message is
 * per thread.
 */
#ifndef PSA_H
#define PSA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* =====================================================================================
 * Visibility
 * ===================================================================================== */
#if defined(_WIN32)
#  if defined(PSA_BUILDING_LIBRARY)
#    define PSA_API __declspec(dllexport)
#  else
#    define PSA_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define PSA_API __attribute__((visibility("default")))
#else
#  define PSA_API
#endif

/* =====================================================================================
 * Version. The only place the version is written; CMake, psa.pc and every binding
 * derive it from these three lines.
 * ===================================================================================== */
#define PSA_VERSION_MAJOR 0
#define PSA_VERSION_MINOR 1
#define PSA_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, comparable as an integer (zstd convention). */
#define PSA_VERSION_NUMBER (PSA_VERSION_MAJOR * 10000 + PSA_VERSION_MINOR * 100 + PSA_VERSION_PATCH)
#define PSA_VERSION_STR_(x) #x
#define PSA_VERSION_STR(x) PSA_VERSION_STR_(x)
#define PSA_VERSION_STRING                                                               \
  PSA_VERSION_STR(PSA_VERSION_MAJOR) "." PSA_VERSION_STR(PSA_VERSION_MINOR) "."           \
  PSA_VERSION_STR(PSA_VERSION_PATCH)

/* Version of the loaded library (compare with PSA_VERSION_NUMBER to detect a mismatch
 * between the header a program was built with and the .so it runs with). */
PSA_API unsigned psa_version_number(void);
/* "MAJOR.MINOR.PATCH" of the loaded library; static storage, never NULL. */
PSA_API const char* psa_version_string(void);

/* =====================================================================================
 * Status codes. Values are pinned and never renumbered; new codes are appended.
 * PSA_STATUS_TABLE(X) is the single table: X(name, value, description).
 * ===================================================================================== */
#define PSA_STATUS_TABLE(X)                                                               \
  X(PSA_OK, 0, "success")                                                                 \
  X(PSA_ERR_NULL_POINTER, 1, "a required pointer argument is NULL")                       \
  X(PSA_ERR_INVALID_ARGUMENT, 2, "an argument has an invalid value")                      \
  X(PSA_ERR_INVALID_SHAPE, 3, "a tensor shape is invalid or inconsistent")                \
  X(PSA_ERR_INVALID_STRIDE, 4, "a tensor stride is invalid")                              \
  X(PSA_ERR_INVALID_DTYPE, 5, "a data type is invalid or inconsistent")                   \
  X(PSA_ERR_UNSUPPORTED, 6, "the combination is valid but not supported")                 \
  X(PSA_ERR_INVALID_CONFIG, 7, "a configuration value is invalid")                        \
  X(PSA_ERR_YAML_PARSE, 8, "the YAML text could not be parsed")                           \
  X(PSA_ERR_NOT_FOUND, 9, "the named model, preset, parameter or file does not exist")    \
  X(PSA_ERR_IO, 10, "a file could not be read or written")                                \
  X(PSA_ERR_WORKSPACE_TOO_SMALL, 11, "the workspace is smaller than required")            \
  X(PSA_ERR_INVALID_STATE, 12, "the object is not in a state that allows this call")      \
  X(PSA_ERR_BACKEND_UNAVAILABLE, 13, "the requested backend is not built in")             \
  X(PSA_ERR_NO_DEVICE, 14, "no usable CUDA device")                                       \
  X(PSA_ERR_MISALIGNED_POINTER, 15, "a pointer is not aligned as required")               \
  X(PSA_ERR_WRONG_MEMORY_SPACE, 16, "a pointer is in host memory where device memory is " \
                                    "required, or the reverse")                           \
  X(PSA_ERR_CUDA, 17, "a CUDA runtime call or kernel launch failed")                      \
  X(PSA_ERR_OUT_OF_MEMORY, 18, "a host or device allocation failed")                      \
  X(PSA_ERR_BUFFER_TOO_SMALL, 19, "a caller-provided buffer is too small")                \
  X(PSA_ERR_INTERNAL, 20, "internal error (a bug in libpsa)")

#define PSA_STATUS_ENUM_ENTRY_(name, value, text) name = value,
typedef enum psa_status { PSA_STATUS_TABLE(PSA_STATUS_ENUM_ENTRY_) PSA_STATUS_FORCE_32BIT_ = 0x7fffffff } psa_status;
#undef PSA_STATUS_ENUM_ENTRY_

/* Short static description of a status ("the workspace is smaller than required").
 * Unknown values give "unknown status". Never NULL. */
PSA_API const char* psa_status_string(psa_status status);
/* Name of a status ("PSA_ERR_INVALID_SHAPE"). Unknown values give "PSA_STATUS_UNKNOWN". */
PSA_API const char* psa_status_name(psa_status status);
/* Message of the last failing call on this thread, e.g.
 * "k: shape[3] (head_dim) = 96; expected the same as q (64)". Empty string when the last
 * call on this thread succeeded. Valid until the next libpsa call on this thread. Always
 * valid UTF-8: a byte of an echoed value (a YAML key, a path) that is not becomes U+FFFD. */
PSA_API const char* psa_last_error_message(void);
/* Status of the last libpsa call on this thread (PSA_OK after a success). */
PSA_API psa_status psa_last_error_status(void);

/* =====================================================================================
 * Basic types
 * ===================================================================================== */
typedef enum psa_dtype {
  PSA_DTYPE_F32 = 0,
  PSA_DTYPE_F16 = 1,
  PSA_DTYPE_BF16 = 2
} psa_dtype;

/* Memory layouts that psa_tensor_desc_init() turns into strides. */
typedef enum psa_layout {
  PSA_LAYOUT_BNSD = 0, /* [B, H, L, D] contiguous ("head-major")              */
  PSA_LAYOUT_BSND = 1, /* [B, L, H, D] contiguous ("sequence-major")          */
  PSA_LAYOUT_BSH = 2   /* [B, L, H*D]: the same strides as BSND               */
} psa_layout;

/* Describes one attention tensor. Logical dimension order is always
 * [B (batch), H (heads), L (sequence), D (head dim)]; strides are in elements and may be
 * anything non-negative with strides[3] == 1 (the head dim must be contiguous).
 * struct_size must be sizeof(psa_tensor_desc): it is checked on entry, so fields can be
 * appended in later versions without breaking old callers. */
typedef struct psa_tensor_desc {
  uint32_t struct_size;
  psa_dtype dtype;
  int64_t shape[4];
  int64_t strides[4];
} psa_tensor_desc;

/* Fills `desc` for a tensor of logical shape [B, H, L, D] stored in `layout`.
 * [out] desc; [in] layout, dtype, batch, heads, seq_len, head_dim (each >= 1).
 * Returns PSA_ERR_INVALID_ARGUMENT / PSA_ERR_INVALID_SHAPE on bad values. */
PSA_API psa_status psa_tensor_desc_init(psa_tensor_desc* desc, psa_layout layout, psa_dtype dtype,
                                        int64_t batch, int64_t heads, int64_t seq_len,
                                        int64_t head_dim);

/* Size in bytes of one element of `dtype` (0 for an unknown value). */
PSA_API int32_t psa_dtype_size(psa_dtype dtype);

/* =====================================================================================
 * Configuration. An opaque, validated set of parameters (one "preset"). Parameters are
 * read and written through psa_param ids; values are int64 or double. Set calls check
 * the parameter's bounds; cross-parameter rules (ratio ends non-decreasing, mask format
 * vs block size, ...) are checked by psa_config_validate() and by psa_context_create().
 * ===================================================================================== */
typedef struct psa_config_s psa_config;

/* Sparse attention method (YAML preset key `type`). */
typedef enum psa_method {
  PSA_METHOD_PSA = 0,     /* Pyramid Sparse Attention                                 */
  PSA_METHOD_DENSE = 1,   /* plain attention (YAML type: dense)                       */
  PSA_METHOD_RF_V2 = 2,   /* RainFusion2.0 block-sparse                               */
  PSA_METHOD_ADA_BSA = 3, /* adaptive block-sparse attention (strided CDF estimate)   */
  PSA_METHOD_PSA_CAUSAL = 4 /* causal PSA for vision-language prefill (YAML type:
                             * psa_causal): antidiagonal block importance, topk or
                             * energybound levels, forced text/diagonal/column 0,
                             * similarity cap, causal pyramid attention. Needs causal = 1,
                             * block_size.m == block_size.n and len_q == len_k. */
} psa_method;

/* How mask quotas are read (YAML `mask_mode`). */
typedef enum psa_mask_mode {
  PSA_MASK_MODE_TOPK = 0,           /* ratio ends are fractions of the key blocks      */
  PSA_MASK_MODE_THRESHOLDBOUND = 1, /* ratio ends bound the cumulative importance mass */
  PSA_MASK_MODE_ENERGYBOUND = 2     /* psa_causal only: level p takes the ranks whose
                                     * cumulative mass lies in (previous end, end]       */
} psa_mask_mode;

/* Mask format (YAML `attn_impl`). Both compute the same attention; they differ in which
 * options they allow (the similarity cap needs LEVELS) and in the exported mask. */
typedef enum psa_mask_format {
  PSA_MASK_FORMAT_SEGMENTS = 0, /* "new_mask_type": per row, ordered block lists per level */
  PSA_MASK_FORMAT_LEVELS = 1    /* "old_mask_type": a level per (query block, key block)   */
} psa_mask_format;

/* Token rearrangement applied before the mask and undone on the output. */
typedef enum psa_rearrange {
  PSA_REARRANGE_GILBERT = 0,        /* 3-D generalised Hilbert curve (every shipped preset)  */
  PSA_REARRANGE_STA = 1,            /* tile-major (sta tile t,h,w)                           */
  PSA_REARRANGE_SEMANTIC_AWARE = 2, /* k-means clustering: returns PSA_ERR_UNSUPPORTED      */
  PSA_REARRANGE_HYBRID = 3          /* Gilbert q + k-means k/v: returns PSA_ERR_UNSUPPORTED */
} psa_rearrange;

/* Where text tokens sit in the sequence the caller passes. */
typedef enum psa_text_position {
  PSA_TEXT_NONE = 0,  /* no text tokens                                        */
  PSA_TEXT_FIRST = 1, /* [text, video]  (CogVideoX)                            */
  PSA_TEXT_LAST = 2   /* [video, text]                                         */
} psa_text_position;

/* How text tokens enter the PSA mask. */
typedef enum psa_text_rule {
  PSA_TEXT_RULE_SPAN = 0,            /* every key block that holds a text token is level 1 */
  PSA_TEXT_RULE_REFERENCE_SUFFIX = 1 /* reference behaviour: the last ceil(T/bn) key
                                        blocks are level 1 (LEVELS format only)            */
} psa_text_rule;

/* Arithmetic of the sparse attention stage (PSA_PARAM_PRECISION). FP8 is attention/attention_fp8.h's
 * rule: Q and K as int8 (K minus its mean over the first token of each key block), P and V as
 * e4m3, one scale per query block and per (level, key block), fp32 accumulation; about half the
 * bytes and, on Hopper tensor cores, twice the multiply rate of 16-bit. PSA's importance stage
 * then scores blocks on the same int8 K and an int8 Q (importance/importance_spec.h), so the
 * level map is the 8-bit rule's own. Dense steps (method dense, warm-up steps) and the ring API
 * keep the default. */
typedef enum psa_precision {
  PSA_PRECISION_DEFAULT = 0, /* the input's 16-bit type on the GPU, fp32 on the CPU            */
  PSA_PRECISION_FP8 = 1      /* 8-bit operands as above. The CPU backend evaluates the rule
                                exactly (the oracle of the GPU kernels), for every sparse
                                method. The CUDA backend runs its 8-bit Hopper kernels for
                                type psa, non-causal, head_dim 128, block_size.m 128, sample
                                counts that are powers of two, on a GPU of compute
                                capability 9.x; elsewhere (sm_80, head_dim 64,
                                causal, rf_v2 / ada_bsa / psa_causal) it runs the default.
                                psa_stats.precision says which one ran                       */
} psa_precision;

/* Parameter ids. Pinned values; new ids are appended. The YAML key that sets each one is
 * given in brackets ("-" = API only). */
typedef enum psa_param {
  PSA_PARAM_METHOD = 0,              /* psa_method          [type]                           */
  PSA_PARAM_BLOCK_M = 1,             /* query block size    [block_size.m]   {64, 128}       */
  PSA_PARAM_BLOCK_N = 2,             /* key block size      [block_size.n]   {32, 64, 128}   */
  PSA_PARAM_TILE_N = 3,              /* KV tile size        [block_size.tile_n] 16..block_n  */
  PSA_PARAM_MASK_MODE = 4,           /* psa_mask_mode       [mask_mode]                      */
  PSA_PARAM_MASK_FORMAT = 5,         /* psa_mask_format     [attn_impl]                      */
  PSA_PARAM_RATIO_L1 = 6,            /* end of level 1's interval, [0,1] [mask_ratios.1]     */
  PSA_PARAM_RATIO_L2 = 7,            /* end of level 2's interval        [mask_ratios.2]     */
  PSA_PARAM_RATIO_L4 = 8,            /* end of level 4's interval        [mask_ratios.4]     */
  PSA_PARAM_RATIO_L8 = 9,            /* end of level 8's interval        [mask_ratios.8]     */
  PSA_PARAM_RATIO_L0 = 10,           /* end of the skip interval         [mask_ratios.0]     */
  PSA_PARAM_MIN_FULL_RATIO = 11,     /* thresholdbound level-1 floor, [0,1] (0.06)   [-]     */
  PSA_PARAM_USE_SIM_MASK = 12,       /* 0/1 similarity cap (LEVELS only) [use_sim_mask]      */
  PSA_PARAM_SIM_THRESHOLD_X2 = 13,   /* [-1,1]                           [sim_thresholds.x2] */
  PSA_PARAM_SIM_THRESHOLD_X4 = 14,   /* [-1,1]                           [sim_thresholds.x4] */
  PSA_PARAM_SIM_THRESHOLD_X8 = 15,   /* [-1,1]                           [sim_thresholds.x8] */
  PSA_PARAM_USE_REARRANGE = 16,      /* 0/1                              [use_rearrange]     */
  PSA_PARAM_REARRANGE_METHOD = 17,   /* psa_rearrange                    [rearrange_method]  */
  PSA_PARAM_STA_TILE_T = 18,         /* >= 1                             [tile_size[0]]      */
  PSA_PARAM_STA_TILE_H = 19,         /* >= 1                             [tile_size[1]]      */
  PSA_PARAM_STA_TILE_W = 20,         /* >= 1                             [tile_size[2]]      */
  PSA_PARAM_WARMUP_STEPS = 21,       /* dense steps at the start, >= 0   [warmup_steps]      */
  PSA_PARAM_CALLS_PER_STEP = 22,     /* forwards per denoising step, >= 1 (1)  [-]           */
  PSA_PARAM_INFERENCE_STEPS = 23,    /* steps per generation (step index wraps), 0 = no wrap */
  PSA_PARAM_TEXT_LENGTH = 24,        /* model's text tokens, >= 0        [text_length]       */
  PSA_PARAM_WIDTH_DIVISOR = 25,      /* pixels per latent column, >= 1  [video_scale...]     */
  PSA_PARAM_HEIGHT_DIVISOR = 26,     /* pixels per latent row, >= 1                          */
  PSA_PARAM_DEPTH_DIVISOR = 27,      /* frames per latent frame, >= 1                        */
  PSA_PARAM_SAMPLE_DIVISOR = 28,     /* importance samples = block / this, {1,2,4,8,16} (4)  */
  PSA_PARAM_SEED = 29,               /* sampling seed, >= 0 (0)                  [-]         */
  PSA_PARAM_CAUSAL = 30,             /* 0/1 causal attention (bottom-right aligned) [-]      */
  PSA_PARAM_SCALE = 31,              /* softmax scale, [0, FLT_MAX]; 0 = 1/sqrt(head_dim) [-] */
  PSA_PARAM_TEXT_RULE = 32,          /* psa_text_rule (SPAN)                     [-]         */
  PSA_PARAM_TEXT_ROWS_DENSE = 33,    /* 0/1 query blocks holding text attend at level 1 [-]  */
  PSA_PARAM_SPARSITY = 34,           /* rf_v2 / ada_bsa sparsity, [0,1)          [sparsity]  */
  PSA_PARAM_CDF_THRESHOLD = 35,      /* ada_bsa mass to keep, (0,1]       [cdf_threshold]    */
  PSA_PARAM_KEEP_SINK = 36,          /* ada_bsa 0/1                       [keep_sink]        */
  PSA_PARAM_KEEP_RECENT = 37,        /* ada_bsa 0/1                       [keep_recent]      */
  /* Shards (sequence / CFG parallelism): index, in the whole tensor, of the first query head
   * and of the first batch item that a forward's q holds. The importance sampler is seeded
   * per (seed, batch item, query head) with these global indices, so a forward on heads
   * [h0, h0 + H) with head_offset = h0 (or on batch items [b0, ...) with batch_offset = b0)
   * gives exactly the rows of the whole-tensor forward. Nothing else depends on them. */
  PSA_PARAM_HEAD_OFFSET = 38,        /* first query head, >= 0 (0)               [-]         */
  PSA_PARAM_BATCH_OFFSET = 39,       /* first batch item, >= 0 (0)               [-]         */
  /* psa_causal: antidiagonal importance stride (divides block_size.m) and query chunk
   * (a multiple of block_size.m; memory only, the scores do not depend on it). */
  PSA_PARAM_XATTN_STRIDE = 40,       /* 1..128, divides block_size.m (8)  [xattn_stride]     */
  PSA_PARAM_XATTN_CHUNK_SIZE = 41,   /* >= 64 (4096)                  [xattn_chunk_size]     */
  PSA_PARAM_PRECISION = 42,          /* psa_precision (DEFAULT)              [precision]     */
  PSA_PARAM_COUNT_ = 43              /* number of ids; not a parameter                      */
} psa_param;

typedef enum psa_param_type {
  PSA_PARAM_TYPE_INT = 0,   /* read/write with the _int calls (enums and booleans too) */
  PSA_PARAM_TYPE_DOUBLE = 1 /* read/write with the _double calls                        */
} psa_param_type;

/* Creates a config holding the library defaults (PSA, topk, block 128x64, tile 32, ratios
 * 1:.1 2:.15 4:.15 8:.35 0:1, no rearrangement, no warm-up).
 * [out] out: the new config; release with psa_config_destroy. */
PSA_API psa_status psa_config_create(psa_config** out);
/* Deep copy. [in] src; [out] out (release with psa_config_destroy). */
PSA_API psa_status psa_config_clone(const psa_config* src, psa_config** out);
/* Releases a config. Destroying NULL is a no-op. Contexts created from it stay valid. */
PSA_API void psa_config_destroy(psa_config* config);

/* Loads preset `preset` of model `model` from a YAML file in the reference format
 * (configs/attention_config.yaml). [in,opt] preset: NULL selects the model's
 * `default_attention`. [out] out. Errors: PSA_ERR_IO (unreadable file; not a regular file,
 * such as a FIFO or a device; larger than 64 MiB), PSA_ERR_YAML_PARSE
 * (with line and column), PSA_ERR_NOT_FOUND (unknown model or preset; the message lists
 * the ones that exist), PSA_ERR_INVALID_CONFIG (with the key path, the bad value and the
 * allowed values). */
PSA_API psa_status psa_config_load_file(const char* path, const char* model, const char* preset,
                                        psa_config** out);
/* As psa_config_load_file, from YAML text in memory (NUL-terminated, at most 64 MiB:
 * PSA_ERR_INVALID_ARGUMENT past it). */
PSA_API psa_status psa_config_load_string(const char* yaml, const char* model,
                                          const char* preset, psa_config** out);
/* As psa_config_load_file, from the copy of configs/attention_config.yaml built into the
 * library (no file needed). */
PSA_API psa_status psa_config_load_embedded(const char* model, const char* preset,
                                            psa_config** out);
/* The embedded attention_config.yaml text; static storage. */
PSA_API const char* psa_embedded_config_yaml(void);

/* Checks every cross-parameter rule. PSA_OK or PSA_ERR_INVALID_CONFIG with a message. */
PSA_API psa_status psa_config_validate(const psa_config* config);

PSA_API psa_status psa_config_set_int(psa_config* config, psa_param param, int64_t value);
PSA_API psa_status psa_config_set_double(psa_config* config, psa_param param, double value);
PSA_API psa_status psa_config_get_int(const psa_config* config, psa_param param, int64_t* value);
PSA_API psa_status psa_config_get_double(const psa_config* config, psa_param param,
                                         double* value);

/* Describes a parameter: [out,opt] name (static string, the YAML-style key, e.g.
 * "block_size.n"), type, lower and upper bounds (inclusive, as double). */
PSA_API psa_status psa_param_info(psa_param param, const char** name, psa_param_type* type,
                                  double* lower, double* upper);
/* Looks a parameter up by the name psa_param_info reports. PSA_ERR_NOT_FOUND if unknown. */
PSA_API psa_status psa_param_from_name(const char* name, psa_param* param);
/* The words of an enum parameter (its YAML spelling, e.g. "fp8" for PSA_PARAM_PRECISION = 1):
 * the word of `value`, or NULL when `param` has no words (not an enum) or `value` is none of its
 * values. Static storage. Bindings and tools take their word lists from here. */
PSA_API const char* psa_param_value_name(psa_param param, int64_t value);
/* The value of word `name` for an enum parameter, compared without ASCII case ("gilbert" is
 * "Gilbert"). [out] value. Errors: PSA_ERR_NULL_POINTER, PSA_ERR_INVALID_ARGUMENT (`param` is
 * not an enum parameter), PSA_ERR_NOT_FOUND (unknown word; the message lists the words). */
PSA_API psa_status psa_param_value_from_name(psa_param param, const char* name, int64_t* value);

/* =====================================================================================
 * Catalog: the models and presets of a YAML file, for listing.
 * ===================================================================================== */
typedef struct psa_catalog_s psa_catalog;

/* Opens a catalog from a file path, or the embedded YAML when `path` is NULL.
 * Every preset is parsed and validated here, so a catalog that opens loads. */
PSA_API psa_status psa_catalog_open(const char* path, psa_catalog** out);
PSA_API psa_status psa_catalog_open_string(const char* yaml, psa_catalog** out);
PSA_API void psa_catalog_destroy(psa_catalog* catalog);
PSA_API int32_t psa_catalog_model_count(const psa_catalog* catalog);
/* Name of model `index` (0-based, file order); NULL if out of range. Owned by the catalog. */
PSA_API const char* psa_catalog_model_name(const psa_catalog* catalog, int32_t index);
/* Number of presets of `model`; -1 if the model does not exist. */
PSA_API int32_t psa_catalog_preset_count(const psa_catalog* catalog, const char* model);
PSA_API const char* psa_catalog_preset_name(const psa_catalog* catalog, const char* model,
                                            int32_t index);
/* The model's `default_attention` preset name. NULL if the model does not exist or has no
 * `default_attention`; psa_last_error_status() is then PSA_ERR_NOT_FOUND and the message
 * says which (for a model without a default, it lists the presets to name instead). */
PSA_API const char* psa_catalog_default_preset(const psa_catalog* catalog, const char* model);
/* Copy of a preset as a config (release with psa_config_destroy). */
PSA_API psa_status psa_catalog_get_config(const psa_catalog* catalog, const char* model,
                                          const char* preset, psa_config** out);

/* =====================================================================================
 * Context: a config bound to a backend, plus cached shape-dependent plans
 * (permutations, block counts, workspace layout) and the warm-up step counter.
 * ===================================================================================== */
typedef struct psa_context_s psa_context;

typedef enum psa_backend {
  PSA_BACKEND_AUTO = 0, /* CUDA when built in and a device exists, else CPU */
  PSA_BACKEND_CPU = 1,  /* plain reference backend, host pointers          */
  PSA_BACKEND_CUDA = 2  /* device pointers, stream-ordered                 */
} psa_backend;

/* Creates a context. The config is validated and copied: later changes to `config` do
 * not affect the context. [in] device: CUDA ordinal, or -1 for the current device
 * (ignored by the CPU backend). [out] out: release with psa_context_destroy.
 * Errors: PSA_ERR_INVALID_CONFIG, PSA_ERR_BACKEND_UNAVAILABLE (CUDA not built in),
 * PSA_ERR_NO_DEVICE, PSA_ERR_UNSUPPORTED (device architecture). */
PSA_API psa_status psa_context_create(const psa_config* config, psa_backend backend,
                                      int32_t device, psa_context** out);
/* Releases the context and every plan it holds. Destroying NULL is a no-op. Using a
 * context after destroy is undefined behaviour (as for free()). The CUDA backend waits
 * for nothing: the caller must ensure no forward using it is still pending. */
PSA_API void psa_context_destroy(psa_context* context);
/* Backend actually chosen (never PSA_BACKEND_AUTO for a valid context; NULL gives
 * PSA_BACKEND_AUTO and records PSA_ERR_NULL_POINTER as the last error). */
PSA_API psa_backend psa_context_backend(const psa_context* context);
/* A copy of the context's config. [out] out: release with psa_config_destroy. */
PSA_API psa_status psa_context_get_config(const psa_context* context, psa_config** out);

/* Sets the video token grid of the sequences that follow: t latent frames, h rows,
 * w columns, text_length text tokens at `text_position`. A sequence must then hold
 * exactly t*h*w + text_length tokens. Required when the config rearranges tokens. */
PSA_API psa_status psa_context_set_video_grid(psa_context* context, int64_t t, int64_t h,
                                              int64_t w, int64_t text_length,
                                              psa_text_position text_position);
/* As psa_context_set_video_grid, from pixel sizes and the model's video_scale divisors:
 * t = ceil(frames / depth_divisor), h = ceil(height / height_divisor),
 * w = ceil(width / width_divisor). text_length < 0 takes the config's text_length. */
PSA_API psa_status psa_context_set_video_pixels(psa_context* context, int64_t frames,
                                                int64_t height, int64_t width,
                                                int64_t text_length,
                                                psa_text_position text_position);
/* Forgets the video grid (no rearrangement, no text handling). */
PSA_API psa_status psa_context_clear_video_grid(psa_context* context);

/* Warm-up control. A forward runs dense (every block pair at level 1, as the reference
 * does in the first denoising steps) when the method is dense or when its step is below
 * warmup_steps. By default the context counts its forwards and derives the step:
 * step = (calls / calls_per_step) % inference_steps (no wrap when inference_steps = 0),
 * calls = forwards made since creation or psa_context_reset_calls. The shipped presets set
 * calls_per_step to the model's attention calls per denoising step (e.g. Wan2.1_1.3b: 60,
 * inference_steps 50, warmup_steps 15), so a fresh context with a shipped preset runs its
 * first calls_per_step * warmup_steps forwards dense (900 for Wan2.1_1.3b): right for one
 * context serving every layer of a pipeline, but a test or benchmark making a few calls
 * sees only dense forwards. psa_context_set_step(ctx, s) pins the step to s >= 0 (any
 * s >= warmup_steps runs sparse); s = -1 returns to counting. psa_context_reset_calls
 * zeroes the call counter. To see it: psa_context_next_step before a forward,
 * psa_stats.ran_dense (psa_context_get_stats) after it. */
PSA_API psa_status psa_context_set_step(psa_context* context, int64_t step);
PSA_API psa_status psa_context_reset_calls(psa_context* context);
/* Step that the next forward will use (the pinned step, else the counted one), and
 * whether it will run dense (method dense, or step < warmup_steps: warm-up). */
PSA_API psa_status psa_context_next_step(const psa_context* context, int64_t* step,
                                         int32_t* dense);

/* =====================================================================================
 * Queries: ask before running (CUTLASS can_implement / get_workspace_size)
 * ===================================================================================== */

/* PSA_OK when a forward with these descriptors is supported, else the status and message
 * a forward would fail with. [in,opt] out may be NULL (then q's shape and dtype). */
PSA_API psa_status psa_check_supported(psa_context* context, const psa_tensor_desc* q,
                                       const psa_tensor_desc* k, const psa_tensor_desc* v,
                                       const psa_tensor_desc* out);
/* Workspace bytes a forward with these descriptors needs (in the backend's memory:
 * host for CPU, device for CUDA). Also plans the shape, so that the forward does no
 * host-side planning. [out] bytes. */
PSA_API psa_status psa_workspace_size(psa_context* context, const psa_tensor_desc* q,
                                      const psa_tensor_desc* k, const psa_tensor_desc* v,
                                      const psa_tensor_desc* out, uint64_t* bytes);

/* =====================================================================================
 * Forward
 * ===================================================================================== */

/* out = sparse attention of (q, k, v) under the context's config.
 * [in] q, k, v: descriptors and data (device pointers for CUDA, host for CPU).
 *      Shapes [B, Hq, Lq, D], [B, Hkv, Lk, D], [B, Hkv, Lk, D]; Hq % Hkv == 0; one dtype.
 * [out] out: [B, Hq, Lq, D], dtype of q; must not overlap q, k or v.
 * [out,opt] lse: fp32 [B, Hq, Lq] contiguous, natural-log sum of exp of the scaled logits
 *      (FlashAttention convention; -inf for a row that attends to nothing). NULL to skip.
 * Alignment: q, k, v and out must be aligned to their element size and lse to 4 bytes
 *      (PSA_ERR_MISALIGNED_POINTER otherwise); the CUDA backend needs 16 bytes for q, k, v, out.
 * [in] workspace, workspace_bytes: at least psa_workspace_size() bytes in the backend's
 *      memory; may be NULL when that size is 0. Need not be zeroed. Its first
 *      psa_workspace_size() bytes must not overlap q, k, v, out or lse
 *      (PSA_ERR_INVALID_ARGUMENT naming the two buffers).
 * [in,opt] stream: cudaStream_t for CUDA; ignored by the CPU backend.
 * CUDA: enqueues on `stream` and returns; no allocation, no synchronisation, capturable
 * in a CUDA graph once the shape was planned by psa_workspace_size. Inputs must stay
 * valid until the stream reaches this point. Advances the warm-up call counter.
 * Warm-up: while the step (pinned, or counted as (calls / calls_per_step) %
 * inference_steps, see psa_context_set_step) is below warmup_steps, the forward runs dense
 * and still returns PSA_OK; with a shipped preset a fresh context runs its first
 * calls_per_step * warmup_steps forwards dense. psa_stats.ran_dense tells afterwards.
 * Values: the data is not scanned. As in any fp32 softmax (cuDNN, FlashAttention), a NaN or
 * inf in a query row or in a key it attends to, or a scaled logit q.k * scale above the fp32
 * range, can make that output row NaN; a NaN or inf in v reaches the rows that attend to its
 * key. Under causal masking the CUDA backend's tensor cores multiply the masked weights (zeros)
 * by v as well: there such a value also reaches the rows that do not see its key in a query
 * block (block_size.m rows) that attends to the key's tile (its 128 keys for a dense forward,
 * its key block for a sparse one). */
PSA_API psa_status psa_attention_forward(psa_context* context, const psa_tensor_desc* q_desc,
                                         const void* q, const psa_tensor_desc* k_desc,
                                         const void* k, const psa_tensor_desc* v_desc,
                                         const void* v, const psa_tensor_desc* out_desc,
                                         void* out, float* lse, void* workspace,
                                         uint64_t workspace_bytes, void* stream);

/* =====================================================================================
 * Vendor-style entry point: one call shaped like the MindIE-SD `sparse_attention`
 * function, for porting code that uses rf_v2 / ada_bsa. Built on the context API
 * (config -> context -> workspace -> forward). On the CPU backend every call builds and
 * destroys its context; on CUDA the contexts are cached per argument set, so only the
 * first call of a set plans it.
 * ===================================================================================== */

/* out = block-sparse self-attention of (q, k, v) with `method`, as the vendor call would
 * compute it, with the canonical fixes of the rainfusion-adabsa spec (one mask per batch
 * item, no failure at sparsity edges or for a single unaligned image, key tails kept).
 * [in] q, k, v: [batch, heads, seq_len, head_dim] in `layout`, element type `dtype`, one
 *      shared shape (self-attention). Host pointers for the CPU backend, device pointers
 *      (f16 or bf16, head_dim 64 or 128, 16-byte aligned) for CUDA.
 * [out] out: same shape, layout and dtype; must not overlap q, k or v.
 * [in] dtype, batch, heads, seq_len, head_dim, layout: as psa_tensor_desc_init (each >= 1).
 * [in] method: PSA_METHOD_RF_V2, PSA_METHOD_ADA_BSA, or PSA_METHOD_DENSE (the vendor's
 *      sparse_type = None). PSA_METHOD_PSA gives PSA_ERR_UNSUPPORTED: use a preset
 *      (psa_config_load_embedded) with the context API.
 * [in] sparsity: fraction of key blocks to skip, [0, 1) (0 = dense mask). Per query block,
 *      rf_v2 keeps the ceil(nb * (1 - sparsity)) best-scored key blocks (nb = key blocks of
 *      128; ties kept) plus its forced first-frame and text blocks; ada_bsa caps rows of
 *      >= 10 blocks at max(1, floor(nb * (1 - sparsity))) blocks before its forced ones.
 * [in] txt_len: text tokens at the FRONT of the sequence, [0, seq_len]. Used by rf_v2
 *      (text blocks are kept dense); ada_bsa ignores it apart from the check below.
 * [in,opt] latent_shape_q: {t, h, w} of the video latent, t * h * w = seq_len - txt_len.
 *      Required for rf_v2 (t = 1 for an image); may be NULL for ada_bsa and dense (checked
 *      when given).
 * [in] keep_sink, keep_recent: ada_bsa, 0 or 1: leave key block 0 / the last candidate
 *      block out of the ranking and keep it. Key block 0 is kept either way, and so is the
 *      last key block when not causal; with causal = 1, keep_recent keeps the diagonal.
 * [in] cdf_threshold: ada_bsa mass fraction to keep, (0, 1]; 1 turns the CDF rule off.
 * [in] scale: softmax scale, >= 0; 0 means 1 / sqrt(head_dim).
 * [in] causal: 0 or 1; ada_bsa and dense only (rf_v2 with causal = 1 is
 *      PSA_ERR_UNSUPPORTED: its token reorder makes causality meaningless).
 * [in] backend: PSA_BACKEND_CPU (host pointers), PSA_BACKEND_CUDA (device pointers, all on
 *      one device: the device that holds q runs the call), or PSA_BACKEND_AUTO: CUDA when q
 *      is device (or managed) memory, else CPU. q, k, v and out must all be in the chosen
 *      backend's memory (managed memory counts for both): otherwise
 *      PSA_ERR_WRONG_MEMORY_SPACE naming the first argument that is not. PSA_BACKEND_CUDA
 *      gives PSA_ERR_BACKEND_UNAVAILABLE in a build without CUDA and PSA_ERR_NO_DEVICE when
 *      no device can be used.
 * [in,opt] stream: cudaStream_t for CUDA (NULL = legacy default stream); ignored by the CPU
 *      backend (synchronous: the result is in `out` when the call returns).
 * Returns PSA_OK, or the status and message of the failing step: a parameter out of range
 * gives PSA_ERR_INVALID_ARGUMENT naming it ("sparsity = 1: allowed [0, 1)"), a missing
 * latent_shape_q for rf_v2 PSA_ERR_NULL_POINTER, t*h*w + txt_len != seq_len
 * PSA_ERR_INVALID_SHAPE.
 * CPU backend: creates a config and a context, allocates the workspace with malloc (failure
 * is PSA_ERR_OUT_OF_MEMORY), runs one forward, frees and destroys everything before it
 * returns; nothing is retained and the caller's buffers are only borrowed. Concurrent calls
 * from different threads are allowed (no shared state).
 * CUDA backend:
 *  - Cache: a process-wide cache of contexts, one per key = (device, dtype, method,
 *    sparsity, txt_len, latent_shape_q, keep_sink, keep_recent, cdf_threshold, scale,
 *    causal, batch, heads, seq_len, head_dim, layout; doubles compared bit for bit). The
 *    first call of a key creates the context and plans the shape: cudaMalloc of a small
 *    counter buffer, (rf_v2) of its token permutation, seq_len * 8 bytes, uploaded with
 *    a synchronous cudaMemcpy, and (rf_v2, ada_bsa) of the kept level map, batch * heads *
 *    q_blocks * k_blocks bytes (none above 1 GiB), plus one event. Later calls with the
 *    same key re-plan nothing: no cudaMalloc, no host synchronisation, no device-to-host
 *    copy.
 *  - Bound and eviction: at most 16 idle keys are kept; a first call that goes beyond
 *    evicts the least recently used idle one. Evicting waits (cudaEventSynchronize) for the
 *    evicted context's last call to finish on its stream, then frees it. Entries in use
 *    by another thread, and entries whose call was captured into a CUDA graph (the graph
 *    keeps pointers into them), are never evicted, so the cache can hold more than 16
 *    while such entries exist. psa_sparse_attention_clear_cache() frees everything.
 *  - Workspace: stream-ordered, cudaMallocAsync + cudaFreeAsync on `stream` from the
 *    current memory pool of the device, freed right after the forward is enqueued (the
 *    pool reuses it in stream order). With the pool's default release threshold (0) the
 *    pool may return memory to the driver at synchronisations; set
 *    cudaMemPoolAttrReleaseThreshold on that pool to keep it reserved between calls.
 *    Failure is PSA_ERR_OUT_OF_MEMORY (PSA_ERR_CUDA where pools are unsupported).
 *  - Stream ordering: every kernel and the workspace allocation are enqueued on `stream`
 *    and the call returns; q, k, v must stay valid and out unread until the stream
 *    reaches this point. Calls on different streams do not wait for each other.
 *  - CUDA graphs: once a key was planned by a call outside capture, a call with that key
 *    may be captured (cudaStreamBeginCapture ... EndCapture); the workspace becomes a
 *    graph allocation and free. The first call of a key inside a capture returns
 *    PSA_ERR_INVALID_STATE without enqueueing anything. A captured entry stays cached until
 *    psa_sparse_attention_clear_cache(); destroy such graphs (or never launch them again)
 *    before clearing.
 *  - Threads: concurrent calls are allowed. Calls with one key share one context and are
 *    serialised while they enqueue (a per-entry lock held for microseconds, not until the
 *    kernels finish); calls with different keys do not wait for each other, except that a
 *    first call may wait for an evicted context's last kernels.
 *  - Eviction and psa_sparse_attention_clear_cache free device memory (cudaFree), which
 *    CUDA does not allow while another thread captures a stream in
 *    cudaStreamCaptureModeGlobal: a first call of a new key there should use
 *    cudaStreamCaptureModeThreadLocal or Relaxed for its captures. */
PSA_API psa_status psa_sparse_attention(const void* q, const void* k, const void* v, void* out,
                                        psa_dtype dtype, int64_t batch, int64_t heads,
                                        int64_t seq_len, int64_t head_dim, psa_layout layout,
                                        psa_method method, double sparsity, int64_t txt_len,
                                        const int64_t* latent_shape_q, int32_t keep_sink,
                                        int32_t keep_recent, double cdf_threshold, double scale,
                                        int32_t causal, psa_backend backend, void* stream);

/* Frees every context cached by psa_sparse_attention on the CUDA backend (see above):
 * for each, waits for its last uncaptured call to finish (cudaEventSynchronize), then
 * releases its device memory. A context in use by a call on another thread right now is
 * freed when that call returns. Use it to give the memory back, and before
 * cudaDeviceReset() (after which cached contexts would point at freed memory; calling
 * psa_sparse_attention again after a reset without clearing is undefined behaviour).
 * CUDA graphs that captured a psa_sparse_attention call must be destroyed, or at least
 * finished and never launched again, before this call. The next call of each key plans it
 * again. No effect on the CPU backend (it caches nothing) or in a build without CUDA.
 * Returns PSA_OK, or PSA_ERR_CUDA when waiting for a context's work failed (the memory is
 * released anyway). Safe to call from any thread at any time outside stream capture. */
PSA_API psa_status psa_sparse_attention_clear_cache(void);

/* =====================================================================================
 * Sequence parallelism: building blocks for engines that spread one attention over
 * several devices. Ulysses (heads split across ranks) needs PSA_PARAM_HEAD_OFFSET so that a
 * rank's heads draw the whole tensor's importance samples; CFG / batch parallelism needs
 * PSA_PARAM_BATCH_OFFSET. Ring attention (sequence shards) needs the token order the
 * context computes in (psa_context_sequence_order) and the merge of partial results
 * through their log-sum-exp (psa_merge_attention).
 * ===================================================================================== */

/* The order in which the context computes a sequence of `seq_len` tokens under its video
 * grid and config: order[i] = index, in the caller's sequence, of the token at position i
 * (the Gilbert curve or STA tile order of the video tokens, text moved as the
 * rearrangement moves it; the identity when the config rearranges nothing or no grid is
 * set). Sequence-parallel engines permute q, k, v once by `order` at the model entry
 * (x_r[i] = x[order[i]]), shard the permuted sequence, and run their contexts with
 * use_rearrange = 0 and the same grid with the text at text_begin; the output comes back in
 * the permuted order (out[order[i]] = out_r[i] restores the caller's order). A forward
 * computes the same numbers either way.
 * [in] seq_len: t*h*w + text_length of the grid set on the context (any value >= 1 when no
 *      grid is set: identity, no text).
 * [out,opt] order: seq_len int64 entries, a permutation of 0..seq_len-1; NULL to skip (the
 *      call then only checks seq_len and gives the text span: nothing in seq_len is
 *      allocated).
 * [out,opt] text_begin, text_end: the text span [text_begin, text_end) in that order
 *      (0, 0 without text). Host memory.
 * Errors: PSA_ERR_INVALID_SHAPE when seq_len does not match the grid (the message names
 * both) or, with `order`, exceeds 2^31 - 1 tokens (checked first, grid or not; nothing is
 * written), PSA_ERR_UNSUPPORTED for rearrangements that are not implemented,
 * PSA_ERR_OUT_OF_MEMORY when the order cannot be built in host memory. */
PSA_API psa_status psa_context_sequence_order(psa_context* context, int64_t seq_len,
                                              int64_t* order, int64_t* text_begin,
                                              int64_t* text_end);

/* Merges `count` partial attention results of the same queries over disjoint key sets
 * (ring attention: one part per key shard) with their fp32 log-sum-exps, FlashAttention
 * convention: lse = log(sum_i exp(lse_i)) and out = sum_i exp(lse_i - lse) * out_i, row by
 * row, computed in fp32 (parts whose lse is -inf contribute nothing; a row where every
 * part is -inf gives out = 0 and lse = -inf).
 * [in] desc: shape [B, H, L, D], strides and dtype (f32, f16 or bf16) of every part and of
 *      `out` (one descriptor for all; strides[3] == 1).
 * [in] outs: `count` pointers to the parts; lses: `count` pointers to fp32 [B, H, L]
 *      contiguous log-sum-exps (as psa_attention_forward writes them).
 * [out] out: the merged result (desc). May be one of outs (in place).
 * [out,opt] lse: fp32 [B, H, L] contiguous merged log-sum-exp; NULL to skip. May be one of
 *      lses (in place).
 * [in] count: 1..64.
 * [in] backend: PSA_BACKEND_CPU (host pointers), PSA_BACKEND_CUDA (device pointers on the
 *      current device), or PSA_BACKEND_AUTO (CUDA when out is device or managed memory).
 *      PSA_ERR_WRONG_MEMORY_SPACE when out is in the other memory space;
 *      PSA_ERR_BACKEND_UNAVAILABLE for CUDA in a build without it.
 * [in,opt] stream: cudaStream_t for CUDA (NULL = legacy default stream): one kernel
 *      enqueued on it, no allocation, no synchronisation, capturable in a CUDA graph. The
 *      CPU backend ignores it and runs synchronously.
 * Alignment: parts and out aligned to their element size, lses and lse to 4 bytes. */
PSA_API psa_status psa_merge_attention(int32_t count, const psa_tensor_desc* desc,
                                       const void* const* outs, const float* const* lses,
                                       void* out, float* lse, psa_backend backend,
                                       void* stream);

/* The PSA ring, half 1: the level map of the query blocks of `q` against every key block of
 * `k`, exactly as psa_attention_forward(q, k, ...) would build it (importance against all key
 * blocks, the same ranking, levels, text rules and similarity cap), written to `levels`
 * [B, Hq, Mq, Nk] int8 contiguous (Mq = ceil(Lq / block_size.m), Nk = ceil(Lk / block_size.n);
 * entries 0 = skip, 1, 2, 4, 8). A ring rank passes its query shard and the whole K of the
 * sequence; no V is needed. It counts as one forward of the context: it takes the step, its
 * warm-up (a dense step writes every level 1, which half 2 turns into dense attention) and
 * the statistics (psa_context_get_stats, psa_context_get_level_map).
 * Memory: the whole K is the one tensor besides the query shard (the importance stage reads
 * only block_size.n / sample_divisor sampled keys per block, but the similarity cap compares
 * every token of adjacent key blocks, so the map takes whole K and, unlike the all-gather
 * ring, never V: L * Hkv * D elements per rank instead of 2 * L * Hkv * D).
 * Inputs must be in the computing order: a context whose plan would rearrange tokens
 * (use_rearrange = 1 with a grid) gives PSA_ERR_INVALID_STATE; permute once with
 * psa_context_sequence_order and set use_rearrange = 0 with the same grid. With a grid, k
 * has the grid's length; q may be a shard of it (text_rows_dense then gives
 * PSA_ERR_UNSUPPORTED: dense text rows are positions of the whole sequence).
 * Supported: type psa, causal = 0 (causal = 1 and the other types give
 * PSA_ERR_UNSUPPORTED), both backends. CUDA: device pointers on the context's device (f16 or
 * bf16; q, k 16-byte aligned), enqueued on `stream` without allocation or synchronisation
 * (capturable in a CUDA graph); the statistics synchronise when read, as after a forward.
 * [in] q_desc, q; k_desc, k: as psa_attention_forward's q and k.
 * [out] levels: B * Hq * Mq * Nk bytes in q's memory space; must not overlap q, k or the
 *      workspace.
 * [in] workspace, workspace_bytes: at least psa_level_map_workspace_size() bytes.
 * [in,opt] stream: cudaStream_t for CUDA; the CPU backend runs synchronously. */
PSA_API psa_status psa_level_map_workspace_size(psa_context* context, const psa_tensor_desc* q,
                                                const psa_tensor_desc* k, uint64_t* bytes);
PSA_API psa_status psa_compute_level_map(psa_context* context, const psa_tensor_desc* q_desc,
                                         const void* q, const psa_tensor_desc* k_desc,
                                         const void* k, int8_t* levels, void* workspace,
                                         uint64_t workspace_bytes, void* stream);

/* The PSA ring, half 2: the attention stage of `q` against one K/V shard at the levels of a
 * map from psa_compute_level_map. The shard holds key blocks [key_block_begin,
 * key_block_begin + nk) of the map, nk = ceil(Lk_shard / block_size.n); its pyramids
 * (pooled by 2, 4, 8) are built from the shard's own K and V, so a shard must start at a
 * key block boundary and only the map's last shard may end in a partial block. Writes the
 * shard's partial output and its fp32 log-sum-exp; merging the partial results of all
 * shards with psa_merge_attention gives psa_attention_forward's output (the same blocks,
 * levels and softmax; fp32 rounding aside). A query row that sees no key of the shard gets
 * out = 0 and lse = -inf. No rearrangement happens here: q, k, v are in the computing order
 * (permute with psa_context_sequence_order). The context's grid, text rules and similarity
 * cap are not used (they are in the map); its block sizes, scale, type (psa) and causal
 * (must be 0) are checked as for half 1. Does not count as a forward. CUDA: device pointers
 * (q, k, v, out 16-byte aligned, lse 4), enqueued on `stream` as half 1.
 * [in] q_desc, q: [B, Hq, Lq, D], the queries the map was built for.
 * [in] k_desc, k; v_desc, v: [B, Hkv, Lk_shard, D], the shard.
 * [in] levels: [B, Hq, Mq, map_key_blocks] int8 contiguous (the map of half 1); each entry
 *      0 (skipped), 1, 2, 4 or 8. CPU: any other value read is PSA_ERR_INVALID_ARGUMENT,
 *      before anything is written. CUDA: the map stays on the device (no host read, no
 *      synchronisation), so it is not checked there: any other value skips its block.
 * [in] map_key_blocks: Nk of the map (its row stride); key_block_begin: the shard's first
 *      key block. PSA_ERR_INVALID_ARGUMENT when the shard's blocks leave the map.
 * [out] out: [B, Hq, Lq, D], dtype of q; lse: fp32 [B, Hq, Lq] contiguous (required).
 * [in] workspace, workspace_bytes: at least psa_shard_attention_workspace_size() bytes.
 * [in,opt] stream: cudaStream_t for CUDA; the CPU backend runs synchronously. */
PSA_API psa_status psa_shard_attention_workspace_size(psa_context* context,
                                                      const psa_tensor_desc* q,
                                                      const psa_tensor_desc* k,
                                                      const psa_tensor_desc* v,
                                                      const psa_tensor_desc* out,
                                                      uint64_t* bytes);
PSA_API psa_status psa_shard_attention(psa_context* context, const psa_tensor_desc* q_desc,
                                       const void* q, const psa_tensor_desc* k_desc,
                                       const void* k, const psa_tensor_desc* v_desc,
                                       const void* v, const int8_t* levels,
                                       int64_t map_key_blocks, int64_t key_block_begin,
                                       const psa_tensor_desc* out_desc, void* out, float* lse,
                                       void* workspace, uint64_t workspace_bytes, void* stream);

/* =====================================================================================
 * Diagnostics
 * ===================================================================================== */

/* Statistics of the last forward of a context. struct_size must be set by the caller to
 * sizeof(psa_stats). Level fractions are over all (batch, head, query block, key block)
 * pairs, indexed PSA_STAT_LEVEL_1, _2, _4, _8, _SKIP. Density counts a level-p block as 1/p
 * (1.0 for a dense forward). On CUDA this synchronises with the last forward's stream. */
enum { PSA_STAT_LEVEL_1 = 0, PSA_STAT_LEVEL_2 = 1, PSA_STAT_LEVEL_4 = 2, PSA_STAT_LEVEL_8 = 3,
       PSA_STAT_LEVEL_SKIP = 4 };
typedef struct psa_stats {
  uint32_t struct_size;
  int32_t ran_dense;        /* 1 if the forward ran dense (method dense or warm-up) */
  int64_t step;             /* step index the forward used                          */
  int64_t call_index;       /* value of the call counter for that forward           */
  double density;           /* computed fraction of the dense work                  */
  double level_fraction[5]; /* fraction of block pairs per level                    */
  int64_t query_blocks;     /* Mq of the forward                                    */
  int64_t key_blocks;       /* Nk of the forward                                    */
  double stage_ms[7];       /* time per stage, PSA_STAGE_* order: CPU host wall time;
                               CUDA event time when psa_context_set_stage_timing is on
                               (experimental API), else zeros                        */
  int32_t precision;        /* psa_precision the attention ran: PSA_PRECISION_FP8 only
                               when asked for and the backend runs it on this shape
                               (psa_precision); DEFAULT for dense forwards. Appended:
                               a struct_size of the earlier struct (without it) is
                               still accepted and filled up to stage_ms             */
} psa_stats;
enum { PSA_STAGE_REARRANGE = 0, PSA_STAGE_POOL = 1, PSA_STAGE_IMPORTANCE = 2, PSA_STAGE_MASK = 3,
       PSA_STAGE_ATTENTION = 4, PSA_STAGE_INVERSE = 5, PSA_STAGE_TOTAL = 6 };
PSA_API psa_status psa_context_get_stats(psa_context* context, psa_stats* stats);

/* Shape of the level map of the context's last forward: [batch, heads, q_blocks,
 * k_blocks] (heads = query heads; q_blocks = Mq = ceil(Lq / block_m), k_blocks = Nk =
 * ceil(Lk / block_n)). [out,opt] batch, heads, q_blocks, k_blocks (NULL to skip).
 * Errors: PSA_ERR_NULL_POINTER (context), PSA_ERR_INVALID_STATE (no forward has run).
 * Host-only: never waits for the device. */
PSA_API psa_status psa_context_level_map_shape(const psa_context* context, int64_t* batch,
                                               int64_t* heads, int64_t* q_blocks,
                                               int64_t* k_blocks);

/* The decision of the last forward: the level of every (batch b, query head h, query block
 * i, key block j), written row-major as levels[((b * heads + h) * q_blocks + i) * k_blocks
 * + j] with values 1, 2, 4, 8 (the key block at full resolution or pooled by 2/4/8) or 0
 * (skipped); psa_context_level_map_shape gives the dimensions. Blocks are blocks of the
 * rearranged sequences: psa_context_get_token_order says which tokens each one holds.
 * The map is the one the attention used, after the causal, text and similarity-cap rules;
 * for the methods rf_v2 and ada_bsa it holds 1 and 0 only. A forward that ran dense
 * (method dense or a warm-up step) reports 1 for every pair.
 * [out] levels: host memory, at least batch * heads * q_blocks * k_blocks bytes.
 * [in] capacity: bytes available at `levels`.
 * Errors: PSA_ERR_NULL_POINTER (context, levels), PSA_ERR_INVALID_STATE (no forward has
 * run), PSA_ERR_BUFFER_TOO_SMALL (the message gives the size needed), PSA_ERR_CUDA,
 * PSA_ERR_OUT_OF_MEMORY (the map is above 1 GiB, the most a plan keeps, or its memory could
 * not be allocated when the shape was planned; planning and forwards succeed regardless).
 * Memory: every planned shape of a sparse method keeps its last level map in memory the
 * context owns (batch * heads * q_blocks * k_blocks bytes, allocated when the shape is
 * planned, freed with the plan or the context; device memory on CUDA). The forward only
 * fills it (on CUDA a device-to-device copy on the forward's stream: no allocation, no
 * host synchronisation, capturable in a CUDA graph).
 * CUDA: a synchronising call: it waits for the last forward's stream
 * (cudaStreamSynchronize), then copies device to host. Call it outside stream capture.
 * Threads: like every context call, one thread at a time per context. */
PSA_API psa_status psa_context_get_level_map(psa_context* context, int8_t* levels,
                                             uint64_t capacity);

/* Which tokens each block of the last forward holds. Position x of the rearranged query
 * (sequence = 0) or key (sequence = 1) sequence holds the caller's token order[x]: query
 * block i holds positions [i * block_m, (i + 1) * block_m), key block j positions
 * [j * block_n, (j + 1) * block_n) (the last block may be shorter). With a video grid set
 * (psa_context_set_video_grid) a caller token s is text when it lies in the text span the
 * grid names (the first text_length tokens for PSA_TEXT_FIRST, the last ones for
 * PSA_TEXT_LAST); otherwise v = s - (text_length if PSA_TEXT_FIRST else 0) is the video
 * token at frame v / (h * w), row (v / w) % h, column v % w.
 * [in] sequence: 0 = queries, 1 = keys.
 * [out,opt] order: host int64 [length], or NULL to ask only for the scalars below.
 * [in] capacity: elements available at `order` (ignored when order is NULL).
 * [out,opt] length: tokens of the sequence (Lq or Lk).
 * [out,opt] text_begin, text_end: the text tokens' positions [text_begin, text_end) in the
 *      rearranged sequence (Gilbert puts them last; empty when there is no text).
 * The order is the one the last forward's shape plans for a sparse forward (identity when
 * the config does not rearrange or no grid is set); a dense forward does not rearrange,
 * and its level map holds 1 everywhere.
 * Errors: PSA_ERR_NULL_POINTER (context), PSA_ERR_INVALID_ARGUMENT (sequence),
 * PSA_ERR_INVALID_STATE (no forward has run), PSA_ERR_BUFFER_TOO_SMALL. Host-only. */
PSA_API psa_status psa_context_get_token_order(const psa_context* context, int32_t sequence,
                                               int64_t* order, int64_t capacity,
                                               int64_t* length, int64_t* text_begin,
                                               int64_t* text_end);

/* Pictures of a level map, as PNG files (RGB, 8 bits), drawn by libpsa itself. Colours:
 * level 1 (200, 30, 30), 2 (240, 140, 40), 4 (240, 220, 60), 8 (110, 170, 230), skip
 * (225, 225, 225), any other value (255, 0, 255); background white, text black. The
 * layout (margins, captions, legend) is for people and may change between versions;
 * the colours above do not.
 *  PSA_MASK_VIEW_BLOCKS: one panel per head, query blocks down, key blocks across, one
 *    cell per block pair (a cell of `cell` pixels; a map wider or taller than 1024
 *    blocks shows, per pixel, the most computed level of the blocks it covers), the head
 *    and its level fractions in a caption above each panel, panels in a grid, a legend
 *    and the fractions over all shown heads on top.
 *  PSA_MASK_VIEW_VIDEO: for one query block of one head, each key block's level painted
 *    on the video tokens it holds, one tile per latent frame (frames side by side, in
 *    rows), text tokens in a strip below; the query block's own tokens carry a black dot.
 *    Needs a video grid. */
typedef enum psa_mask_view {
  PSA_MASK_VIEW_BLOCKS = 0,
  PSA_MASK_VIEW_VIDEO = 1
} psa_mask_view;

/* Writes a picture of the context's last forward (psa_context_get_level_map and
 * psa_context_get_token_order) to the PNG file `path` (created, or replaced
 * whole: written to a temporary file in its directory and renamed, so a failed write
 * leaves no partial file; a device or FIFO is written in place).
 * [in] view: PSA_MASK_VIEW_BLOCKS or PSA_MASK_VIEW_VIDEO.
 * [in] batch: batch item, [0, batch).
 * [in] head: query head, [0, heads); -1 = every head (blocks view only).
 * [in] query_block: video view: the query block, [0, q_blocks), or -1 to take the block
 *      holding query_position.
 * [in,opt] query_position: video view, with query_block = -1: {t, h, w} of a video token;
 *      NULL = the grid's centre token (t/2, h/2, w/2). Ignored by the blocks view.
 * [in] cell: pixels per block (blocks view) or per token (video view), [1, 64];
 *      0 = automatic (panels and frames of at most about 256 pixels).
 * Errors: PSA_ERR_NULL_POINTER (context, path), PSA_ERR_INVALID_ARGUMENT (a value out of
 * range, named), PSA_ERR_INVALID_STATE (no forward yet; video view without a video grid
 * or with a query sequence that does not follow it), PSA_ERR_IO (the file cannot be
 * written), PSA_ERR_CUDA, PSA_ERR_OUT_OF_MEMORY.
 * CUDA: synchronises as psa_context_get_level_map. Threads: one thread per context. */
PSA_API psa_status psa_context_write_mask_png(psa_context* context, const char* path,
                                              psa_mask_view view, int64_t batch, int64_t head,
                                              int64_t query_block,
                                              const int64_t* query_position, int32_t cell);

/* Writes the blocks view (PSA_MASK_VIEW_BLOCKS, above) of any level map, e.g. one saved
 * from psa_context_get_level_map or made up, to the PNG file `path`.
 * [in] levels: host int8 [heads, q_blocks, k_blocks] (one batch item), row-major.
 * [in] heads, q_blocks, k_blocks: each >= 1, heads <= 2^20, q_blocks and k_blocks <= 2^24,
 *      and heads * q_blocks * k_blocks <= 2^30.
 * [in] head: the head to draw, or -1 for all of them.
 * [in] cell: as psa_context_write_mask_png.
 * Errors: PSA_ERR_NULL_POINTER, PSA_ERR_INVALID_ARGUMENT, PSA_ERR_IO,
 * PSA_ERR_OUT_OF_MEMORY. Needs no context; any thread. */
PSA_API psa_status psa_mask_write_png(const char* path, const int8_t* levels, int64_t heads,
                                      int64_t q_blocks, int64_t k_blocks, int64_t head,
                                      int32_t cell);

/* =====================================================================================
 * Experimental (fenced): may change between minor versions. Define PSA_EXPERIMENTAL_API
 * before including psa.h to see these declarations.
 * ===================================================================================== */
#if defined(PSA_EXPERIMENTAL_API)
/* Replaces the importance sampler with fixed in-block offsets, for cross-checking against
 * another implementation. [in] q_offsets: [batch, heads, q_count] int32 in [0, block_m);
 * [in] k_offsets: [batch, heads, k_count] in [0, block_n); host memory, copied. q_count and
 * k_count must equal block_m / sample_divisor and block_n / sample_divisor of the
 * context's config, and batch/heads those of the forwards that follow (else the forward
 * fails with PSA_ERR_INVALID_STATE). Pass q_offsets = k_offsets = NULL to restore the
 * seeded sampler. CPU backend only for now (CUDA forwards return PSA_ERR_UNSUPPORTED while
 * offsets are injected). */
PSA_API psa_status psa_context_set_sampling_offsets(psa_context* context, int64_t batch,
                                                    int64_t heads, int32_t q_count,
                                                    const int32_t* q_offsets, int32_t k_count,
                                                    const int32_t* k_offsets);

/* Per-stage GPU timing of this context's forwards. [in] enable: 1 = on, 0 = off (the
 * default). While on, each sparse CUDA forward records events on its stream at the stage
 * boundaries and psa_context_get_stats fills stage_ms from them (the inverse rearrange is
 * fused into attention: its entry stays 0; TOTAL = rearrange through attention). Off costs
 * nothing. The CPU backend always fills stage_ms (host wall time); this is a no-op there.
 * Switch it between forwards, not while one is being captured into a CUDA graph.
 * Errors: PSA_ERR_NULL_POINTER (context), PSA_ERR_INVALID_ARGUMENT (enable not 0 or 1), a
 * CUDA error creating the events. */
PSA_API psa_status psa_context_set_stage_timing(psa_context* context, int32_t enable);
#endif /* PSA_EXPERIMENTAL_API */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PSA_H */
