// tests/methods/rf_v2_order_test.cpp -- rf_v2 token order (rainfusion-adabsa spec 2.2): the
// closed form rf_v2_newpos against an independent model of the upstream reshapes (a tiny
// n-d array with reshape / permute / slice / concat), and the sequence plan's round trip
// with text first, last or absent. Host only.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "config/config.h"
#include "methods/rf_v2_spec.h"
#include "rearrange/rearrange.h"

namespace {

// Row-major n-d array of int64 "token ids", enough to replay the upstream einops/torch
// calls: reshape (of a contiguous array), permute, slice along one axis, concat.
struct NdArray {
  std::vector<int64_t> shape;
  std::vector<int64_t> data;

  static NdArray arange(std::vector<int64_t> shape) {
    NdArray a;
    a.shape = std::move(shape);
    a.data.resize(static_cast<size_t>(a.numel()));
    std::iota(a.data.begin(), a.data.end(), int64_t{0});
    return a;
  }
  int64_t numel() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
  }
  std::vector<int64_t> strides() const {
    std::vector<int64_t> s(shape.size(), 1);
    for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
    return s;
  }
  // Multi-index of flat position `flat` in `shape`.
  static std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& shape) {
    std::vector<int64_t> idx(shape.size());
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
      idx[i] = shape[i] ? flat % shape[i] : 0;
      flat = shape[i] ? flat / shape[i] : 0;
    }
    return idx;
  }
  NdArray reshape(std::vector<int64_t> s) const {
    NdArray r;
    r.shape = std::move(s);
    EXPECT_EQ(r.numel(), numel());
    r.data = data;
    return r;
  }
  // out[i_0..i_n] = this[i at position perm^-1]: out.shape[k] = shape[perm[k]].
  NdArray permute(const std::vector<int>& perm) const {
    NdArray r;
    for (int p : perm) r.shape.push_back(shape[static_cast<size_t>(p)]);
    r.data.resize(data.size());
    const std::vector<int64_t> st = strides();
    for (int64_t f = 0; f < r.numel(); ++f) {
      const std::vector<int64_t> oi = unravel(f, r.shape);
      int64_t src = 0;
      for (size_t k = 0; k < perm.size(); ++k) src += oi[k] * st[static_cast<size_t>(perm[k])];
      r.data[static_cast<size_t>(f)] = data[static_cast<size_t>(src)];
    }
    return r;
  }
  // this[..., lo:hi, ...] along `axis`.
  NdArray slice(int axis, int64_t lo, int64_t hi) const {
    NdArray r;
    r.shape = shape;
    r.shape[static_cast<size_t>(axis)] = hi - lo;
    const std::vector<int64_t> st = strides();
    for (int64_t f = 0; f < r.numel(); ++f) {
      std::vector<int64_t> i = unravel(f, r.shape);
      i[static_cast<size_t>(axis)] += lo;
      int64_t src = 0;
      for (size_t k = 0; k < i.size(); ++k) src += i[k] * st[k];
      r.data.push_back(data[static_cast<size_t>(src)]);
    }
    return r;
  }
  // Concatenation along `axis` (all other extents equal).
  static NdArray cat(const std::vector<NdArray>& parts, int axis) {
    NdArray r;
    r.shape = parts[0].shape;
    r.shape[static_cast<size_t>(axis)] = 0;
    for (const NdArray& p : parts) r.shape[static_cast<size_t>(axis)] += p.shape[static_cast<size_t>(axis)];
    r.data.resize(static_cast<size_t>(r.numel()));
    const std::vector<int64_t> st = r.strides();
    int64_t base = 0;
    for (const NdArray& p : parts) {
      for (int64_t f = 0; f < p.numel(); ++f) {
        std::vector<int64_t> i = unravel(f, p.shape);
        i[static_cast<size_t>(axis)] += base;
        int64_t dst = 0;
        for (size_t k = 0; k < i.size(); ++k) dst += i[k] * st[k];
        r.data[static_cast<size_t>(dst)] = p.data[static_cast<size_t>(f)];
      }
      base += p.shape[static_cast<size_t>(axis)];
    }
    return r;
  }
};

