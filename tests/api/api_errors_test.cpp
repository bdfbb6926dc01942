// tests/api/api_errors_test.cpp -- every invalid argument of the context / forward API
// returns its specific status and a message naming the argument; after a failing call the
// output is unchanged and the context still works.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "common/api_util.h"
#include "common/test_util.h"

namespace {

using psa_test::ConfigPtr;
using psa_test::ContextPtr;
using psa_test::HostTensor;

struct Fixture {
  ConfigPtr cfg;
  ContextPtr ctx;
  HostTensor q{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 160, 16};
  HostTensor k{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 160, 16};
  HostTensor v{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 160, 16};
  HostTensor out{PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 160, 16};
  std::vector<uint8_t> ws;
  Fixture() {
    psa_config* c = nullptr;
    psa_config_create(&c);
    cfg.reset(c);
    psa_context* x = nullptr;
    psa_context_create(c, PSA_BACKEND_CPU, -1, &x);
    ctx.reset(x);
    std::mt19937_64 rng(psa_test::fresh_seed());
    for (HostTensor* t : {&q, &k, &v})
      for (int h = 0; h < 2; ++h) t->set_head(0, h, psa_test::random_vec(rng, 160 * 16));
    uint64_t bytes = 0;
    psa_workspace_size(ctx.get(), &q.desc, &k.desc, &v.desc, &out.desc, &bytes);
    ws.assign(bytes, 0);
    std::memset(out.bytes.data(), 0x5a, out.bytes.size());
  }
  psa_status forward(const psa_tensor_desc& qd, const psa_tensor_desc& kd, const psa_tensor_desc& vd,
                     const psa_tensor_desc& od) {
    return psa_attention_forward(ctx.get(), &qd, q.bytes.data(), &kd, k.bytes.data(), &vd, v.bytes.data(), &od,
                                 out.bytes.data(), nullptr, ws.data(), ws.size(), nullptr);
  }
};

struct BadCase {
  const char* name;
  psa_status want;
  const char* must_mention;
  std::function<psa_status(Fixture&)> call;
};

psa_tensor_desc with(psa_tensor_desc d, const std::function<void(psa_tensor_desc&)>& f) {
  f(d);
  return d;
}

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> v;
  auto fwd_q = [](std::function<void(psa_tensor_desc&)> f) {
    return [f](Fixture& x) { return x.forward(with(x.q.desc, f), x.k.desc, x.v.desc, x.out.desc); };
  };
  auto fwd_k = [](std::function<void(psa_tensor_desc&)> f) {
    return [f](Fixture& x) { return x.forward(x.q.desc, with(x.k.desc, f), x.v.desc, x.out.desc); };
  };
  auto fwd_v = [](std::function<void(psa_tensor_desc&)> f) {
    return [f](Fixture& x) { return x.forward(x.q.desc, x.k.desc, with(x.v.desc, f), x.out.desc); };
  };
  auto fwd_o = [](std::function<void(psa_tensor_desc&)> f) {
    return [f](Fixture& x) { return x.forward(x.q.desc, x.k.desc, x.v.desc, with(x.out.desc, f)); };
  };
  v.push_back({"null_context", PSA_ERR_NULL_POINTER, "context", [](Fixture& x) {
                 return psa_attention_forward(nullptr, &x.q.desc, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.out.bytes.data(),
                                              nullptr, x.ws.data(), x.ws.size(), nullptr);
               }});
  v.push_back({"null_q_desc", PSA_ERR_NULL_POINTER, "q_desc", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), nullptr, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.out.bytes.data(),
                                              nullptr, x.ws.data(), x.ws.size(), nullptr);
               }});
  v.push_back({"null_q", PSA_ERR_NULL_POINTER, "q:", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, nullptr, &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.out.bytes.data(),
                                              nullptr, x.ws.data(), x.ws.size(), nullptr);
               }});
  v.push_back({"null_k", PSA_ERR_NULL_POINTER, "k:", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, x.q.bytes.data(), &x.k.desc, nullptr,
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.out.bytes.data(),
                                              nullptr, x.ws.data(), x.ws.size(), nullptr);
               }});
  v.push_back({"null_v", PSA_ERR_NULL_POINTER, "v:", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, nullptr, &x.out.desc, x.out.bytes.data(), nullptr,
                                              x.ws.data(), x.ws.size(), nullptr);
               }});
  v.push_back({"null_out", PSA_ERR_NULL_POINTER, "out:", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, nullptr, nullptr,
                                              x.ws.data(), x.ws.size(), nullptr);
               }});
  v.push_back({"null_workspace", PSA_ERR_NULL_POINTER, "workspace", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.out.bytes.data(),
                                              nullptr, nullptr, x.ws.size(), nullptr);
               }});
  v.push_back({"workspace_too_small", PSA_ERR_WORKSPACE_TOO_SMALL, "workspace_bytes", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.out.bytes.data(),
                                              nullptr, x.ws.data(), x.ws.size() - 1, nullptr);
               }});
  v.push_back({"struct_size", PSA_ERR_INVALID_ARGUMENT, "struct_size", fwd_q([](psa_tensor_desc& d) { d.struct_size = 8; })});
  v.push_back({"bad_dtype", PSA_ERR_INVALID_DTYPE, "dtype = 7", fwd_q([](psa_tensor_desc& d) { d.dtype = psa_dtype(7); })});
  v.push_back({"mixed_dtype", PSA_ERR_INVALID_DTYPE, "k: dtype", fwd_k([](psa_tensor_desc& d) { d.dtype = PSA_DTYPE_F16; })});
  v.push_back({"zero_batch", PSA_ERR_INVALID_SHAPE, "shape[0] (batch) = 0", fwd_q([](psa_tensor_desc& d) { d.shape[0] = 0; })});
  v.push_back({"negative_len", PSA_ERR_INVALID_SHAPE, "shape[2] (seq_len) = -5", fwd_q([](psa_tensor_desc& d) { d.shape[2] = -5; })});
  v.push_back({"overflow_elems", PSA_ERR_INVALID_SHAPE, "overflow", fwd_q([](psa_tensor_desc& d) {
                 d.shape[0] = int64_t(1) << 40;
                 d.shape[2] = int64_t(1) << 30;
               })});
  v.push_back({"head_dim_mismatch", PSA_ERR_INVALID_SHAPE, "k: shape[3] (head_dim)", fwd_k([](psa_tensor_desc& d) { d.shape[3] = 8; })});
  v.push_back({"batch_mismatch", PSA_ERR_INVALID_SHAPE, "k: shape[0] (batch)", fwd_k([](psa_tensor_desc& d) { d.shape[0] = 2; })});
  v.push_back({"kv_len_mismatch", PSA_ERR_INVALID_SHAPE, "v: shape[2] (seq_len)", fwd_v([](psa_tensor_desc& d) { d.shape[2] = 100; })});
  v.push_back({"gqa_indivisible", PSA_ERR_INVALID_SHAPE, "k: shape[1] (heads) = 3", [](Fixture& x) {
                 auto three_heads = [](psa_tensor_desc& d) {
                   d.shape[1] = 3;
                   d.strides[0] = 3 * 160 * 16;
                 };
                 return x.forward(x.q.desc, with(x.k.desc, three_heads), with(x.v.desc, three_heads), x.out.desc);
               }});
  v.push_back({"out_shape", PSA_ERR_INVALID_SHAPE, "out: shape[2]", fwd_o([](psa_tensor_desc& d) { d.shape[2] = 10; })});
  v.push_back({"out_dtype", PSA_ERR_INVALID_DTYPE, "out: dtype", fwd_o([](psa_tensor_desc& d) { d.dtype = PSA_DTYPE_BF16; })});
  v.push_back({"inner_stride", PSA_ERR_INVALID_STRIDE, "strides[3]", fwd_q([](psa_tensor_desc& d) { d.strides[3] = 2; })});
  v.push_back({"negative_stride", PSA_ERR_INVALID_STRIDE, "strides[2] (seq_len) = -16", fwd_q([](psa_tensor_desc& d) { d.strides[2] = -16; })});
  v.push_back({"aliasing_stride", PSA_ERR_INVALID_STRIDE, "alias", fwd_q([](psa_tensor_desc& d) { d.strides[2] = 8; })});
  v.push_back({"aliasing_heads", PSA_ERR_INVALID_STRIDE, "alias", fwd_k([](psa_tensor_desc& d) { d.strides[1] = 16; })});
  v.push_back({"out_aliases_q", PSA_ERR_INVALID_ARGUMENT, "out: its memory overlaps q", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.q.bytes.data(), nullptr,
                                              x.ws.data(), x.ws.size(), nullptr);
               }});
  v.push_back({"lse_aliases_out", PSA_ERR_INVALID_ARGUMENT, "lse", [](Fixture& x) {
                 return psa_attention_forward(x.ctx.get(), &x.q.desc, x.q.bytes.data(), &x.k.desc, x.k.bytes.data(),
                                              &x.v.desc, x.v.bytes.data(), &x.out.desc, x.out.bytes.data(),
                                              reinterpret_cast<float*>(x.out.bytes.data()), x.ws.data(), x.ws.size(),
                                              nullptr);
               }});
  v.push_back({"grid_mismatch", PSA_ERR_INVALID_SHAPE, "k: seq_len = 160", [](Fixture& x) {
                 psa_context_set_video_grid(x.ctx.get(), 2, 3, 5, 0, PSA_TEXT_NONE);
                 return x.forward(x.q.desc, x.k.desc, x.v.desc, x.out.desc);
               }});
  v.push_back({"grid_zero", PSA_ERR_INVALID_SHAPE, "video grid", [](Fixture& x) {
                 return psa_context_set_video_grid(x.ctx.get(), 0, 3, 5, 0, PSA_TEXT_NONE);
               }});
  v.push_back({"text_without_position", PSA_ERR_INVALID_ARGUMENT, "text_position", [](Fixture& x) {
                 return psa_context_set_video_grid(x.ctx.get(), 1, 3, 5, 7, PSA_TEXT_NONE);
               }});
  v.push_back({"negative_text", PSA_ERR_INVALID_ARGUMENT, "text_length = -1", [](Fixture& x) {
                 return psa_context_set_video_grid(x.ctx.get(), 1, 3, 5, -1, PSA_TEXT_FIRST);
               }});
  v.push_back({"bad_step", PSA_ERR_INVALID_ARGUMENT, "step = -2", [](Fixture& x) {
                 return psa_context_set_step(x.ctx.get(), -2);
               }});
  v.push_back({"stats_struct_size", PSA_ERR_INVALID_ARGUMENT, "struct_size", [](Fixture& x) {
                 psa_stats s{};
                 s.struct_size = 4;
                 return psa_context_get_stats(x.ctx.get(), &s);
               }});
  v.push_back({"stats_before_forward", PSA_ERR_INVALID_STATE, "no forward", [](Fixture& x) {
                 psa_stats s{};
                 s.struct_size = sizeof s;
                 return psa_context_get_stats(x.ctx.get(), &s);
               }});
  v.push_back({"workspace_size_null_bytes", PSA_ERR_NULL_POINTER, "bytes", [](Fixture& x) {
                 return psa_workspace_size(x.ctx.get(), &x.q.desc, &x.k.desc, &x.v.desc, &x.out.desc, nullptr);
               }});
  v.push_back({"bad_backend", PSA_ERR_INVALID_ARGUMENT, "backend = 9", [](Fixture& x) {
                 psa_context* c = nullptr;
                 return psa_context_create(x.cfg.get(), psa_backend(9), -1, &c);
               }});
  v.push_back({"create_null_out", PSA_ERR_NULL_POINTER, "out", [](Fixture& x) {
                 return psa_context_create(x.cfg.get(), PSA_BACKEND_CPU, -1, nullptr);
               }});
  v.push_back({"create_null_config", PSA_ERR_NULL_POINTER, "config", [](Fixture&) {
                 psa_context* c = nullptr;
                 return psa_context_create(nullptr, PSA_BACKEND_CPU, -1, &c);
               }});
  v.push_back({"desc_init_layout", PSA_ERR_INVALID_ARGUMENT, "layout = 5", [](Fixture&) {
                 psa_tensor_desc d;
                 return psa_tensor_desc_init(&d, psa_layout(5), PSA_DTYPE_F32, 1, 1, 1, 1);
               }});
  v.push_back({"desc_init_zero_dim", PSA_ERR_INVALID_SHAPE, "head_dim = 0", [](Fixture&) {
                 psa_tensor_desc d;
                 return psa_tensor_desc_init(&d, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, 1, 0);
               }});
  return v;
}

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, SpecificStatusNamedArgumentOutputUntouchedContextUsable) {
  const BadCase& c = GetParam();
  Fixture x;
  const std::vector<uint8_t> before = x.out.bytes;
  const psa_status st = c.call(x);
  EXPECT_EQ(st, c.want) << psa_status_name(st) << ": " << psa_last_error_message();
  EXPECT_EQ(psa_last_error_status(), c.want);
  EXPECT_NE(std::strstr(psa_last_error_message(), c.must_mention), nullptr)
      << "message '" << psa_last_error_message() << "' should mention '" << c.must_mention << "'";
  EXPECT_EQ(x.out.bytes, before) << "a failing call must not write the output";
  // The context still works afterwards.
  psa_context_clear_video_grid(x.ctx.get());
  EXPECT_EQ(x.forward(x.q.desc, x.k.desc, x.v.desc, x.out.desc), PSA_OK) << psa_last_error_message();
  EXPECT_STREQ(psa_last_error_message(), "");
}

