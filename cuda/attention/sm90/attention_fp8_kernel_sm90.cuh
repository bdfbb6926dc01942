// cuda/attention/sm90/attention_fp8_kernel_sm90.cuh -- attention stage, the 8-bit path's kernel
// for Hopper (sm_90a), device half: attention/attention_fp8.h's rule on the operands of
// cuda/pool/pool_fp8.cu (int8 K - k_mean and e4m3 V per level, one scale per (level, key
// block)). Same row walk, tile stream, ring of stages and barrier protocol as
// attention_kernel_sm90.cuh (read that file first); what differs:
//   - Q: the bf16 tile lands by TMA as there; the consumers quantize it to int8 in shared memory
//     (one scale per 128-row query block: both warpgroups' amax), and take q . k_mean per row
//     for the lse;
//   - S = Q8 K8^T by wgmma s8 (int32, exact), then u = z + log2 f = S * s_q * s_k(entry) *
//     scale + bias + log2 f (f = s_v / s_v,max, V's share, a power of two); the K warp writes
//     each tile's s_k and bias + log2 f per column pair, so that the softmax reads them at fixed
//     offsets;
//   - P: the row maximum m is taken over u (<= the maximum of z: the rule's freedom, see
//     attention/attention_fp8.h), so w = 2^(z - m) * f * 448 = 2^(u - (m - log2 448)) is one
//     exponential per weight, at most 448; rounded to e4m3, packed straight from the S
//     accumulator layout into the k32 A fragment; the key order inside each 32-key step that
//     this implies is applied to V instead;
//   - l = sum w / (448 f) on the tensor cores: V's block scales are powers of two (the rule), so
//     1 / f is one too and exact in e4m3; one extra wgmma m64n8k32 per 32 keys multiplies P by a
//     per-tile [8][keys] table whose rows 0 and 1 hold 1 / f in two exponent bands (1..2^8, and
//     2^9..2^23 as 1 / f * 2^-15; a key block with 1 / f past 2^23 is dropped by the K warp, its
//     bias -inf), rows 2-7 zeros;
//   - V: e4m3 tiles land [keys][d] by TMA (a transposed global V would need 8-byte TMA boxes for
//     level-8 entries at block_n 64); warps 1 and 3 of the producer warpgroup transpose each
//     tile into [d][keys] (wgmma takes 8-bit B K-major only), in that key order, and write the
//     tile's 1 / f rows in that order from the V warp's per-column codes;
//   - out = O * s_v,max / 448 / l; lse = m + ln l + (q . k_mean) * scale.
// Head dim 128, block_m 128, non-causal, work-list rows (no dense path); Q in token order or
// through q_rows (one-row boxes issued by the K warp's lanes).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attention/attention_spec.h"
#include "cuda/attention/attention_params.h"
#include "cuda/attention/row_stream.cuh"
#include "cuda/attention/sm90/row_parts_sm90.cuh"
#include "cuda/core/device.cuh"
#include "cuda/core/fp8.cuh"
#include "cuda/core/sm90.cuh"

