// ring/ring_cpu.cpp -- host implementation of the level-map and shard-attention halves of a
// PSA forward (see ring_cpu.h). Calls the same per-head stage functions as the CPU backend's
// forward (rearrange_head_cpu, sim_cap_head_cpu, importance_head_cpu, mask_head_cpu,
// pool_kv_cpu, sparse_attention_cpu) with the same plan-derived parameters
// (importance_sampling, mask_post_params), so a ring of shards reproduces the whole forward.
#include "ring/ring_cpu.h"

#include <algorithm>
#include <cstring>

#include "attention/attention.h"
#include "backend/backend.h"
#include "core/carver.h"
#include "importance/importance.h"
#include "mask/mask.h"
#include "pool/pool.h"
#include "rearrange/rearrange.h"

namespace psa {
namespace {

struct MapScratch {
  float *q, *k, *kpad, *scores, *ties;
  int8_t *cap;
  int32_t *q_off, *k_off, *shuffle, *order;
};

MapScratch carve_map(Carver& c, const Plan& p) {
  const int64_t d = p.problem.head_dim;
  MapScratch s{};
  s.q = c.take<float>(p.problem.len_q * d);
  s.k = c.take<float>(p.problem.len_k * d);
  s.kpad = p.route.sim_cap() ? c.take<float>(p.k_blocks * p.block_n * d) : nullptr;
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

}  // namespace

uint64_t level_map_workspace_cpu(const Plan& plan) {
  Carver c(nullptr);
  carve_map(c, plan);
  return c.used() + 64;  // + alignment slack of the base pointer
}

uint64_t shard_attention_workspace_cpu(const Plan& plan) {
  Carver c(nullptr);
  carve_shard(c, plan);
  return c.used() + 64;  // + alignment slack of the base pointer
}

void level_map_cpu(const Plan& plan, const RingTensors& t, bool dense, int8_t* levels,
                   int8_t* kept, void* workspace, LevelCounts* counts) {
  const Problem& pb = plan.problem;
  const int64_t d = pb.head_dim, lq = pb.len_q, lk = pb.len_k;
  const int64_t group = pb.heads_q / pb.heads_kv;
  const int64_t mq = plan.q_blocks, nk = plan.k_blocks;
  const RoutePlan& r = plan.route;
  LevelCounts c;
  if (dense) {
    const int64_t n = pb.batch * pb.heads_q * mq * nk;
    std::fill(levels, levels + n, int8_t{1});
    if (kept != nullptr) std::fill(kept, kept + n, int8_t{1});
    count_levels(levels, n, &c);
    *counts = c;
    return;
  }
  Carver carver(Carver::align64(workspace));
  const MapScratch s = carve_map(carver, plan);
  const MaskPostParams post = mask_post_params(plan, s.cap);
  const std::vector<int64_t> identity;  // ring inputs are already in the computing order
  for (int64_t b = 0; b < pb.batch; ++b) {
    for (int64_t hk = 0; hk < pb.heads_kv; ++hk) {
      rearrange_head_cpu(t.k, pb.dtype, t.k_stride, b, hk, lk, d, identity, s.k);
      if (r.sim_cap()) sim_cap_head_cpu(s.k, lk, d, nk, plan.block_n, r.sim_threshold, s.kpad, s.cap);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        rearrange_head_cpu(t.q, pb.dtype, t.q_stride, b, h, lq, d, identity, s.q);
        const ImportanceSampling sm = importance_sampling(plan, b, h, t.q_offsets, t.k_offsets);
        float* const ties = r.tie_mass ? s.ties : nullptr;
        importance_head_cpu(s.q, lq, s.k, lk, d, plan.block_m, plan.block_n, plan.scale, sm,
                            s.shuffle, s.q_off, s.k_off, s.scores, ties);
        int8_t* map = levels + (b * pb.heads_q + h) * mq * nk;
        mask_head_cpu(s.scores, mq, nk, r.mask_row, post, ties, map, s.order);
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
  Carver carver(Carver::align64(workspace));
  const ShardScratch s = carve_shard(carver, plan);
  const std::vector<int64_t> identity;
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
      rearrange_head_cpu(t.k, pb.dtype, t.k_stride, b, hk, lk, d, identity, s.k);
      rearrange_head_cpu(t.v, pb.dtype, t.v_stride, b, hk, lk, d, identity, s.v);
      float* const k_out[3] = {s.k2, s.k4, s.k8};
      float* const v_out[3] = {s.v2, s.v4, s.v8};
      pool_kv_cpu(s.k, s.v, lk, d, nk, plan.block_n, k_out, v_out);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        rearrange_head_cpu(t.q, pb.dtype, t.q_stride, b, h, lq, d, identity, s.q);
        const int8_t* map = levels + (b * pb.heads_q + h) * mq * map_nk;
        for (int64_t i = 0; i < mq; ++i)
          std::memcpy(s.levels + i * nk, map + i * map_nk + begin, static_cast<size_t>(nk));
        sparse_attention_cpu(s.q, lq, kp, vp, lk, d, plan.block_m, plan.block_n, s.levels,
                             plan.scale, false, s.out, s.lse);
        inverse_rearrange_head_cpu(t.out, pb.dtype, t.o_stride, b, h, lq, d, identity, s.out,
                                   s.lse, t.lse + (b * pb.heads_q + h) * lq);
      }
    }
  }
}

}  // namespace psa
