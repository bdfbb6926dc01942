// rearrange/gilbert.cpp -- rearrange stage, host meaning: the 3-D generalised Hilbert curve
// of spec 7.1, written to match the reference point for point. No CUDA, no I/O, no error
// recording (inputs are checked by the callers).
#include <cstdint>
#include <vector>

#include "rearrange/rearrange.h"

namespace psa {
namespace {

// Integer 3-vector. Every axis vector passed to gen() has exactly one non-zero component.
struct V3 {
  int64_t x, y, z;
};
V3 operator+(V3 a, V3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
V3 operator-(V3 a, V3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
V3 operator-(V3 a) { return {-a.x, -a.y, -a.z}; }

int64_t sgn(int64_t v) { return (v > 0) - (v < 0); }
V3 unit(V3 v) { return {sgn(v.x), sgn(v.y), sgn(v.z)}; }
int64_t length(V3 v) {
  const int64_t s = v.x + v.y + v.z;
  return s < 0 ? -s : s;
}

// Python `//` by 2. C++ `/` truncates toward zero, which differs for odd negative values and
// changes the curve on 209 of the 1,159 reference-checked grid sizes (spec 7.1).
int64_t floor_half(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }
V3 half(V3 v) { return {floor_half(v.x), floor_half(v.y), floor_half(v.z)}; }

class Curve {
 public:
  Curve(int64_t W, int64_t H, std::vector<int64_t>* out) : W_(W), H_(H), out_(out) {}

  // p = start corner; a = main axis; b, c = side axes. Recursion depth is O(log max(W,H,D)):
  // every call either emits a run or halves at least one extent.
  void gen(V3 p, V3 a, V3 b, V3 c) {
    const int64_t w = length(a), h = length(b), d = length(c);
    // An empty box emits nothing. The reference never reaches one on checked sizes; the guard
    // only keeps a malformed call from recursing without end.
    if (w == 0 || h == 0 || d == 0) return;
    if (h == 1 && d == 1) {
      run(p, unit(a), w);
      return;
    }
    if (w == 1 && d == 1) {
      run(p, unit(b), h);
      return;
    }
    if (w == 1 && h == 1) {
      run(p, unit(c), d);
      return;
    }

    const V3 ua = unit(a), ub = unit(b), uc = unit(c);
    V3 a2 = half(a), b2 = half(b), c2 = half(c);
    // Prefer even sub-lengths so the sub-curves can join with unit steps.
    if (length(a2) % 2 == 1 && w > 2) a2 = a2 + ua;
    if (length(b2) % 2 == 1 && h > 2) b2 = b2 + ub;
    if (length(c2) % 2 == 1 && d > 2) c2 = c2 + uc;

    if (2 * w > 3 * h && 2 * w > 3 * d) {
      gen(p, a2, b, c);
      gen(p + a2, a - a2, b, c);
    } else if (3 * h > 4 * d) {
      gen(p, b2, c, a2);
      gen(p + b2, a, b - b2, c);
      gen(p + (a - ua) + (b2 - ub), -b2, c, -(a - a2));
    } else if (3 * d > 4 * h) {
      gen(p, c2, a2, b);
      gen(p + c2, a, b, c - c2);
      gen(p + (a - ua) + (c2 - uc), -c2, -(a - a2), b);
    } else {
      gen(p, b2, c2, a2);
      gen(p + b2, c, a2, b - b2);
      gen(p + (b2 - ub) + (c - uc), a, -b2, -(c - c2));
      gen(p + (a - ua) + b2 + (c - uc), -c, -(a - a2), b - b2);
      gen(p + (a - ua) + (b2 - ub), -b2, c2, -(a - a2));
    }
  }

 private:
  void run(V3 p, V3 step, int64_t n) {
    for (int64_t i = 0; i < n; ++i, p = p + step) out_->push_back(p.x + W_ * (p.y + H_ * p.z));
  }

  int64_t W_, H_;
  std::vector<int64_t>* out_;
};

}  // namespace

std::vector<int64_t> gilbert3d_order(int64_t W, int64_t H, int64_t D) {
  std::vector<int64_t> order;
  if (W < 1 || H < 1 || D < 1) return order;
  order.reserve(static_cast<size_t>(W * H * D));
  Curve curve(W, H, &order);
  const V3 o{0, 0, 0}, aw{W, 0, 0}, ah{0, H, 0}, ad{0, 0, D};
  if (W >= H && W >= D) {
    curve.gen(o, aw, ah, ad);
  } else if (H >= W && H >= D) {
    curve.gen(o, ah, aw, ad);
  } else {
    curve.gen(o, ad, aw, ah);
  }
  return order;
}

}  // namespace psa