namespace psa {
namespace gpu {
namespace sm90 {

// 2^x for x <= 9 (or NaN) on the FMA and integer pipes instead of the MUFU: p(x - j) * 2^j, j =
// round(x) by the 1.5 * 2^23 addition, 2^j built in an exponent field, p a degree-3 fit of 2^f
// on [-0.5, 0.5] (relative error 7.5e-5 against ex2.approx's 2^-22; an e4m3 step is 2^-3). x is
// clamped at -125 (2^-125 rounds to an e4m3 0, as ex2's 0 does) by max.NaN, and 2^j multiplies,
// so that a NaN x (a key block whose s_k is NaN) stays NaN. The softmax sends an eighth of its
// exponentials here, columns 56-63 of every 64 (PERF_NOTES.md, "8-bit attention: a quarter of the
// exponentials on the FMA pipe" and "8-bit attention: V's share in the exponent").
__device__ __forceinline__ float exp2_fma_pipe(float x) {
  const float y = fmax_nan(x, -125.0f);
  const float t = y + 12582912.0f;        // 1.5 * 2^23 + j: j in t's low mantissa bits
  const float f = y - (t - 12582912.0f);  // in [-0.5, 0.5], exact
  const float p = fmaf(fmaf(fmaf(0.0551716685f, f, 0.24261114f), f, 0.693260968f), f, 0.999928057f);
  return p * __int_as_float((__float_as_int(t) << 23) + 0x3f800000);
}

// V's share of a key block: f = s_v / s_v,max = 2^-n, both scales powers of two (vs <= vsmax), n
// from their exponent fields, clamped to [0, 255]; an all-zero block (vs = 0) has f = 1, n = 0.
// One rule for the K warp (log2 f in the column bias) and the V warp (1 / f in the l table).
__device__ __forceinline__ int v_share_exponent(float vs, float vsmax) {
  if (!(vs > 0.0f)) return 0;
  return min(max(static_cast<int>(__float_as_uint(vsmax) >> 23) - static_cast<int>(__float_as_uint(vs) >> 23), 0),
             255);
}
// The largest n whose 1 / f the l table holds (band 1: 2^(n - 15)); the K warp drops blocks past
// it (bias -inf), whose rule weight w <= 448 * 2^-24 is an e4m3 0 anyway.
constexpr int kMaxShareExponent = 23;

struct Fp8Traits {
  static constexpr int kD = 128;
  static constexpr int kBM = 128;
  static constexpr int kKT = 128;
  static constexpr int kStages = 2;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = 224;
  static constexpr size_t kQBytes = size_t{2} * kBM * kD;  // bf16 Q slot
  static constexpr size_t kTile8 = size_t{kKT} * kD;      // an 8-bit [128][128] tile
  static constexpr size_t kOffQ = 0;
  static constexpr size_t kOffQ8 = kOffQ + 2 * kQBytes;
  static constexpr size_t kOffK = kOffQ8 + kTile8;
  static constexpr size_t kOffV = kOffK + kStages * kTile8;
  static constexpr size_t kOffVt = kOffV + kStages * kTile8;
  // per stage, l's B operand: [8][kKT] e4m3 (128-byte swizzle), rows 0-1 the 1 / f bands
  static constexpr size_t kLTab = size_t{8} * kKT;
  static constexpr size_t kOffL = kOffVt + kStages * kTile8;
  static constexpr size_t kOffTok = kOffL + kStages * kLTab;
  // per raw V stage and physical column: the 1 / f band codes (band 0 | band 1 << 8), from the
  // V warp for the transposers
  static constexpr size_t kOffVc = kOffTok + sizeof(int32_t) * kStages * kKT;
  // per entry slot: {s_k, log2 f} (the K warp's scratch for the column tables)
  static constexpr size_t kOffTab = kOffVc + sizeof(uint16_t) * kStages * kKT;
  // per column pair (2c, 2c + 1): {s_k, s_k, bias + log2 f, bias + log2 f} (bias: the level's
  // log-bias, or -inf for a key row that is not a valid token or a block with f < 2^-23); the
  // softmax's only per-column reads, one 16-byte load per 8 columns at a fixed offset
  static constexpr size_t kOffPair = kOffTab + sizeof(float2) * kStages * kKT;
  static constexpr size_t kOffQinfo = kOffPair + sizeof(float4) * kStages * (kKT / 2);
  // per Q slot: 8 warp amaxes, q . k_mean of 128 rows
  static constexpr size_t kQinfoFloats = 8 + kBM;
  static constexpr size_t kOffBar = kOffQinfo + sizeof(float) * 2 * kQinfoFloats;
  static constexpr int kBars = 6 * kStages + 6;  // K, V, Vt landed; K, Vt, V free; Q full, Q free, plan x 2
  static constexpr size_t kOffPlan = kOffBar + sizeof(uint64_t) * kBars;
  // The window is aligned to 1024 bytes, as the 128-byte swizzle atoms need (TMA, wgmma and the
  // transposers' off8 addressing alike).
  static constexpr size_t kAlign = 1024;
  static constexpr size_t kSmemBytes = kOffPlan + 2 * sizeof(RowPlan) + kAlign;
  static_assert(kSmemBytes <= 227 * 1024, "fits the sm90 shared-memory carve-out");
  static_assert(kOffQ8 % 1024 == 0 && kOffK % 1024 == 0 && kOffV % 1024 == 0 && kOffVt % 1024 == 0 &&
                    kOffL % 1024 == 0 && kLTab == 1024,
                "swizzle atoms start on 1024 bytes");
  static_assert(kOffBar % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(kTile8 == 16384, "an 8-bit tile is [128][128] bytes");
};

// Kernel parameters: the common block (q, out, lse, work list, dims, scale), the bf16 Q map,
// the 8-bit K / V maps per level (boxes of 128 bytes x box_rows rows) and the scales of
// cuda/pool/pool_cuda.h's Fp8KvOut.
struct Sm90Fp8Params {
  AttnKernelParams a;
  int64_t batch;
  CUtensorMap q;
  CUtensorMap k[4];
  CUtensorMap v[4];
  int32_t box_rows[4];
  const float* k_mean;   // [B*Hkv, 128]
  const float* k_scale;  // [B*Hkv, 4, nk]
  const float* v_scale;  // [B*Hkv, 4, nk]
  const float* v_smax;   // [B*Hkv]
};

// Byte offset of (row, byte column c) in an 8-bit [rows][128] tile, 128-byte swizzle.
__device__ __forceinline__ int off8(int row, int c) { return row * 128 + ((((c >> 4) ^ row) & 7) << 4) + (c & 15); }

// Key order inside each 32-key step of P V: the P value a thread holds at logical k (its k32
// A-fragment position) comes from physical key phys_of_logical(k) of the step.
__device__ __forceinline__ int phys_of_logical(int k) {
  const int h = k >> 4, tq = (k >> 2) & 3, r = k & 3;
  return h * 16 + (r >> 1) * 8 + tq * 2 + (r & 1);
}

template <typename T>
__global__ void __launch_bounds__(384, 1) sparse_attention_fp8_sm90_kernel(const __grid_constant__ Sm90Fp8Params sp) {
#ifdef PSA_SM90_DEVICE
  const AttnKernelParams& p = sp.a;
  using Tr = Fp8Traits;
  constexpr int BM = Tr::kBM, KT = Tr::kKT, S = Tr::kStages, D = Tr::kD;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = align_smem<Tr::kAlign>(smem_raw);
  unsigned char* sK = smem + Tr::kOffK;
  unsigned char* sV = smem + Tr::kOffV;
  unsigned char* sVt = smem + Tr::kOffVt;
  int32_t* sTok = reinterpret_cast<int32_t*>(smem + Tr::kOffTok);
  uint16_t* sVc = reinterpret_cast<uint16_t*>(smem + Tr::kOffVc);   // [S][KT]
  float4* sPair = reinterpret_cast<float4*>(smem + Tr::kOffPair);   // [S][KT / 2]
  float2* sTab = reinterpret_cast<float2*>(smem + Tr::kOffTab);     // [S][KT] {s_k, log2 f}
  float* sQinfo = reinterpret_cast<float*>(smem + Tr::kOffQinfo);
  const uint32_t bar0 = smem_addr(smem + Tr::kOffBar);
  auto bar_k = [&](int s) { return bar0 + 8u * s; };             // K landed (+ tables, tokens)
  auto bar_v = [&](int s) { return bar0 + 8u * (S + s); };       // raw V landed
  auto bar_vt = [&](int s) { return bar0 + 8u * (2 * S + s); };  // V transposed
  auto bar_ek = [&](int s) { return bar0 + 8u * (3 * S + s); };  // K free
  auto bar_ev = [&](int s) { return bar0 + 8u * (4 * S + s); };  // transposed V free
  auto bar_evr = [&](int s) { return bar0 + 8u * (5 * S + s); }; // raw V free
  auto bar_qf = [&](int q) { return bar0 + 8u * (6 * S + q); };
  auto bar_qe = [&](int q) { return bar0 + 8u * (6 * S + 2 + q); };
  auto bar_pl = [&](int q) { return bar0 + 8u * (6 * S + 4 + q); };
  auto q_slot = [&](int q) { return reinterpret_cast<T*>(smem + Tr::kOffQ + q * Tr::kQBytes); };
  auto plan_of = [&](int q) { return reinterpret_cast<RowPlan*>(smem + Tr::kOffPlan) + q; };

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wg = tid / 128;
  const int64_t n_rows = p.mq * p.heads_q * sp.batch;
  auto decode = [&](int64_t r, int64_t& i, int64_t& h, int64_t& b) {
    i = r % p.mq;
    h = (r / p.mq) % p.heads_q;
    b = r / (p.mq * p.heads_q);
  };
  // (batch, K/V head) of query head h, and its s_v,max (0 -- no V block with a non-zero value --
  // stands for 1, as in the oracle).
  auto kv_of = [&](int64_t b, int64_t h) { return b * (p.heads_q / p.group) + h / p.group; };
  auto v_smax_of = [&](int64_t kv) {
    const float m = sp.v_smax[kv];
    return m > 0.0f ? m : 1.0f;
  };

  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(bar_k(s), 32);
      mbar_init(bar_v(s), 32);
      mbar_init(bar_vt(s), 64);   // every lane of the two transposer warps
      mbar_init(bar_ek(s), 256);
      mbar_init(bar_ev(s), 8);    // one arrival per consumer warp
      mbar_init(bar_evr(s), 64);  // every transposer lane
    }
    for (int q = 0; q < 2; ++q) {
      mbar_init(bar_qf(q), 1);
      // Q slot and row plan free: every consumer thread, and every lane of the V warp and the
      // transposers after its last read of the plan (as in the 16-bit kernel).
      mbar_init(bar_qe(q), 256 + 32 + 64);
      mbar_init(bar_pl(q), 1);
    }
    mbar_init_fence();
  }
  // Rows 2-7 of both stages' 1 / f tables: zeros, never written again (the consumers read them
  // through the async proxy).
  if (tid < 2 * 6 * 8) {
    const int s = tid / 48, c = tid % 48;
    *reinterpret_cast<uint4*>(smem + Tr::kOffL + s * Tr::kLTab + 256 + c * 16) = make_uint4(0, 0, 0, 0);
    fence_proxy_async();
  }
  __syncthreads();