// 'f (hn 8) (wn 8) -> f (hn wn 8 8)' on a [F, H8, W8] array, flattened per frame.
NdArray tile_frames(const NdArray& x) {
  const int64_t f = x.shape[0], h = x.shape[1], w = x.shape[2];
  return x.reshape({f, h / 8, 8, w / 8, 8}).permute({0, 1, 3, 2, 4}).reshape({f, h * w});
}

// Model of the upstream token reorder (post-2b40267): returns order[p] = raster index of
// the video token placed at reordered position p.
std::vector<int64_t> upstream_order_model(int64_t t, int64_t h, int64_t w) {
  const NdArray video = NdArray::arange({t, h, w});
  const int64_t h8 = h / 8 * 8, w8 = w / 8 * 8;
  if (h8 == h && w8 == w) return tile_frames(video).data;
  // Unaligned: frame 0 raw, later frames as [tiled core, bottom strip, right strip].
  const NdArray first = video.slice(0, 0, 1).reshape({1, h * w});
  if (t == 1) return first.data;
  const NdArray rest = video.slice(0, 1, t);
  std::vector<NdArray> regions;
  if (h8 > 0 && w8 > 0) regions.push_back(tile_frames(rest.slice(1, 0, h8).slice(2, 0, w8)));
  if (h8 < h) regions.push_back(rest.slice(1, h8, h).reshape({t - 1, (h - h8) * w}));
  if (w8 < w && h8 > 0) regions.push_back(rest.slice(1, 0, h8).slice(2, w8, w).reshape({t - 1, h8 * (w - w8)}));
  const NdArray later = NdArray::cat(regions, 1).reshape({1, (t - 1) * h * w});
  return NdArray::cat({first, later}, 1).data;
}

struct Grid {
  int64_t t, h, w;
};
const Grid kGrids[] = {{3, 40, 80}, {3, 30, 52}, {2, 21, 32}, {2, 24, 45}, {21, 45, 80}, {13, 30, 45},
                       {1, 64, 64}, {4, 8, 8},   {2, 7, 5},   {3, 16, 9},  {1, 30, 52}};

std::string name(const Grid& g) {
  return std::to_string(g.t) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w);
}

