// rearrange/sta.cpp -- rearrange stage, host meaning: the STA tile-major order of spec 7.3.
// No CUDA, no I/O, no error recording: divisibility is checked by build_sequence_plan, and
// an input it would reject gives an empty order here.
#include <cstdint>
#include <vector>

#include "rearrange/rearrange.h"

namespace psa {

std::vector<int64_t> sta_order(int64_t W, int64_t H, int64_t D, int64_t tT, int64_t tH,
                               int64_t tW) {
  std::vector<int64_t> order;
  if (W < 1 || H < 1 || D < 1 || tT < 1 || tH < 1 || tW < 1) return order;
  if (D % tT != 0 || H % tH != 0 || W % tW != 0) return order;
  const int64_t nH = H / tH, nW = W / tW;
  const int64_t tile = tT * tH * tW;
  order.resize(static_cast<size_t>(W * H * D));
  // Token (z, y, x) = (zT*tT + z', yT*tH + y', xT*tW + x') moves to
  // ((zT*nH + yT)*nW + xT)*tile + (z'*tH + y')*tW + x'; F is that map's inverse.
  for (int64_t z = 0; z < D; ++z) {
    const int64_t zT = z / tT, zi = z % tT;
    for (int64_t y = 0; y < H; ++y) {
      const int64_t yT = y / tH, yi = y % tH;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t xT = x / tW, xi = x % tW;
        const int64_t pos = ((zT * nH + yT) * nW + xT) * tile + (zi * tH + yi) * tW + xi;
        order[static_cast<size_t>(pos)] = x + W * (y + H * z);
      }
    }
  }
  return order;
}

}  // namespace psa