  if (wg == 0) {
    // ================================ producer ================================
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Tr::kProducerRegs));
    const int role = warp;  // 0: K warp, 2: V warp, 1 and 3: transposers
    // Q through q_rows (the K warp; q_source_rows / load_q_rows). Each lane holds the next
    // row's source rows, read a row ahead, so the index loads are off the row start.
    int qsrc[BM / 32];
    auto load_qsrc = [&](int64_t r) {
      if (p.q_rows != nullptr && role == 0 && r < n_rows) q_source_rows<BM>(p, (r % p.mq) * BM, lane, qsrc);
    };
    load_qsrc(blockIdx.x);
    uint32_t T0 = 0;  // ring position (unsigned: the stage and parity are a mask and a shift)
    int n = 0;
    for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x, ++n) {
      int64_t i, h, b;
      decode(r, i, h, b);
      const int64_t hk = h / p.group;
      const int64_t x0 = i * BM;
      const int q = n & 1;
      RowPlan* plan = plan_of(q);
      if (role != 0) {
        mbar_wait(bar_pl(q), (n >> 1) & 1);  // the row's plan is in place
      } else if (n >= 2) {
        mbar_wait(bar_qe(q), ((n >> 1) - 1) & 1);
      }
      if (lane == 0 && role == 0) {
        plan_row_stream(p, r, x0, BM, KT, plan);
        mbar_arrive(bar_pl(q));
        mbar_arrive_expect_tx(bar_qf(q), static_cast<uint32_t>(Tr::kQBytes));  // releases the plan
        if (p.q_rows == nullptr)
          for (int pn = 0; pn < D / 64; ++pn)
            tma_load_4d(smem_addr(q_slot(q) + pn * BM * 64), &sp.q, bar_qf(q), pn * 64, static_cast<int>(x0),
                        static_cast<int>(h), static_cast<int>(b));
      }
      if (role == 0 && p.q_rows != nullptr) {
        __syncwarp();  // the expected bytes before the boxes
        load_q_rows<BM, D>(&sp.q, q_slot(q), bar_qf(q), qsrc, lane, h, b);
        load_qsrc(r + gridDim.x);
      }
      __syncwarp();
      const int32_t total = plan->total;
      if (role == 1 || role == 3) {
        // ---- transposers: raw V [key][d] of stage s -> V^T [d][logical key] ----
        // By ldmatrix / stmatrix on 16-bit matrices: warp 1 takes the tile's 16-key chunks c = 0..3
        // (c = 2 k32 + h: step k32, half h), warp 3 chunks 4..7. One ldmatrix.x4.trans reads the
        // chunk's keys at 32 channels 32 mp.. (matrix j: keys 8 (j & 1).., 16-byte column 2 mp +
        // (j >> 1)); lane l then holds, per matrix, keys 2 (l % 4) and + 1 at channels 2 (l / 4) and
        // + 1. A byte permute of matrices 0 and 1 (2 and 3) gives one channel's keys 2q, 2q + 1,
        // 8 + 2q, 9 + 2q (q = l % 4): the logical keys 4q.. of the half (phys_of_logical). stmatrix
        // writes them as V^T rows: of a 16-channel column, matrix A holds channels 0, 2, 4, 6, 9, 11,
        // 13, 15 and matrix B the others, so that each matrix's 8 rows sit in 8 different 16-byte
        // columns of the swizzle, as do the 8 key rows a load reads: no bank conflicts.
        const int lj = lane >> 3, lr = lane & 7;  // the lane's matrix and row for the addresses
        const uint32_t ld0 = static_cast<uint32_t>(off8(8 * (lj & 1) + lr, 16 * (lj >> 1)));
        const uint32_t st0 = static_cast<uint32_t>(off8(16 * (lj >> 1) + 2 * lr + ((lj & 1) ^ (lr >> 2)), 0));
        // Matrix A's word: channel 2 (l / 4) of the lane's pair for l < 16, 2 (l / 4) + 1 above; B the other.
        const uint32_t sel_a = lane < 16 ? 0x6420u : 0x7531u, sel_b = sel_a ^ 0x1111u;
        const int c0 = role == 1 ? 0 : 4;
        // The tile's 1 / f rows: warp 1 writes band 0 (row 0), warp 3 band 1 (row 1), lane l the
        // four logical keys 4 l.. of the tile, whose physical columns are c, c + 1, c + 8, c + 9
        // (phys_of_logical), c = 32 (l / 8) + 16 (l / 4 % 2) + 2 (l % 4); their codes come from the
        // V warp's per-column table as two 4-byte words.
        const int band = role == 1 ? 0 : 1;
        const int lc = phys_of_logical(lane * 4 % 32) + lane / 8 * 32;
        const uint32_t l_st = static_cast<uint32_t>(off8(band, lane * 4));
        const uint32_t l_perm = band == 0 ? 0x6420u : 0x7531u;
        for (int32_t t = 0; t < total; ++t) {
          const uint32_t u_ring = T0 + t;
          const int s = static_cast<int>(u_ring % S);
          mbar_wait(bar_v(s), (u_ring / S) & 1);
          if (u_ring >= S) mbar_wait(bar_ev(s), ((u_ring / S) - 1) & 1);
          // Shared-window addresses: the V tiles start on 1024 bytes (Fp8Traits' static_asserts),
          // so adding a tile's start commutes with the one XOR on an address (bits 5-6, below).
          const uint32_t v_at = smem_addr(smem) + static_cast<uint32_t>(Tr::kOffV + s * Tr::kTile8);
          const uint32_t vt_at = smem_addr(smem) + static_cast<uint32_t>(Tr::kOffVt + s * Tr::kTile8);
          {
            const uint32_t c_at = smem_addr(sVc + s * KT + lc);
            sts_b32(smem_addr(smem) + static_cast<uint32_t>(Tr::kOffL + s * Tr::kLTab) + l_st,
                    __byte_perm(lds_b32(c_at), lds_b32(c_at + 16), l_perm));
          }
#pragma unroll 1
          for (int kc = 0; kc < 4; ++kc) {
            const int c = c0 + kc;
            // v_at and the chunk's 2048 c lie above ld0's bits 5-6, where the column pair mp goes;
            // st0 ^ (c << 4) lies below the 4096 mp of the channel column.
            const uint32_t ld_c = v_at + ld0 + static_cast<uint32_t>(c) * 2048u;
            const uint32_t st_c = vt_at + (st0 ^ (static_cast<uint32_t>(c) << 4));
            uint32_t m[4][4];
#pragma unroll
            for (int mp = 0; mp < 4; ++mp) ldsm_x4_trans(ld_c ^ (mp << 5), m[mp]);
#pragma unroll
            for (int mp = 0; mp < 4; ++mp) {
              const uint32_t w[4] = {__byte_perm(m[mp][0], m[mp][1], sel_a), __byte_perm(m[mp][0], m[mp][1], sel_b),
                                     __byte_perm(m[mp][2], m[mp][3], sel_a), __byte_perm(m[mp][2], m[mp][3], sel_b)};
              stsm_x4(st_c + mp * 4096u, w);
            }
          }
          fence_proxy_async();  // the generic writes before the consumers' wgmma reads
          mbar_arrive(bar_vt(s));
          mbar_arrive(bar_evr(s));  // the raw tile is read
        }
        mbar_arrive(bar_qe(q));  // this lane's reads of the plan are done
        T0 += total;
        continue;
      }
      const bool vw = role == 2;
      const int32_t* wl = p.wl_blocks + r * p.nk;
      const int64_t kv = kv_of(b, h);
      const float vsmax = v_smax_of(kv);
      for (int32_t t = 0; t < total; ++t) {
        const uint32_t u_ring = T0 + t;
        const int s = static_cast<int>(u_ring % S);
        const uint32_t use_parity = ((u_ring / S) - 1) & 1;
        const TileEntries te = tile_entries<KT>(p, plan, t, sp.box_rows, wl, lane);
        const int li = te.li, lg = te.lg;
        const int32_t entries = te.entries, loaded = te.loaded;
        const int32_t* ent = te.ent;
        unsigned char* dst = (vw ? sV : sK) + s * Tr::kTile8;
        const uint32_t bar = vw ? bar_v(s) : bar_k(s);
        // The tile's boxes go out as soon as the stage is free; the K warp's tables and the
        // zero rows follow while they fly (the stage's barrier completes on both: the bytes
        // and the 32 arrivals below).
        auto issue_boxes = [&] {
          if (lane == 0) mbar_expect_tx(bar, static_cast<uint32_t>(loaded) * D);
          __syncwarp();
          const CUtensorMap* map = vw ? &sp.v[li] : &sp.k[li];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int e = lane + 32 * j;
            if (e < entries)
              tma_load_4d(smem_addr(dst + (e << lg) * 128), map, bar, 0, ent[j] << lg, static_cast<int>(hk),
                          static_cast<int>(b));
          }
        };
        if (!vw) {
          // Per-entry scales (read before the stage wait so the loads overlap it).
          // log2 f = -n (v_share_exponent); past kMaxShareExponent the block is dropped (-inf).
          float ks[4], lf[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            ks[j] = 0.0f;
            lf[j] = 0.0f;
            if (lane + 32 * j < entries) {
              const int64_t at = (kv * 4 + li) * p.nk + ent[j];
              ks[j] = __ldg(sp.k_scale + at);
              const float vs = __ldg(sp.v_scale + at);
              if (vs > 0.0f) {  // else f = 1: log2 f = +0
                const int nf = v_share_exponent(vs, vsmax);
                lf[j] = nf <= kMaxShareExponent ? -static_cast<float>(nf) : neg_inf();
              }
            }
          }
          bool all = tile_all_valid<KT>(p, plan, te);
          if (u_ring >= S) mbar_wait(bar_ek(s), use_parity);
          issue_boxes();
          // Every entry slot of the tile, past `entries` too (s_k 0, log2 f 0): the column pass below
          // reads the slot of each column, and the zero rows' logits must be 0 * s_k, not 0 *
          // stale bits.
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int e = lane + 32 * j;
            if (e < (KT >> lg)) sTab[s * KT + e] = make_float2(ks[j], lf[j]);
          }
          int32_t last = -1;
          if (!all) all = tile_token_list<KT>(p, plan, te, sTok + s * KT, last);
          __syncwarp();  // the entry table and the token list, before the column pass reads them
          // The column-pair tables (what the softmax reads per column, at fixed offsets).
          const float bias2 = level_log_bias(1 << li) * 1.4426950408889634f;
#pragma unroll
          for (int v = 0; v < 2; ++v) {
            const int pp = lane + 32 * v, c0 = 2 * pp;
            const float2 ea = sTab[s * KT + (c0 >> lg)], eb = sTab[s * KT + ((c0 + 1) >> lg)];
            float cb0 = bias2, cb1 = bias2;
            if (!all) {
              cb0 = sTok[s * KT + c0] >= 0 ? bias2 : neg_inf();
              cb1 = sTok[s * KT + c0 + 1] >= 0 ? bias2 : neg_inf();
            }
            sPair[s * (KT / 2) + pp] = make_float4(ea.x, eb.x, cb0 + ea.y, cb1 + eb.y);
          }
        } else {
          // Each entry's 1 / f = 2^n (n >= 0: f = s_v / s_v,max, both powers of two; an all-zero
          // block, scale 0, has f = 1) as e4m3 codes of the two bands: n <= 8 in band 0 as 2^n,
          // 9 <= n <= 23 in band 1 as 2^(n - 15); larger n in neither (the K warp drops those
          // blocks: bias -inf). Slots past `entries` take f = 1.
          uint32_t code[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int nf =
                lane + 32 * j < entries ? v_share_exponent(__ldg(sp.v_scale + (kv * 4 + li) * p.nk + ent[j]), vsmax) : 0;
            code[j] = nf <= 8 ? static_cast<uint32_t>(nf + 7) << 3
                              : nf <= kMaxShareExponent ? static_cast<uint32_t>(nf - 8) << 11 : 0u;
          }
          if (u_ring >= S) mbar_wait(bar_evr(s), use_parity);
          issue_boxes();
          // Per physical column of the tile (column 32 u + lane: its entry's codes).
#pragma unroll
          for (int u = 0; u < KT / 32; ++u)
            sVc[s * KT + u * 32 + lane] = static_cast<uint16_t>(column_entry_value(code, u, lg, lane));
        }
        if (loaded < KT) {  // rows past the stream (none of the boxes'): zeros (warp-uniform)
          warp_zero_bytes(dst, loaded * 128, KT * 128, lane);
          fence_proxy_async();
        }
        __syncwarp();
        mbar_arrive(bar);
      }
      if (vw) mbar_arrive(bar_qe(q));  // this lane's reads of the plan are done
      T0 += total;
    }
    return;
  }

  // ================================ consumers ================================
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Tr::kConsumerRegs));
  const int cw = wg - 1;
  const int ctid = tid - 128 * wg;
  const int g = lane >> 2, tq = lane & 3;
  const int wrow = cw * 64 + (warp & 3) * 16;
  constexpr float kLog2e = 1.4426950408889634f;
  const uint32_t q8_addr = smem_addr(smem + Tr::kOffQ8) + cw * 64 * 128;
  const Sw128Desc k_desc = sw128_desc_words(smem_addr(sK), 16, 1024);
  const Sw128Desc vt_desc = sw128_desc_words(smem_addr(sVt), 16, 1024);
  const Sw128Desc l_desc = sw128_desc_words(smem_addr(smem + Tr::kOffL), 16, 1024);
  unsigned char* sQ8 = smem + Tr::kOffQ8;

  float o[D / 2];
  int32_t si[KT / 2];
  float sc[KT / 2];
  uint32_t pf[KT / 32][4];
  float lt[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // a tile's l: rows g, g + 8 x columns 2 tq, 2 tq + 1
  float m_run[2], l_run[2];
  float qs_sl2 = 0.0f;  // s_q * scale * log2(e)

  auto issue_qk = [&](int s) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk) {
      const uint64_t da = sw128_desc(q8_addr + kk * 32, 16, 1024);
      Wgmma8<KT>::ss_s8(si, da, k_desc.at(s * static_cast<uint32_t>(Tr::kTile8) + kk * 32), kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int s) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KT / 32; ++kk) {
      Wgmma8<D>::rs_e4m3(o, pf[kk], vt_desc.at(s * static_cast<uint32_t>(Tr::kTile8) + kk * 32), 1);
      Wgmma8<8>::rs_e4m3(lt, pf[kk], l_desc.at(s * static_cast<uint32_t>(Tr::kLTab) + kk * 32), kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  // The tile's l (lt, band 0 + 2^15 band 1; only the quad's first lane has non-zero columns) into
  // the running sum, at the running maximum of the tile after it (alpha).
  auto add_tile_l = [&](const float alpha[2]) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) l_run[rr] = fmaf(alpha[rr], fmaf(lt[2 * rr + 1], 32768.0f, lt[2 * rr]), l_run[rr]);
  };
  // Logits u = z + log2 f, the running max m of u, and the weights w = 2^(z - m) * 448 f (in sc;
  // the tensor cores sum l from them); returns the rescale factor of the old state per row.
  auto softmax = [&](int s, float alpha[2]) {
    // The thread's columns of block nn are 2 tq and 2 tq + 1: column pair nn * 4 + tq.
    const float4* pa = sPair + s * (KT / 2) + tq;  // {s_k, s_k, bias + log2 f, bias + log2 f}
    // Each row's maximum in four partial maxima (four chains of 8, not one of 32).
    float mp[2][4] = {{neg_inf(), neg_inf(), neg_inf(), neg_inf()}, {neg_inf(), neg_inf(), neg_inf(), neg_inf()}};
#pragma unroll
    for (int nn = 0; nn < KT / 8; ++nn) {
      const float4 a = pa[nn * 4];
      const float cs0 = qs_sl2 * a.x, cs1 = qs_sl2 * a.y;
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        sc[nn * 4 + 2 * rr] = fmaf(small_int_to_float(si[nn * 4 + 2 * rr]), cs0, a.z);
        sc[nn * 4 + 2 * rr + 1] = fmaf(small_int_to_float(si[nn * 4 + 2 * rr + 1]), cs1, a.w);
        mp[rr][nn & 3] = fmaxf(mp[rr][nn & 3], fmaxf(sc[nn * 4 + 2 * rr], sc[nn * 4 + 2 * rr + 1]));
      }
    }
    float mx[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) mx[rr] = fmaxf(fmaxf(mp[rr][0], mp[rr][1]), fmaxf(mp[rr][2], mp[rr][3]));
    float m_use[2];
    update_row_max(mx, m_run, l_run, alpha, m_use);
    // The weight 2^(z - m) * f * 448 = 2^(u - (m - log2 448)), at most 448 (u <= m).
    constexpr float kLog2E4m3Max = 8.80735492205760410744f;
    m_use[0] -= kLog2E4m3Max;
    m_use[1] -= kLog2E4m3Max;
    // Weights of the thread's two columns of block nn in one e4m3x2 code per row (kept in
    // sc[nn * 4 + 2 * rr] as bits; the A fragment is made of these pairs).
