// ring/ring_cpu.cpp -- host implementation of the level-map and shard-attention halves of a
// PSA forward (see ring_cpu.h). Calls the same stage functions as the CPU backend's forward
// (importance_cpu, build_mask_row, postprocess_levels, sim_cap_row, pool_pyramid_cpu,
// sparse_attention_cpu), so a ring of shards reproduces the whole forward.
#include "ring/ring_cpu.h"

#include <algorithm>
#include <cstring>

#include "attention/attention.h"
#include "backend/backend.h"
#include "core/half.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "pool/pool.h"

namespace psa {
namespace {

class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(int64_t count) {
    used_ = (used_ + 63) & ~uint64_t{63};
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += static_cast<uint64_t>(count) * sizeof(T);
    return p;
  }
  uint64_t used() const { return used_ + 64; }  // + alignment slack of the base pointer

 private:
  char* base_;
  uint64_t used_ = 0;
};

void* align64(void* p) {
  return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

void load_head(const void* base, psa_dtype dt, const int64_t* stride, int64_t b, int64_t h,
               int64_t len, int64_t d, float* dst) {
  for (int64_t i = 0; i < len; ++i) {
    const int64_t off = b * stride[0] + h * stride[1] + i * stride[2];
    for (int64_t c = 0; c < d; ++c) dst[i * d + c] = load_as_float(base, off + c, dt);
  }
}

struct MapScratch {
  float *q, *k, *kpad, *scores, *ties;
  int8_t *cap;
  int32_t *q_off, *k_off, *shuffle, *order;
};

MapScratch carve_map(Carver& c, const Config& cfg, const Plan& p) {
  const int64_t d = p.problem.head_dim;
  MapScratch s{};
  s.q = c.take<float>(p.problem.len_q * d);
  s.k = c.take<float>(p.problem.len_k * d);
  s.kpad = cfg.use_sim_mask ? c.take<float>(p.k_blocks * p.block_n * d) : nullptr;
  s.scores = c.take<float>(p.q_blocks * p.k_blocks);
  s.ties = c.take<float>(p.q_blocks * p.k_blocks);  // tie masses (importance_spec.h)
  s.cap = c.take<int8_t>(p.k_blocks);
  s.q_off = c.take<int32_t>(p.q_samples);
  s.k_off = c.take<int32_t>(p.k_samples);
  s.shuffle = c.take<int32_t>(std::max(p.block_m, p.block_n));
  s.order = c.take<int32_t>(p.k_blocks);
  return s;
}

struct ShardScratch {
  float *q, *k, *v, *k2, *k4, *k8, *v2, *v4, *v8, *out, *lse;
  int8_t* levels;
};

ShardScratch carve_shard(Carver& c, const Plan& p) {
  const int64_t d = p.problem.head_dim, padded = p.k_blocks * p.block_n;
  ShardScratch s{};
  s.q = c.take<float>(p.problem.len_q * d);
  s.k = c.take<float>(p.problem.len_k * d);
  s.v = c.take<float>(p.problem.len_k * d);
  s.k2 = c.take<float>(padded / 2 * d);
  s.k4 = c.take<float>(padded / 4 * d);
  s.k8 = c.take<float>(padded / 8 * d);
  s.v2 = c.take<float>(padded / 2 * d);
  s.v4 = c.take<float>(padded / 4 * d);
  s.v8 = c.take<float>(padded / 8 * d);
  s.out = c.take<float>(p.problem.len_q * d);
  s.lse = c.take<float>(p.problem.len_q);
  s.levels = c.take<int8_t>(p.q_blocks * p.k_blocks);
  return s;
}

void count_levels(const int8_t* levels, int64_t n, LevelCounts* c) {
  for (int64_t e = 0; e < n; ++e) {
    const int lvl = levels[e];
    const int slot = lvl == 1 ? 0 : lvl == 2 ? 1 : lvl == 4 ? 2 : lvl == 8 ? 3 : 4;
    ++c->count[slot];
    if (lvl > 0) c->density_sum += 1.0 / lvl;
  }
}

}  // namespace

uint64_t level_map_workspace_cpu(const Config& cfg, const Plan& plan) {
  Carver c(nullptr);
  carve_map(c, cfg, plan);
  return c.used();
}

uint64_t shard_attention_workspace_cpu(const Plan& plan) {
  Carver c(nullptr);
  carve_shard(c, plan);
  return c.used();
}

void level_map_cpu(const Config& cfg, const Plan& plan, const RingTensors& t, bool dense,
                   int8_t* levels, int8_t* kept, void* workspace, LevelCounts* counts) {
  const Problem& pb = plan.problem;
  const int64_t d = pb.head_dim, lq = pb.len_q, lk = pb.len_k;
  const int64_t group = pb.heads_q / pb.heads_kv;
  const int64_t mq = plan.q_blocks, nk = plan.k_blocks;
  LevelCounts c;
  if (dense) {
    const int64_t n = pb.batch * pb.heads_q * mq * nk;
    std::fill(levels, levels + n, int8_t{1});
    if (kept != nullptr) std::fill(kept, kept + n, int8_t{1});
    count_levels(levels, n, &c);
    *counts = c;
    return;
  }
  Carver carver(align64(workspace));
  const MapScratch s = carve_map(carver, cfg, plan);
  const MaskRowParams row_params = mask_row_params(cfg);
  MaskPostParams post;
  post.block_m = plan.block_m;
  post.block_n = plan.block_n;
  post.lq = lq;
  post.lk = lk;
  post.causal = cfg.causal;
  post.text_rule = cfg.text_rule;
  post.text_rows_dense = cfg.text_rows_dense;
  post.text_begin = plan.text_begin;
  post.text_end = plan.text_end;
  post.sim_cap = cfg.use_sim_mask ? s.cap : nullptr;
  for (int64_t b = 0; b < pb.batch; ++b) {
    for (int64_t hk = 0; hk < pb.heads_kv; ++hk) {
      load_head(t.k, pb.dtype, t.k_stride, b, hk, lk, d, s.k);
      if (cfg.use_sim_mask) {
        for (int64_t x = 0; x < nk * plan.block_n; ++x)
          std::memcpy(s.kpad + x * d, s.k + std::min(x, lk - 1) * d, sizeof(float) * d);
        sim_cap_row(s.kpad, nk, plan.block_n, d, cfg.sim_threshold, s.cap);
      }
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        load_head(t.q, pb.dtype, t.q_stride, b, h, lq, d, s.q);
        if (t.q_offsets != nullptr) {
          const int64_t bh = b * pb.heads_q + h;
          std::memcpy(s.q_off, t.q_offsets + bh * plan.q_samples, sizeof(int32_t) * plan.q_samples);
          std::memcpy(s.k_off, t.k_offsets + bh * plan.k_samples, sizeof(int32_t) * plan.k_samples);
        } else {
          sample_offsets(static_cast<uint64_t>(cfg.seed), b + cfg.batch_offset, h + cfg.head_offset,
                         kSampleQuery, static_cast<int32_t>(plan.block_m),
                         static_cast<int32_t>(plan.q_samples), s.shuffle, s.q_off);
          sample_offsets(static_cast<uint64_t>(cfg.seed), b + cfg.batch_offset, h + cfg.head_offset,
                         kSampleKey, static_cast<int32_t>(plan.block_n),
                         static_cast<int32_t>(plan.k_samples), s.shuffle, s.k_off);
        }
        float* const ties = tie_mass_ranking_enabled() ? s.ties : nullptr;
        importance_cpu(s.q, lq, s.k, lk, d, plan.block_m, plan.block_n, s.q_off,
                       static_cast<int32_t>(plan.q_samples), s.k_off,
                       static_cast<int32_t>(plan.k_samples), plan.scale, s.scores, ties);
        int8_t* map = levels + (b * pb.heads_q + h) * mq * nk;
        for (int64_t i = 0; i < mq; ++i) {
          int8_t* row = map + i * nk;
          const int64_t n =
              cfg.causal ? causal_visible_blocks(i, plan.block_m, plan.block_n, lq, lk) : nk;
          std::fill(row, row + nk, int8_t{0});
          if (n > 0)
            build_mask_row(s.scores + i * nk, n, row_params, row, s.order, nullptr,
                           ties != nullptr ? ties + i * nk : nullptr);
        }
        postprocess_levels(map, mq, nk, post);
        count_levels(map, mq * nk, &c);
        if (kept != nullptr)
          std::memcpy(kept + (b * pb.heads_q + h) * mq * nk, map, static_cast<size_t>(mq * nk));
      }
    }
  }
  *counts = c;
}

