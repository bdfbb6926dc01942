// tests/picture/mask_picture_test.cpp -- the mask pictures: PNG files decode with an
// independent reader (tests/common/png_decode.h: CRCs, inflate, filters) to the image the
// renderer drew; a known synthetic mask gives a pixel-exact picture (SHA-256 of its pixels,
// and the documented colour of every cell); the video view paints each token with its key
// block's level; argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/png_decode.h"
#include "picture/mask_picture.h"
#include "psa.h"
#include "rearrange/sha256.h"

namespace {

using psa::test::decode_png;
using psa::test::DecodedPng;
using psa::test::read_file_bytes;

std::string temp_png(const char* name) {
  return std::string(PSA_BINARY_DIR) + "/" + name + ".png";
}

// The documented colours (psa.h), written out independently of the renderer.
struct Colour {
  uint8_t r, g, b;
};
Colour documented(int level) {
  switch (level) {
    case 1: return {200, 30, 30};
    case 2: return {240, 140, 40};
    case 4: return {240, 220, 60};
    case 8: return {110, 170, 230};
    case 0: return {225, 225, 225};
    default: return {255, 0, 255};
  }
}

// A 2-head 3 x 5 map with every level, an invalid value and a distinct pattern per head.
std::vector<int8_t> synthetic_map() {
  return {1, 2, 4, 8, 0,  //
          0, 1, 1, 2, 4,  //
          8, 8, 0, 0, 7,  //
          //
          2, 2, 2, 2, 2,  //
          1, 0, 1, 0, 1,  //
          4, 4, 8, 8, 1};
}

std::string pixel_hash(const std::vector<uint8_t>& rgb) {
  return psa_test::sha256_hex(std::string(rgb.begin(), rgb.end()));
}

TEST(MaskPicture, BlocksViewOfSyntheticMaskIsPixelExact) {
  const std::vector<int8_t> map = synthetic_map();
  const std::string path = temp_png("mask_picture_synthetic");
  ASSERT_EQ(PSA_OK, psa_mask_write_png(path.c_str(), map.data(), 2, 3, 5, -1, 6)) << psa_last_error_message();
  const DecodedPng png = decode_png(read_file_bytes(path));
  ASSERT_TRUE(png.ok) << png.error;
  EXPECT_EQ((std::vector<std::string>{"IHDR", "IDAT", "IEND"}), png.chunks);
  const psa::BlocksPicture pic = psa::render_blocks(map.data(), 2, 3, 5, -1, 6);
  ASSERT_EQ(pic.image.width, png.width);
  ASSERT_EQ(pic.image.height, png.height);
  EXPECT_EQ(pic.image.rgb, png.rgb);  // the file holds exactly the drawn pixels
  ASSERT_EQ(2u, pic.panels.size());
  EXPECT_EQ(6, pic.cell);
  // Every pixel of every cell has the documented colour of its level.
  for (const psa::PanelPlace& p : pic.panels)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        const Colour want = documented(map[static_cast<size_t>((p.head * 3 + i) * 5 + j)]);
        for (int64_t dy = 0; dy < 6; ++dy)
          for (int64_t dx = 0; dx < 6; ++dx) {
            const uint8_t* px = png.px(static_cast<uint32_t>(p.x + j * 6 + dx), static_cast<uint32_t>(p.y + i * 6 + dy));
            ASSERT_EQ(want.r, px[0]) << "head " << p.head << " cell " << i << "," << j;
            ASSERT_EQ(want.g, px[1]);
            ASSERT_EQ(want.b, px[2]);
          }
        }
  // The panel frame is black, the corner outside it white.
  const psa::PanelPlace& p0 = pic.panels[0];
  EXPECT_EQ(0, png.px(static_cast<uint32_t>(p0.x - 1), static_cast<uint32_t>(p0.y - 1))[0]);
  EXPECT_EQ(255, png.px(0, 0)[0]);
  // The whole picture, pixel for pixel: the layout is pinned by this hash (update it, with a
  // look at the picture, when the layout changes on purpose).
  EXPECT_EQ("cd3b53934d86aa8b70fe8e2805588d8802a6000dc1656cc5341d5f3918270bb7", pixel_hash(png.rgb)) << png.width << "x" << png.height;
  // One head only: one panel.
  const std::string one = temp_png("mask_picture_one_head");
  ASSERT_EQ(PSA_OK, psa_mask_write_png(one.c_str(), map.data(), 2, 3, 5, 1, 0));
  const DecodedPng png1 = decode_png(read_file_bytes(one));
  ASSERT_TRUE(png1.ok) << png1.error;
  const psa::BlocksPicture pic1 = psa::render_blocks(map.data(), 2, 3, 5, 1, 0);
  EXPECT_EQ(pic1.image.rgb, png1.rgb);
  ASSERT_EQ(1u, pic1.panels.size());
  EXPECT_EQ(1, pic1.panels[0].head);
  EXPECT_EQ(16, pic1.cell);  // automatic: min(16, 256 / 5)
}