#pragma unroll
    for (int nn = 0; nn < KT / 8; ++nn) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const float x0 = sc[nn * 4 + 2 * rr] - m_use[rr], x1 = sc[nn * 4 + 2 * rr + 1] - m_use[rr];
        const bool fma_pipe = nn % 8 == 7;
        const float w0 = fma_pipe ? exp2_fma_pipe(x0) : fast_exp2(x0);
        const float w1 = fma_pipe ? exp2_fma_pipe(x1) : fast_exp2(x1);
        sc[nn * 4 + 2 * rr] = __uint_as_float(e4m3x2(w0, w1));
      }
    }
  };
  auto rescale_and_pack = [&](const float alpha[2]) {
    // Once a row's maximum settles, alpha is exactly 1 and the rescale changes no bit: skipped
    // when that holds for every row of the warp (a warp-uniform branch).
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int j = 0; j < D / 2; ++j) o[j] *= alpha[(j >> 1) & 1];
    }
    // k32 step kk: a0 = row g, logical keys 4tq..4tq+3 = physical n8 blocks 4kk, 4kk+1 at
    // columns 2tq, 2tq+1; a2 the same from blocks 4kk+2, 4kk+3; a1 / a3 row g + 8.
#pragma unroll
    for (int kk = 0; kk < KT / 32; ++kk) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int b0 = (4 * kk + 2 * hh) * 4, b1 = (4 * kk + 2 * hh + 1) * 4;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr)
          pf[kk][2 * hh + rr] = __float_as_uint(sc[b0 + 2 * rr]) | __float_as_uint(sc[b1 + 2 * rr]) << 16;
      }
    }
  };
  auto release = [&](uint32_t bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };

  uint32_t T0 = 0;
  int n = 0;
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x, ++n) {
    int64_t i, h, b;
    decode(r, i, h, b);
    const int64_t x0 = i * BM;
    const int64_t kv = kv_of(b, h);
    const int q = n & 1;
    T* sQ = q_slot(q);
    float* qinfo = sQinfo + q * Tr::kQinfoFloats;
    // The thread's 16 channels of K's mean: the same in its four Q units below (unit % 8 does not
    // change with 128 j), loaded once per row and before the wait for Q.
    float km[16];
    {
      const float4* km4 = reinterpret_cast<const float4*>(sp.k_mean + kv * D + (ctid % 8) * 16);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float4 m4 = __ldg(km4 + e);
        km[4 * e] = m4.x;
        km[4 * e + 1] = m4.y;
        km[4 * e + 2] = m4.z;
        km[4 * e + 3] = m4.w;
      }
    }
    mbar_wait(bar_qf(q), (n >> 1) & 1);
    const int32_t total = plan_of(q)->total;

    // ---- Q -> int8: units (row, 16 channels) of this warpgroup's 64 rows, 4 per thread ----
    // A unit's amax is the largest |x| of its packed pairs (sign bits cleared, HMNMX2 with NaN
    // propagation: exact), which also tells whether the unit holds a NaN or +-inf (then the
    // rule's value-by-value amax, which skips them, and the general int8 conversion); a unit of
    // finite values is converted by the in-range form (|x| <= the block's amax).
    {
      auto q_raw = [&](int row, int c16, uint4 (&w)[2]) {
        w[0] = *reinterpret_cast<const uint4*>(sQ + tile_off<BM>(row, 2 * c16));
        w[1] = *reinterpret_cast<const uint4*>(sQ + tile_off<BM>(row, 2 * c16 + 1));
      };
      float amax = 0.0f;
      uint32_t nonfinite = 0;  // bit j: unit j holds a NaN or +-inf
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int unit = ctid + 128 * j, row = cw * 64 + unit / 8, c16 = unit % 8;
        uint4 w[2];
        q_raw(row, c16, w);
        const uint32_t words[8] = {w[0].x, w[0].y, w[0].z, w[0].w, w[1].x, w[1].y, w[1].z, w[1].w};
        uint32_t m2 = words[0] & 0x7fff7fffu;
#pragma unroll
        for (int e = 1; e < 8; ++e) m2 = Elem<T>::max2_nan(m2, words[e] & 0x7fff7fffu);
        const T* mh = reinterpret_cast<const T*>(&m2);
        const float m0 = Elem<T>::to_float(mh[0]), m1 = Elem<T>::to_float(mh[1]);
        float x[16];
        unpack8<T>(w[0], x);
        unpack8<T>(w[1], x + 8);
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 16; ++e) dot = fmaf(x[e], km[e], dot);
        // a NaN or +-inf value: the oracle's row is NaN (its int8 Q is NaN there)
        int bad = !(m0 <= 3.402823466e38f && m1 <= 3.402823466e38f);
        if (bad) {
          nonfinite |= 1u << j;
#pragma unroll
          for (int e = 0; e < 16; ++e) amax = fp8_amax(amax, x[e]);  // NaN and +-inf do not count
        } else {
          amax = fmaxf(amax, fmaxf(m0, m1));
        }
        // The row's 8 units are 8 consecutive lanes.
        dot += __shfl_xor_sync(0xffffffffu, dot, 1);
        dot += __shfl_xor_sync(0xffffffffu, dot, 2);
        dot += __shfl_xor_sync(0xffffffffu, dot, 4);
        bad |= __shfl_xor_sync(0xffffffffu, bad, 1);
        bad |= __shfl_xor_sync(0xffffffffu, bad, 2);
        bad |= __shfl_xor_sync(0xffffffffu, bad, 4);
        // q . k_mean is NaN for such a row: the epilogue makes its lse and its output NaN.
        if (c16 == 0) qinfo[8 + row] = bad ? __int_as_float(0x7fc00000) : dot;
      }
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 8));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 16));
      if (lane == 0) qinfo[warp - 4] = amax;
      named_bar_sync(1, 256);  // both warpgroups' amaxes (one query block)
      float qa = qinfo[0];