void shard_attention_cpu(const Plan& plan, const RingTensors& t, const int8_t* levels,
                         int64_t map_nk, int64_t begin, void* workspace) {
  const Problem& pb = plan.problem;
  const int64_t d = pb.head_dim, lq = pb.len_q, lk = pb.len_k;
  const int64_t group = pb.heads_q / pb.heads_kv;
  const int64_t mq = plan.q_blocks, nk = plan.k_blocks;
  Carver carver(align64(workspace));
  const ShardScratch s = carve_shard(carver, plan);
  Pyramid kp, vp;
  kp.level[0] = s.k;
  kp.level[1] = s.k2;
  kp.level[2] = s.k4;
  kp.level[3] = s.k8;
  vp.level[0] = s.v;
  vp.level[1] = s.v2;
  vp.level[2] = s.v4;
  vp.level[3] = s.v8;
  for (int64_t b = 0; b < pb.batch; ++b) {
    for (int64_t hk = 0; hk < pb.heads_kv; ++hk) {
      load_head(t.k, pb.dtype, t.k_stride, b, hk, lk, d, s.k);
      load_head(t.v, pb.dtype, t.v_stride, b, hk, lk, d, s.v);
      pool_pyramid_cpu(s.k, lk, d, nk, plan.block_n, s.k2, s.k4, s.k8);
      pool_pyramid_cpu(s.v, lk, d, nk, plan.block_n, s.v2, s.v4, s.v8);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        load_head(t.q, pb.dtype, t.q_stride, b, h, lq, d, s.q);
        const int8_t* map = levels + (b * pb.heads_q + h) * mq * map_nk;
        for (int64_t i = 0; i < mq; ++i)
          std::memcpy(s.levels + i * nk, map + i * map_nk + begin, static_cast<size_t>(nk));
        sparse_attention_cpu(s.q, lq, kp, vp, lk, d, plan.block_m, plan.block_n, s.levels,
                             plan.scale, false, s.out, s.lse);
        for (int64_t i = 0; i < lq; ++i) {
          const int64_t off = b * t.o_stride[0] + h * t.o_stride[1] + i * t.o_stride[2];
          for (int64_t c = 0; c < d; ++c) store_from_float(t.out, off + c, pb.dtype, s.out[i * d + c]);
        }
        std::memcpy(t.lse + (b * pb.heads_q + h) * lq, s.lse, sizeof(float) * static_cast<size_t>(lq));
      }
    }
  }
}

}  // namespace psa