TEST(RfV2Order, ClosedFormMatchesUpstreamReshapeModel) {
  for (const Grid& g : kGrids) {
    SCOPED_TRACE(name(g));
    const std::vector<int64_t> order = upstream_order_model(g.t, g.h, g.w);
    ASSERT_EQ(static_cast<int64_t>(order.size()), g.t * g.h * g.w);
    int64_t mismatches = 0;
    for (int64_t p = 0; p < static_cast<int64_t>(order.size()); ++p) {
      const int64_t r = order[static_cast<size_t>(p)];
      const int64_t f = r / (g.h * g.w), y = r / g.w % g.h, x = r % g.w;
      if (psa::rf_v2_newpos(f, y, x, g.h, g.w) != p) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(RfV2Order, FirstFrameIsThePrefix) {
  // Both the aligned and the unaligned order keep frame f inside [f*h*w, (f+1)*h*w); the
  // first-frame sink relies on it.
  for (const Grid& g : kGrids) {
    SCOPED_TRACE(name(g));
    for (int64_t f = 0; f < g.t; ++f)
      for (int64_t y = 0; y < g.h; ++y)
        for (int64_t x = 0; x < g.w; ++x) {
          const int64_t p = psa::rf_v2_newpos(f, y, x, g.h, g.w);
          ASSERT_GE(p, f * g.h * g.w);
          ASSERT_LT(p, (f + 1) * g.h * g.w);
        }
  }
}

psa::VideoGeometry geometry(const Grid& g, int64_t text, psa_text_position pos) {
  psa::VideoGeometry geo;
  geo.set = true;
  geo.t = g.t;
  geo.h = g.h;
  geo.w = g.w;
  geo.text_length = text;
  geo.text_position = text > 0 ? pos : PSA_TEXT_NONE;
  return geo;
}

TEST(RfV2Order, SequencePlanRoundTripsWithAndWithoutText) {
  for (const Grid& g : kGrids) {
    for (psa_text_position pos : {PSA_TEXT_NONE, PSA_TEXT_FIRST, PSA_TEXT_LAST}) {
      for (bool use_rearrange : {false, true}) {  // rf_v2 ignores the flag
        const int64_t text = pos == PSA_TEXT_NONE ? 0 : 77;
        SCOPED_TRACE(name(g) + " text " + std::to_string(pos) + " use_rearrange " +
                     std::to_string(use_rearrange));
        psa::Config cfg;
        cfg.method = PSA_METHOD_RF_V2;
        cfg.use_rearrange = use_rearrange;
        const int64_t nv = g.t * g.h * g.w, n = nv + text;
        psa::SequencePlan plan;
        ASSERT_EQ(psa::build_sequence_plan(cfg, geometry(g, text, pos), n, &plan), PSA_OK);
        ASSERT_EQ(static_cast<int64_t>(plan.src.size()), n);
        EXPECT_EQ(plan.frame_tokens, g.h * g.w);
        // A permutation: every caller index exactly once.
        std::vector<int> seen(static_cast<size_t>(n), 0);
        for (int64_t s : plan.src) {
          ASSERT_GE(s, 0);
          ASSERT_LT(s, n);
          ++seen[static_cast<size_t>(s)];
        }
        for (int c : seen) ASSERT_EQ(c, 1);
        // Video first in rf_v2 order, text last in caller order.
        const int64_t video0 = pos == PSA_TEXT_FIRST ? text : 0;
        const int64_t text0 = pos == PSA_TEXT_FIRST ? 0 : nv;
        const std::vector<int64_t> order = upstream_order_model(g.t, g.h, g.w);
        for (int64_t p = 0; p < nv; ++p)
          ASSERT_EQ(plan.src[static_cast<size_t>(p)], video0 + order[static_cast<size_t>(p)]) << p;
        for (int64_t j = 0; j < text; ++j)
          ASSERT_EQ(plan.src[static_cast<size_t>(nv + j)], text0 + j);
        EXPECT_EQ(plan.text_begin, text > 0 ? nv : 0);
        EXPECT_EQ(plan.text_end, text > 0 ? n : 0);
        // Gather then scatter restores the caller's sequence.
        std::vector<int64_t> x(static_cast<size_t>(n)), xr(static_cast<size_t>(n)),
            back(static_cast<size_t>(n), -1);
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 5000 + i;
        for (int64_t i = 0; i < n; ++i) xr[static_cast<size_t>(i)] = x[static_cast<size_t>(plan.src[static_cast<size_t>(i)])];
        for (int64_t i = 0; i < n; ++i) back[static_cast<size_t>(plan.src[static_cast<size_t>(i)])] = xr[static_cast<size_t>(i)];
        EXPECT_EQ(back, x);
      }
    }
  }
}

TEST(RfV2Order, AdaBsaPlanIsIdentityWhateverUseRearrange) {
  psa::Config cfg;
  cfg.method = PSA_METHOD_ADA_BSA;
  cfg.use_rearrange = true;
  psa::SequencePlan plan;
  ASSERT_EQ(psa::build_sequence_plan(cfg, geometry({2, 8, 16}, 30, PSA_TEXT_FIRST), 286, &plan),
            PSA_OK);
  EXPECT_TRUE(plan.src.empty());
  EXPECT_EQ(plan.text_begin, 0);
  EXPECT_EQ(plan.text_end, 30);
}

TEST(RfV2Order, KeepCountMatchesUpstreamDoubleArithmetic) {
  EXPECT_EQ(psa::rf_v2_keep_count(10, 0.0), 10);
  EXPECT_EQ(psa::rf_v2_keep_count(10, 0.5), 5);
  EXPECT_EQ(psa::rf_v2_keep_count(10, 0.8), 2);   // 10 * 0.19999999999999996 -> 2
  EXPECT_EQ(psa::rf_v2_keep_count(10, 0.7), 4);   // 10 * 0.30000000000000004 -> 4, as Python
  EXPECT_EQ(psa::rf_v2_keep_count(591, 0.8), 119);
  EXPECT_EQ(psa::rf_v2_keep_count(7, 0.999999), 1);  // never 0 below sparsity 1
  EXPECT_EQ(psa::rf_v2_sink_blocks(45 * 80, 600), 29);
  EXPECT_EQ(psa::rf_v2_sink_blocks(128, 600), 1);
  EXPECT_EQ(psa::rf_v2_sink_blocks(30 * 52, 3), 3);  // clamped to nb
}

}  // namespace