#pragma unroll
      for (int w = 1; w < 8; ++w) qa = fmaxf(qa, qinfo[w]);
      const Fp8Scale qsc = fp8_scale(qa, kInt8Max);
      qs_sl2 = qsc.s * p.scale * kLog2e;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int unit = ctid + 128 * j, row = cw * 64 + unit / 8, c16 = unit % 8;
        uint4 w[2];
        q_raw(row, c16, w);
        float x[16];
        unpack8<T>(w[0], x);
        unpack8<T>(w[1], x + 8);
        *reinterpret_cast<uint4*>(sQ8 + off8(row, c16 * 16)) =
            nonfinite >> j & 1u ? int8_quantize_x16(x, qsc.inv) : int8_quantize_x16_in_range(x, qsc.inv);
      }
      fence_proxy_async();
      named_bar_sync(2 + cw, 128);  // this warpgroup's Q8 rows are complete
    }

#pragma unroll
    for (int j = 0; j < D / 2; ++j) o[j] = 0.0f;
    m_run[0] = m_run[1] = neg_inf();
    l_run[0] = l_run[1] = 0.0f;

    if (total > 0) {
      float alpha[2];
      const int s0 = static_cast<int>(T0 % S);
      mbar_wait(bar_k(s0), (T0 / S) & 1);
      issue_qk(s0);
      wgmma_wait<0>();
      fence_regs(si);
      softmax(s0, alpha);
      mbar_arrive(bar_ek(s0));
      rescale_and_pack(alpha);
      for (int32_t t = 1; t < total; ++t) {
        const uint32_t u = T0 + t;
        const int s = static_cast<int>(u % S), sp_ = static_cast<int>((u - 1) % S);
        mbar_wait(bar_k(s), (u / S) & 1);
        fence_regs(o);
        fence_regs(pf);
        fence_regs(lt);
        issue_qk(s);
        mbar_wait(bar_vt(sp_), ((u - 1) / S) & 1);
        issue_pv(sp_);
        wgmma_wait<1>();
        fence_regs(si);
        softmax(s, alpha);
        mbar_arrive(bar_ek(s));
        wgmma_wait<0>();
        fence_regs(o);
        fence_regs(pf);
        fence_regs(lt);
        release(bar_ev(sp_));
        add_tile_l(alpha);
        rescale_and_pack(alpha);
      }
      const uint32_t ul = T0 + total - 1;
      const int sl = static_cast<int>(ul % S);
      mbar_wait(bar_vt(sl), (ul / S) & 1);
      fence_regs(o);
      fence_regs(pf);
      fence_regs(lt);
      issue_pv(sl);
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(lt);
      release(bar_ev(sl));
      const float one[2] = {1.0f, 1.0f};
      add_tile_l(one);
    }
    T0 += total;

    // Epilogue: out = O * s_v,max / 448 / l; lse = m ln2 + ln l + (q . k_mean) * scale, where l
    // is the sum of w / f so far, / 448.
    float inv[2];
    l_run[0] *= 1.0f / kE4m3Max;
    l_run[1] *= 1.0f / kE4m3Max;
    finish_row_sums(p, l_run, m_run, v_smax_of(kv) / kE4m3Max, inv, b, h, x0, wrow, g, tq,
                    [&](int rw) { return qinfo[8 + rw] * p.scale; });
#pragma unroll
    for (int rr = 0; rr < 2; ++rr)  // a non-finite Q value: a NaN row, unless the row is empty
      if (inv[rr] != 0.0f && isnan(qinfo[8 + wrow + g + rr * 8])) inv[rr] = __int_as_float(0x7fc00000);
    stage_out_rows<T, BM, D>(sQ, o, inv, wrow, g, tq);
    named_bar_sync(2 + cw, 128);
    store_out_rows<T, BM, D>(p, sQ, b, h, x0, cw, ctid);
    fence_proxy_async();
    mbar_arrive(bar_qe(q));
  }
#endif  // PSA_SM90_DEVICE
}

}  // namespace sm90
}  // namespace gpu
}  // namespace psa