INSTANTIATE_TEST_SUITE_P(Table, BadInput, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.name); });

TEST(Api, StatusTableStringsAndVersion) {
  EXPECT_STREQ(psa_status_name(PSA_OK), "PSA_OK");
  EXPECT_STREQ(psa_status_name(PSA_ERR_WORKSPACE_TOO_SMALL), "PSA_ERR_WORKSPACE_TOO_SMALL");
  EXPECT_STREQ(psa_status_name(psa_status(999)), "PSA_STATUS_UNKNOWN");
  EXPECT_STREQ(psa_status_string(psa_status(-3)), "unknown status");
  EXPECT_EQ(int(PSA_ERR_INTERNAL), 20);  // pinned values
  EXPECT_EQ(psa_version_number(), unsigned(PSA_VERSION_NUMBER));
  psa_context_destroy(nullptr);
  EXPECT_EQ(psa_dtype_size(PSA_DTYPE_BF16), 2);
  EXPECT_EQ(psa_dtype_size(psa_dtype(9)), 0);
}

TEST(Api, LastErrorIsPerThread) {
  EXPECT_EQ(psa_context_set_step(nullptr, 0), PSA_ERR_NULL_POINTER);
  std::string other;
  std::thread t([&] { other = psa_last_error_message(); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(psa_last_error_message()), "");
}

TEST(Api, CudaBackendUnavailableOrNoDeviceIsAStatus) {
  psa_config* c = nullptr;
  ASSERT_EQ(psa_config_create(&c), PSA_OK);
  psa_context* ctx = nullptr;
  const psa_status st = psa_context_create(c, PSA_BACKEND_CUDA, 0, &ctx);
  if (st == PSA_OK) {
    EXPECT_EQ(psa_context_backend(ctx), PSA_BACKEND_CUDA);
  } else {
    EXPECT_TRUE(st == PSA_ERR_BACKEND_UNAVAILABLE || st == PSA_ERR_NO_DEVICE) << psa_status_name(st);
    EXPECT_EQ(ctx, nullptr);
  }
  psa_context_destroy(ctx);
  psa_context* autoc = nullptr;
  ASSERT_EQ(psa_context_create(c, PSA_BACKEND_AUTO, -1, &autoc), PSA_OK) << psa_last_error_message();
  EXPECT_NE(psa_context_backend(autoc), PSA_BACKEND_AUTO);
  psa_context_destroy(autoc);
  psa_config_destroy(c);
}

// Well-formed UTF-8 per Unicode Table 3-7 (an independent check of the message bytes).
bool well_formed_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size() || (n == 2 && b < 0xC2) || (n == 4 && b > 0xF4)) return false;
    uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t j = 1; j < n; ++j) {
      const unsigned char c = static_cast<unsigned char>(s[i + j]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

// Messages echo caller bytes (model names, YAML keys, paths); whatever they are, the message
// is valid UTF-8 (bindings decode it as such), with U+FFFD for each bad byte.
TEST(Api, LastErrorMessageIsValidUtf8) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int> byte(1, 255);
  for (int round = 0; round < 200; ++round) {
    std::string model(static_cast<size_t>(1 + round % 24), 'm');
    for (char& c : model) c = static_cast<char>(byte(rng));
    psa_config* c = nullptr;
    EXPECT_NE(psa_config_load_embedded(model.c_str(), nullptr, &c), PSA_OK);
    EXPECT_EQ(c, nullptr);
    const std::string msg = psa_last_error_message();
    EXPECT_TRUE(well_formed_utf8(msg)) << round;
  }
  // A model name with a lone 0xff and a truncated sequence: U+FFFD for each bad start.
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_load_embedded("M\xff\xe2\x82", nullptr, &c), PSA_ERR_NOT_FOUND);
  std::string msg = psa_last_error_message();
  EXPECT_TRUE(well_formed_utf8(msg)) << msg;
  EXPECT_NE(msg.find("M\xEF\xBF\xBD\xEF\xBF\xBD"), std::string::npos) << msg;
  // YAML text that is not UTF-8 is refused where the bad byte is (its names would reach the
  // caller); a UTF-8 name passes.
  const std::string yaml = "ok:\n  default_attention: p\nM\xc3\xa9\xff:\n  x: 1\n";
  EXPECT_EQ(psa_config_load_string(yaml.c_str(), "ok", nullptr, &c), PSA_ERR_YAML_PARSE);
  msg = psa_last_error_message();
  EXPECT_NE(msg.find("<string>: line 3, column 3: byte 0xFF is not UTF-8"), std::string::npos) << msg;
  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open_string(yaml.c_str(), &cat), PSA_ERR_YAML_PARSE);
  EXPECT_EQ(cat, nullptr);
}

}  // namespace
