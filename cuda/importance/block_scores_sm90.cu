// cuda/importance/block_scores_sm90.cu -- importance stage, launcher layer of the Hopper score
// kernel (block_scores_kernel_sm90.cuh): K tensor maps, stage schedule, launch, and the
// availability query. The kernel bodies exist only in the sm_90a pass of this file; the sm_80
// pass compiles empty kernels that score_sm90_available() keeps from ever being launched.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/importance/block_scores_kernel_sm90.cuh"
#include "cuda/importance/importance_cuda.h"

namespace psa {
namespace gpu {
namespace score_gemm {
namespace {

using sm90::encode_tiled;

// K [B][Hkv][len_k][D] seen as [B][Hkv][nk_full][block_n][D]: coordinate (column, in-block
// offset, block, kv head, batch); boxes of 64 columns x 1 offset x `blocks` blocks. Rows of the
// partial last block are not part of the view (TMA cannot clamp them). False when TMA cannot
// describe it.
bool encode_k_map(CUtensorMap* m, bool f16, const void* k, int64_t batch, int64_t heads_kv, int64_t sb, int64_t sh,
                  int64_t sl, int64_t d, int64_t block_n, int64_t nk_full, int blocks) {
  if (nk_full < 1 || nk_full > INT32_MAX || heads_kv > INT32_MAX || batch > INT32_MAX ||
      reinterpret_cast<uintptr_t>(k) % 16 != 0 || sb < 0 || sh < 0 || sl < d || (sl * 2) % 16 != 0 ||
      (sh * 2) % 16 != 0 || (sb * 2) % 16 != 0)
    return false;
  // A dimension of extent 1 is never stepped: its stride (any value for a caller's tensor) is
  // replaced by one past the dimensions below it.
  if (heads_kv == 1) sh = block_n * nk_full * sl;
  if (batch == 1) sb = heads_kv * sh;
  const cuuint64_t dims[5] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(block_n),
                              static_cast<cuuint64_t>(nk_full), static_cast<cuuint64_t>(heads_kv),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[4] = {static_cast<cuuint64_t>(sl * 2), static_cast<cuuint64_t>(block_n * sl * 2),
                                 static_cast<cuuint64_t>(sh * 2), static_cast<cuuint64_t>(sb * 2)};
  const cuuint32_t box[5] = {64, 1, static_cast<cuuint32_t>(blocks), 1, 1};
  // d128 rows are 256 bytes (two 64-column boxes): promote to 256 B so the second box hits L2.
  const CUtensorMapL2promotion promo = d == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  return encode_tiled(m, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, k, dims, strides,
                      box, CU_TENSOR_MAP_SWIZZLE_128B, promo);
}

// The 8-bit rule's K (Fp8KvOut::k8[0], [B*Hkv][len_k][128] bytes) seen as [B*Hkv][nk_full]
// [block_n][128]: coordinate (byte, in-block offset, block, kv head); boxes of 128 bytes x 1
// offset x `blocks` blocks, 128-byte swizzle. False when TMA cannot describe it.
bool encode_k8_map(CUtensorMap* m, const void* k8, int64_t heads, int64_t len_k, int64_t block_n, int64_t nk_full,
                   int blocks) {
  constexpr int64_t d = 128;
  if (nk_full < 1 || nk_full > INT32_MAX || heads < 1 || heads > INT32_MAX ||
      reinterpret_cast<uintptr_t>(k8) % 16 != 0)
    return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(block_n),
                              static_cast<cuuint64_t>(nk_full), static_cast<cuuint64_t>(heads)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(block_n * d),
                                 static_cast<cuuint64_t>(len_k * d)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(d), 1, static_cast<cuuint32_t>(blocks), 1};
  return encode_tiled(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, k8, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

// The scratch [slots][nk][256] fp32 seen by the finisher warps: coordinate (row, key block,
// slot), boxes of q_count rows x 32 blocks, swizzled by the box row's width (piece_chunk_xor:
// 128, 64, 32 bytes; 16-byte rows need none), zero fill past nk. False when TMA cannot describe
// it.
bool encode_scratch_map(CUtensorMap* m, float* scratch, int64_t nk, int64_t slots, int q_count) {
  if (nk < 1 || nk > INT32_MAX || slots < 1 || slots > INT32_MAX || q_count < 4 || q_count > 32 ||
      (q_count & (q_count - 1)) != 0 || reinterpret_cast<uintptr_t>(scratch) % 16 != 0)
    return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kScoreTileRows), static_cast<cuuint64_t>(nk),
                              static_cast<cuuint64_t>(slots)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(kScoreTileRows * sizeof(float)),
                                 static_cast<cuuint64_t>(score_scratch_slot_bytes(nk))};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(q_count), 32, 1};
  const CUtensorMapSwizzle sw = q_count == 32   ? CU_TENSOR_MAP_SWIZZLE_128B
                                : q_count == 16 ? CU_TENSOR_MAP_SWIZZLE_64B
                                : q_count == 8  ? CU_TENSOR_MAP_SWIZZLE_32B
                                                : CU_TENSOR_MAP_SWIZZLE_NONE;
  return encode_tiled(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, scratch, dims, strides, box, sw,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

// Stage order of every CTA tile (see Sm90Schedule): the last chunk takes the narrowest width in
// 8/16/32/64 that covers its blocks, so at most 7 of its blocks are padding (CogVideoX: 138 full
// blocks = 64 + 64 + 10 -> the last chunk is 16 wide: 16 offsets x 8 per stage, not 64 x 2).
Sm90Schedule make_schedule(int64_t nk, int64_t nk_full, int32_t kc) {
  Sm90Schedule s{};
  s.has_tail = nk > nk_full ? 1 : 0;
  s.nch = static_cast<int32_t>((nk_full + 63) / 64);
  s.ntf = (kc + 1) / 2;
  if (s.nch > 0) {
    const int64_t rem = nk_full - static_cast<int64_t>(s.nch - 1) * 64;  // 1..64
    s.w_last = rem > 32 ? 0 : rem > 16 ? 1 : rem > 8 ? 2 : 3;
    const int32_t spt = 2 << s.w_last;
    s.nt_last = (kc + spt - 1) / spt;
    s.total = s.has_tail + (s.nch - 1) * s.ntf + s.nt_last;
  } else {
    s.total = s.has_tail;
  }
  return s;
}

template <typename T, int D, bool kI8>
cudaError_t launch_sm90(const GemmScoreParams& p, const ScoreArgs& a, int64_t slots, cudaStream_t stream) {
  using Tr = Sm90ScoreTraits<D, kI8>;
  Sm90ScoreParams sp{};
  sp.g = p;
  sp.k_count = a.k_count;
  const int64_t nk_full = a.dims.len_k / a.dims.block_n;
  if (nk_full > INT32_MAX / 2) return cudaErrorNotSupported;
  sp.nk_full = static_cast<int32_t>(nk_full);
  sp.sched = make_schedule(p.nk, nk_full, a.k_count);
  if (kI8) {
    sp.k8 = static_cast<const int8_t*>(a.k8);
    sp.k_scale = a.k_scale;
    sp.ks_head = 4 * p.nk;
  }
  if (nk_full > 0 && kI8) {
    for (int w = 0; w < 4; ++w)
      if (!encode_k8_map(&sp.kmap[w], a.k8, a.dims.batch * a.dims.heads_kv, a.dims.len_k, a.dims.block_n, nk_full,
                         64 >> w))
        return cudaErrorNotSupported;
  } else if (nk_full > 0) {
    for (int w = 0; w < 4; ++w)
      if (!encode_k_map(&sp.kmap[w], std::is_same<T, __half>::value, a.k, a.dims.batch, a.dims.heads_kv, p.k_sb,
                        p.k_sh, p.k_sl, D, a.dims.block_n, nk_full, 64 >> w))
        return cudaErrorNotSupported;
  }
  // The tie-run tracking only where it is used (finish_tile's kTrack).
  auto kernel = p.ties != nullptr && p.tie_run_min > 0 ? block_scores_sm90_kernel<T, D, true, kI8>
                                                       : block_scores_sm90_kernel<T, D, false, kI8>;
  int sms = 0;
  cudaError_t e = sm90::current_sm_count(&sms);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Tr::kSmem));
  if (e != cudaSuccess) return e;
  // Two scratch slots per CTA (CTA c's second slot, c + grid, is used only when c + grid < tiles).
  const int64_t grid = std::min(std::min(p.tiles, std::max<int64_t>(slots / 2, 1)), static_cast<int64_t>(sms));
  if (2 * grid > slots && p.tiles > grid) return cudaErrorNotSupported;
  // The finisher warps read the scratch through TMA when q_count is 4..32 (smap); then finishing
  // on them pays at every measured shape (PERF_NOTES.md, "Importance: the finisher warps fed by
  // TMA": 0.54 against 0.64 ms at 8 key samples x d128, where their global loads lost). Without
  // TMA they pay when a tile's sweep (k_count * D multiply-adds per row and key block)
  // outweighs its finish (q_count / 4 loads per query and key block): v4, faster at 32 key
  // samples x d64/d128, slower at 8 x d128.
  const bool smap = encode_scratch_map(&sp.smap, p.scratch, p.nk, std::min(slots, p.tiles), p.q_count);
  sp.overlap = a.finish_overlap >= 0 ? a.finish_overlap
                                     : (smap || static_cast<int64_t>(a.k_count) * D >= 2048 ? 1 : 0);
  sp.fin_tma = sp.overlap && smap ? 1 : 0;
  kernel<<<static_cast<unsigned>(grid), Tr::kThreads, Tr::kSmem, stream>>>(sp);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_scores_sm90(const GemmScoreParams& p, const ScoreArgs& a, int64_t slots, cudaStream_t stream) {
  const bool f16 = a.dtype == PSA_DTYPE_F16;
  if (a.k8 != nullptr)
    return a.dims.head_dim != 128 ? cudaErrorNotSupported
           : f16                  ? launch_sm90<__half, 128, true>(p, a, slots, stream)
                                  : launch_sm90<__nv_bfloat16, 128, true>(p, a, slots, stream);
  if (a.dims.head_dim == 64) return f16 ? launch_sm90<__half, 64, false>(p, a, slots, stream)
                                   : launch_sm90<__nv_bfloat16, 64, false>(p, a, slots, stream);
  if (a.dims.head_dim == 128) return f16 ? launch_sm90<__half, 128, false>(p, a, slots, stream)
                                    : launch_sm90<__nv_bfloat16, 128, false>(p, a, slots, stream);
  return cudaErrorNotSupported;
}

}  // namespace score_gemm

bool score_sm90_available() {
  return sm90::kernel_has_sm90_image(
      reinterpret_cast<const void*>(score_gemm::block_scores_sm90_kernel<__nv_bfloat16, 128, false, false>));
}

}  // namespace gpu
}  // namespace psa