TEST(MaskPicture, LargeMapsAreDownsampledToTheMostComputedLevel) {
  // 3 x 2100 blocks: stride 3; the shown cell (0, 1) covers key blocks 3..5, where block 4
  // is level 2 and the rest skipped: it shows level 2. Cell (0, 2) is all skipped.
  std::vector<int8_t> map(3 * 2100, 0);
  map[4] = 2;
  map[5] = 8;
  const psa::BlocksPicture pic = psa::render_blocks(map.data(), 1, 3, 2100, -1, 0);
  EXPECT_EQ(3, pic.stride);
  EXPECT_EQ(1, pic.cell);
  const psa::Rgb c1 = pic.image.at(pic.panels[0].x + 1, pic.panels[0].y);
  const psa::Rgb c2 = pic.image.at(pic.panels[0].x + 2, pic.panels[0].y);
  EXPECT_EQ(psa::level_colour(2), c1);
  EXPECT_EQ(psa::level_colour(0), c2);
}

TEST(MaskPicture, VideoViewPaintsEveryTokenWithItsKeyBlockLevel) {
  // A context forward on the CPU backend (Gilbert order, text first), then the video view of
  // query block 3 of head 1; every video token's cell corner has the colour of the level of
  // the key block holding it, and the text strip follows the text tokens.
  psa_config* cfg = nullptr;
  ASSERT_EQ(PSA_OK, psa_config_create(&cfg));
  psa_config_set_int(cfg, PSA_PARAM_BLOCK_M, 64);
  psa_config_set_int(cfg, PSA_PARAM_BLOCK_N, 32);
  psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, 1);
  psa_context* ctx = nullptr;
  ASSERT_EQ(PSA_OK, psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx));
  const int64_t T = 2, Hh = 8, W = 16, text = 12, L = T * Hh * W + text, D = 16, H = 2;
  ASSERT_EQ(PSA_OK, psa_context_set_video_grid(ctx, T, Hh, W, text, PSA_TEXT_FIRST));
  psa_tensor_desc d{};
  d.struct_size = sizeof(d);
  ASSERT_EQ(PSA_OK, psa_tensor_desc_init(&d, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, H, L, D));
  std::vector<float> q(static_cast<size_t>(H * L * D)), k(q.size()), v(q.size()), o(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    k[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i) + 0.5));
    v[i] = 1.0f;
  }
  uint64_t bytes = 0;
  ASSERT_EQ(PSA_OK, psa_workspace_size(ctx, &d, &d, &d, &d, &bytes));
  std::vector<char> ws(bytes);
  const std::string path = temp_png("mask_picture_video");
  EXPECT_EQ(PSA_ERR_INVALID_STATE,
            psa_context_write_mask_png(ctx, path.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, 0, nullptr, 0));
  ASSERT_EQ(PSA_OK, psa_attention_forward(ctx, &d, q.data(), &d, k.data(), &d, v.data(), &d, o.data(), nullptr,
                                          ws.data(), bytes, nullptr));
  ASSERT_EQ(PSA_OK, psa_context_write_mask_png(ctx, path.c_str(), PSA_MASK_VIEW_VIDEO, 0, 1, 3, nullptr, 4))
      << psa_last_error_message();
  const DecodedPng png = decode_png(read_file_bytes(path));
  ASSERT_TRUE(png.ok) << png.error;

  int64_t B = 0, Hq = 0, mq = 0, nk = 0;
  ASSERT_EQ(PSA_OK, psa_context_level_map_shape(ctx, &B, &Hq, &mq, &nk));
  std::vector<int8_t> map(static_cast<size_t>(B * Hq * mq * nk));
  ASSERT_EQ(PSA_OK, psa_context_get_level_map(ctx, map.data(), map.size()));
  std::vector<int64_t> ko(static_cast<size_t>(L)), qo(static_cast<size_t>(L));
  ASSERT_EQ(PSA_OK, psa_context_get_token_order(ctx, 1, ko.data(), L, nullptr, nullptr, nullptr));
  ASSERT_EQ(PSA_OK, psa_context_get_token_order(ctx, 0, qo.data(), L, nullptr, nullptr, nullptr));
  const int8_t* row = map.data() + (1 * mq + 3) * nk;

  psa::VideoPictureInput in;
  std::vector<int64_t> kov = ko, qov = qo;
  in.row = row;
  in.nk = nk;
  in.block_m = 64;
  in.block_n = 32;
  in.query_block = 3;
  in.head = 1;
  in.q_order = &qov;
  in.k_order = &kov;
  in.len_q = in.len_k = L;
  in.grid.set = true;
  in.grid.t = T;
  in.grid.h = Hh;
  in.grid.w = W;
  in.grid.text_length = text;
  in.grid.text_position = PSA_TEXT_FIRST;
  const psa::VideoPicture pic = psa::render_video(in, 4);
  ASSERT_EQ(pic.image.width, png.width);
  ASSERT_EQ(pic.image.height, png.height);
  EXPECT_EQ(pic.image.rgb, png.rgb);
  int checked = 0, dots = 0;
  for (int64_t p = 0; p < L; ++p) {
    const int64_t tok = ko[static_cast<size_t>(p)];
    const Colour want = documented(row[p / 32]);
    int64_t x0, y0;
    if (tok < text) {
      x0 = pic.text_x + (tok % pic.text_per_row) * 4;
      y0 = pic.text_y + (tok / pic.text_per_row) * 4;
    } else {
      const int64_t vt = tok - text;
      x0 = pic.frame_x[static_cast<size_t>(vt / (Hh * W))] + (vt % W) * 4;
      y0 = pic.frame_y[static_cast<size_t>(vt / (Hh * W))] + ((vt / W) % Hh) * 4;
    }
    const uint8_t* px = png.px(static_cast<uint32_t>(x0), static_cast<uint32_t>(y0));  // corner: never the dot
    EXPECT_EQ(want.r, px[0]) << "token " << tok;
    EXPECT_EQ(want.g, px[1]) << "token " << tok;
    EXPECT_EQ(want.b, px[2]) << "token " << tok;
    ++checked;
    // The query block's tokens carry the black dot at the cell's centre.
    const bool in_query = std::find(qo.begin() + 3 * 64, qo.begin() + std::min<int64_t>(4 * 64, L), tok) !=
                          qo.begin() + std::min<int64_t>(4 * 64, L);
    const uint8_t* centre = png.px(static_cast<uint32_t>(x0 + 2), static_cast<uint32_t>(y0 + 2));
    if (in_query) {
      EXPECT_EQ(0, centre[0] + centre[1] + centre[2]) << "token " << tok;
      ++dots;
    }
  }
  EXPECT_EQ(L, checked);
  EXPECT_EQ(64, dots);
  // Query position -> its block: the centre token's block, by default.
  const int64_t centre_pos[3] = {1, 4, 8};
  ASSERT_EQ(PSA_OK, psa_context_write_mask_png(ctx, path.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, -1, centre_pos, 0));
  const std::vector<uint8_t> by_position = read_file_bytes(path);
  ASSERT_EQ(PSA_OK, psa_context_write_mask_png(ctx, path.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, -1, nullptr, 0));
  EXPECT_EQ(by_position, read_file_bytes(path));
  const int64_t token = text + (1 * Hh + 4) * W + 8;
  const int64_t block = (std::find(qo.begin(), qo.end(), token) - qo.begin()) / 64;
  ASSERT_EQ(PSA_OK, psa_context_write_mask_png(ctx, path.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, block, nullptr, 0));
  EXPECT_EQ(by_position, read_file_bytes(path));

  // The blocks view of the context equals psa_mask_write_png of the exported map.
  const std::string a = temp_png("mask_picture_ctx_blocks"), b = temp_png("mask_picture_map_blocks");
  ASSERT_EQ(PSA_OK, psa_context_write_mask_png(ctx, a.c_str(), PSA_MASK_VIEW_BLOCKS, 0, -1, -1, nullptr, 0));
  ASSERT_EQ(PSA_OK, psa_mask_write_png(b.c_str(), map.data(), Hq, mq, nk, -1, 0));
  EXPECT_EQ(read_file_bytes(a), read_file_bytes(b));

  // Errors name the argument.
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_write_mask_png(ctx, a.c_str(), PSA_MASK_VIEW_VIDEO, 0, -1, 0, nullptr, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_write_mask_png(ctx, a.c_str(), PSA_MASK_VIEW_BLOCKS, 1, 0, 0, nullptr, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_write_mask_png(ctx, a.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, mq, nullptr, 0));
  const int64_t outside[3] = {T, 0, 0};
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_write_mask_png(ctx, a.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, -1, outside, 0));
  EXPECT_NE(std::string::npos, std::string(psa_last_error_message()).find("query_position"));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_write_mask_png(ctx, a.c_str(), static_cast<psa_mask_view>(5), 0, 0, 0, nullptr, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_context_write_mask_png(ctx, a.c_str(), PSA_MASK_VIEW_BLOCKS, 0, 0, 0, nullptr, 65));
  EXPECT_EQ(PSA_ERR_IO, psa_context_write_mask_png(ctx, "/nonexistent-dir/x.png", PSA_MASK_VIEW_BLOCKS, 0, 0, 0, nullptr, 0));
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_context_write_mask_png(ctx, nullptr, PSA_MASK_VIEW_BLOCKS, 0, 0, 0, nullptr, 0));
  ASSERT_EQ(PSA_OK, psa_context_clear_video_grid(ctx));
  EXPECT_EQ(PSA_ERR_INVALID_STATE, psa_context_write_mask_png(ctx, a.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, 0, nullptr, 0));
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
}

TEST(MaskPicture, RawWriterErrors) {
  const std::vector<int8_t> map = synthetic_map();
  const std::string p = temp_png("mask_picture_errors");
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_mask_write_png(nullptr, map.data(), 2, 3, 5, -1, 0));
  EXPECT_EQ(PSA_ERR_NULL_POINTER, psa_mask_write_png(p.c_str(), nullptr, 2, 3, 5, -1, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_mask_write_png(p.c_str(), map.data(), 0, 3, 5, -1, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_mask_write_png(p.c_str(), map.data(), 2, 3, 5, 2, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_mask_write_png(p.c_str(), map.data(), 2, 3, 5, -2, 0));
  EXPECT_EQ(PSA_ERR_INVALID_ARGUMENT, psa_mask_write_png(p.c_str(), map.data(), 2, 3, 5, -1, -1));
  EXPECT_EQ(PSA_ERR_IO, psa_mask_write_png("/nonexistent-dir/x.png", map.data(), 2, 3, 5, -1, 0));
}

}  // namespace
