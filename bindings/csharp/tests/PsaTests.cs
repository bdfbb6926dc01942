// bindings/csharp/tests/PsaTests.cs -- ctest csharp.tests: the C# binding on the CPU
// backend: presets, configs, exceptions carrying the library's message, forward on float[]
// and ushort[] (f16 bits) against a reference computed here, SafeHandle disposal.
// Prints one line per check; exits 1 if any check failed.
using System;
using System.Collections.Generic;
using Psa;

static class PsaTests {
  static int failed, passed;

  static void Check(string name, Action body) {
    try {
      body();
      ++passed;
      Console.WriteLine("ok    " + name);
    } catch (Exception e) {
      ++failed;
      Console.WriteLine("FAIL  " + name + ": " + e);
    }
  }

  static void Assert(bool condition, string what) {
    if (!condition) throw new Exception("assertion failed: " + what);
  }

  static PsaException Throws(Action body) {
    try {
      body();
    } catch (PsaException e) {
      return e;
    }
    throw new Exception("expected a PsaException");
  }

  // Smooth fields over a (t, h, w) grid plus noise: [1, H, L, D] BNSD.
  static float[] Field(int heads, int t, int h, int w, int dim, int seed, float noise) {
    var rng = new Random(seed);
    int len = t * h * w;
    var x = new float[heads * len * dim];
    for (int head = 0; head < heads; ++head)
      for (int d = 0; d < dim; ++d) {
        double ft = rng.NextDouble() * 3 - 1.5, fh = rng.NextDouble() * 3 - 1.5;
        double fw = rng.NextDouble() * 3 - 1.5, phase = rng.NextDouble() * 6.283;
        for (int l = 0; l < len; ++l) {
          int tt = l / (h * w), hh = (l / w) % h, ww = l % w;
          double s = Math.Cos(6.283 * (ft * tt / t + fh * hh / h + fw * ww / w) + phase);
          x[(head * len + l) * dim + d] = (float)(s + noise * (rng.NextDouble() - 0.5));
        }
      }
    return x;
  }

  // Dense attention in double, BNSD, same head count for q and k/v.
  static double[] Reference(float[] q, float[] k, float[] v, int heads, int len, int dim) {
    var o = new double[q.Length];
    var p = new double[len];
    double scale = 1.0 / Math.Sqrt(dim);
    for (int head = 0; head < heads; ++head)
      for (int i = 0; i < len; ++i) {
        double max = double.NegativeInfinity, sum = 0;
        for (int j = 0; j < len; ++j) {
          double s = 0;
          for (int d = 0; d < dim; ++d)
            s += q[(head * len + i) * dim + d] * k[(head * len + j) * dim + d];
          p[j] = s * scale;
          max = Math.Max(max, p[j]);
        }
        for (int j = 0; j < len; ++j) { p[j] = Math.Exp(p[j] - max); sum += p[j]; }
        for (int d = 0; d < dim; ++d) {
          double acc = 0;
          for (int j = 0; j < len; ++j) acc += p[j] * v[(head * len + j) * dim + d];
          o[(head * len + i) * dim + d] = acc / sum;
        }
      }
    return o;
  }

  static double MaxAbs(float[] a, double[] b) {
    double m = 0;
    for (int i = 0; i < a.Length; ++i) m = Math.Max(m, Math.Abs(a[i] - b[i]));
    return m;
  }

  // IEEE half <-> float for the f16 check (round to nearest even, finite values only).
  static ushort ToHalf(float f) {
    uint x = BitConverter.ToUInt32(BitConverter.GetBytes(f), 0);
    uint sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    int e = (int)exp - 127 + 15;
    if (e <= 0) return (ushort)sign;
    uint half = sign | ((uint)e << 10) | (man >> 13);
    uint rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) ++half;
    return (ushort)half;
  }

  static float FromHalf(ushort h) {
    int sign = (h >> 15) != 0 ? -1 : 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) return sign * man * (float)Math.Pow(2, -24);
    return sign * (1 + man / 1024f) * (float)Math.Pow(2, exp - 15);
  }

  static int Main() {
    const int H = 2, T = 2, GH = 8, GW = 16, D = 64, L = T * GH * GW;  // 256 tokens
    var q = Field(H, T, GH, GW, D, 1, 0.2f);
    var k = Field(H, T, GH, GW, D, 1, 0.2f);  // same field: local attention
    var v = Field(H, T, GH, GW, D, 2, 0.0f);
    var desc = TensorDesc.Create(Layout.BNSD, DType.F32, 1, H, L, D);
    double[] reference = Reference(q, k, v, H, L, D);

    Check("versions agree", () => {
      string lib = Context.LibraryVersion;
      Version asm = typeof(Context).Assembly.GetName().Version;
      Assert(lib == Context.HeaderVersion, "header " + Context.HeaderVersion + " vs library " + lib);
      Assert(lib == asm.Major + "." + asm.Minor + "." + asm.Build, "assembly " + asm + " vs library " + lib);
    });

    Check("presets list models and presets", () => {
      Dictionary<string, List<string>> presets = Config.Presets();
      Assert(presets.ContainsKey("Wan2.1_1.3b"), "Wan2.1_1.3b listed");
      Assert(presets["Wan2.1_1.3b"].Contains("psa_balanced"), "psa_balanced listed");
    });

    Check("load preset and read parameters", () => {
      using (var cfg = Config.Load("Wan2.1_1.3b", "psa_topk")) {
        Assert(cfg.GetInt(Param.BLOCK_N) == 32, "block_size.n = 32");
        Assert(cfg.Get("block_size.m") == 128, "block_size.m = 128");
        Assert((Method)cfg.GetInt(Param.METHOD) == Method.PSA, "type psa");
        Assert(Config.ParamName(Param.WARMUP_STEPS) == "warmup_steps", "param name");
        using (var copy = cfg.Clone()) {
          copy.Set(Param.WARMUP_STEPS, 0L);
          Assert(cfg.GetInt(Param.WARMUP_STEPS) == 15 && copy.GetInt(Param.WARMUP_STEPS) == 0, "clone independent");
        }
      }
    });

    Check("unknown model throws with the library message", () => {
      PsaException e = Throws(() => Config.Load("no_such_model"));
      Assert(e.Status == Status.ERR_NOT_FOUND, "status " + e.Status);
      Assert(e.StatusName == "PSA_ERR_NOT_FOUND", e.StatusName);
      Assert(e.Message.Contains("no_such_model") && e.Message.Contains("Wan2.1_1.3b"), e.Message);
    });

    Check("out-of-range parameter names the allowed values", () => {
      using (var cfg = new Config()) {
        PsaException e = Throws(() => cfg.Set(Param.BLOCK_N, 96L));
        Assert(e.Status == Status.ERR_INVALID_ARGUMENT, "status " + e.Status);
        Assert(e.Message == "block_size.n = 96: allowed 32, 64, 128", e.Message);
      }
    });

    Check("CUDA backend fails cleanly without a GPU", () => {
      using (var cfg = new Config()) {
        try {
          using (var ctx = new Context(cfg, Backend.CUDA)) Assert(ctx.Backend == Backend.CUDA, "cuda");
        } catch (PsaException e) {
          Assert(e.Status == Status.ERR_BACKEND_UNAVAILABLE || e.Status == Status.ERR_NO_DEVICE, "status " + e.Status);
          Assert(e.Message.Length > 0, "message");
        }
      }
    });

    Check("dense forward on float[] matches the reference", () => {
      using (var cfg = Config.Load("Wan2.1_1.3b", "baseline"))
      using (var ctx = new Context(cfg, Backend.CPU)) {
        var output = new float[q.Length];
        var lse = new float[H * L];
        ctx.Forward(desc, q, desc, k, desc, v, desc, output, lse);
        Assert(MaxAbs(output, reference) < 1e-4, "max abs " + MaxAbs(output, reference));
        Assert(ctx.GetStats().RanDense && ctx.GetStats().Density == 1.0, "dense stats");
        Assert(!float.IsNaN(lse[0]) && lse[0] > 0, "lse " + lse[0]);
      }
    });

    Check("sparse forward: density < 1, finite output", () => {
      using (var cfg = Config.Load("Wan2.1_1.3b", "psa_topk"))
      using (var ctx = new Context(cfg, Backend.CPU)) {
        ctx.SetVideoGrid(T, GH, GW);
        ctx.SetStep(cfg.GetInt(Param.WARMUP_STEPS));
        var output = new float[q.Length];
        ctx.Forward(desc, q, desc, k, desc, v, desc, output);
        ForwardStats s = ctx.GetStats();
        Assert(!s.RanDense && s.Density > 0 && s.Density < 1, "density " + s.Density);
        Assert(s.KeyBlocks == L / 32, "key blocks " + s.KeyBlocks);
        Assert(s.Precision == Precision.DEFAULT, "precision " + s.Precision);
        // The public indices: the level fractions cover every block pair, and density is the
        // work they weigh (a level-l pair costs 1/l of a level-1 pair); host stage times add up.
        double[] f = s.LevelFraction;
        double all = f[LevelStat.Level1] + f[LevelStat.Level2] + f[LevelStat.Level4] + f[LevelStat.Level8] +
                     f[LevelStat.Skip];
        double work = f[LevelStat.Level1] + f[LevelStat.Level2] / 2 + f[LevelStat.Level4] / 4 + f[LevelStat.Level8] / 8;
        Assert(Math.Abs(all - 1.0) < 1e-9 && f[LevelStat.Skip] > 0, "level fractions sum " + all);
        Assert(Math.Abs(work - s.Density) < 1e-6, "density " + s.Density + " vs weighted levels " + work);
        double parts = 0;
        foreach (int i in new[] { Stage.Rearrange, Stage.Pool, Stage.Importance, Stage.Mask, Stage.Attention,
                                   Stage.Inverse })
          parts += s.StageMs[i];
        Assert(s.StageMs[Stage.Total] > 0 && parts <= s.StageMs[Stage.Total] * 1.001 + 1e-3,
               "stages " + parts + " ms of total " + s.StageMs[Stage.Total] + " ms");
        // precision = fp8: the CPU backend runs the 8-bit rule, and the stats say so.
        cfg.Set(Param.PRECISION, (long)Precision.FP8);
        using (var ctx8 = new Context(cfg, Backend.CPU)) {
          ctx8.SetVideoGrid(T, GH, GW);
          ctx8.SetStep(cfg.GetInt(Param.WARMUP_STEPS));
          var out8 = new float[q.Length];
          ctx8.Forward(desc, q, desc, k, desc, v, desc, out8);
          Assert(ctx8.GetStats().Precision == Precision.FP8, "fp8 precision " + ctx8.GetStats().Precision);
        }
        double num = 0, den = 0;
        for (int i = 0; i < output.Length; ++i) {
          num += (output[i] - reference[i]) * (output[i] - reference[i]);
          den += reference[i] * reference[i];
        }
        // A sanity bound: accuracy against dense is the library's own tests' business.
        Assert(Math.Sqrt(num / den) < 1.0, "rel L2 " + Math.Sqrt(num / den));
      }
    });

    Check("f16 forward on ushort[] bits", () => {
      var desc16 = TensorDesc.Create(Layout.BNSD, DType.F16, 1, H, L, D);
      Func<float[], ushort[]> half = a => Array.ConvertAll(a, ToHalf);
      using (var cfg = Config.Load("Wan2.1_1.3b", "baseline"))
      using (var ctx = new Context(cfg, Backend.CPU)) {
        var output = new ushort[q.Length];
        ctx.Forward(desc16, half(q), desc16, half(k), desc16, half(v), desc16, output);
        float[] back = Array.ConvertAll(output, FromHalf);
        Assert(MaxAbs(back, reference) < 1e-2, "max abs " + MaxAbs(back, reference));
      }
    });

    Check("BSND strides give the same result", () => {
      var bsnd = TensorDesc.Create(Layout.BSND, DType.F32, 1, H, L, D);
      Func<float[], float[]> toBsnd = a => {
        var r = new float[a.Length];
        for (int h = 0; h < H; ++h)
          for (int l = 0; l < L; ++l)
            Array.Copy(a, (h * L + l) * D, r, (l * H + h) * D, D);
        return r;
      };
      using (var cfg = Config.Load("Wan2.1_1.3b", "baseline"))
      using (var ctx = new Context(cfg, Backend.CPU)) {
        var output = new float[q.Length];
        ctx.Forward(bsnd, toBsnd(q), bsnd, toBsnd(k), bsnd, toBsnd(v), bsnd, output);
        double m = 0;
        for (int h = 0; h < H; ++h)
          for (int l = 0; l < L; ++l)
            for (int d = 0; d < D; ++d)
              m = Math.Max(m, Math.Abs(output[(l * H + h) * D + d] - reference[(h * L + l) * D + d]));
        Assert(m < 1e-4, "max abs " + m);
      }
    });

    Check("library shape errors reach C#", () => {
      var k96 = TensorDesc.Create(Layout.BNSD, DType.F32, 1, H, L, 96);
      using (var cfg = Config.Load("Wan2.1_1.3b", "baseline"))
      using (var ctx = new Context(cfg, Backend.CPU)) {
        PsaException e = Throws(() => ctx.Forward(desc, q, k96, new float[H * L * 96], desc, v,
                                                  desc, new float[q.Length]));
        Assert(e.Status == Status.ERR_INVALID_SHAPE, "status " + e.Status);
        Assert(e.Message == "k: shape[3] (head_dim) = 96; expected q's head_dim 64", e.Message);
        e = Throws(() => ctx.Forward(desc, q, desc, k, desc, v, desc, new float[10]));
        Assert(e.Status == Status.ERR_BUFFER_TOO_SMALL, "short array: " + e.Status);
      }
    });

    Check("disposed objects throw ObjectDisposedException", () => {
      var cfg = new Config();
      var ctx = new Context(cfg, Backend.CPU);
      ctx.Dispose();
      ctx.Dispose();
      cfg.Dispose();
      try {
        ctx.SetStep(0);
        throw new Exception("no exception");
      } catch (ObjectDisposedException) {
      }
    });

    Check("disposed descriptors and stats throw, not crash", () => {
      var d = TensorDesc.Create(Layout.BNSD, DType.F32, 1, H, L, D);
      d.Dispose();
      foreach (Action use in new Action[] { () => { var n = d.Span; }, () => { var t = d.dtype; },
                                            () => d.get_shape(0) }) {
        try {
          use();
          throw new Exception("no exception");
        } catch (ArgumentNullException e) {
          Assert(e.Message.Contains("disposed"), e.Message);
        }
      }
      var stats = new Stats();
      stats.Dispose();
      try {
        stats.get_stage_ms(0);
        throw new Exception("no exception");
      } catch (ArgumentNullException) {
      }
      using (var cfg = Config.Load("Wan2.1_1.3b", "baseline"))
      using (var ctx = new Context(cfg, Backend.CPU)) {
        try {
          ctx.Forward(d, q, desc, k, desc, v, desc, new float[q.Length]);
          throw new Exception("no exception");
        } catch (ArgumentNullException) {
        }
      }
    });

    Check("strings with NUL and non-integer values are refused by name", () => {
      PsaException e = Throws(() => Config.Load("Wan2.1_1.3b\0garbage", "psa_balanced"));
      Assert(e.Status == Status.ERR_INVALID_ARGUMENT && e.Message.StartsWith("model: contains a NUL"), e.Message);
      e = Throws(() => Config.LoadFile("/etc/passwd\0.yaml", "m"));
      Assert(e.Message.StartsWith("path: contains a NUL") && !e.Message.Contains("root"), e.Message);
      using (var cfg = Config.Load("Wan2.1_1.3b", "psa_topk")) {
        e = Throws(() => cfg.Set("warmup_steps\0evil", 3));
        Assert(e.Status == Status.ERR_INVALID_ARGUMENT, e.Message);
        foreach (double bad in new[] { 64.9, double.NaN, double.PositiveInfinity, -0.5, 1e19 }) {
          e = Throws(() => cfg.Set("warmup_steps", bad));
          Assert(e.Status == Status.ERR_INVALID_ARGUMENT && e.Message.EndsWith(": expected an integer"), e.Message);
        }
        Assert(cfg.GetInt(Param.WARMUP_STEPS) == 15, "unchanged after refusals");
      }
      try {
        new Context(null);
        throw new Exception("no exception");
      } catch (ArgumentNullException) {
      }
      // A YAML key that is not UTF-8: a status and message, not a marshalling failure.
      string path = System.IO.Path.GetTempFileName();
      System.IO.File.WriteAllBytes(path, new byte[] { (byte)'M', 0xff, (byte)':', (byte)' ', (byte)'1', 10 });
      e = Throws(() => Config.LoadFile(path, "x"));
      Assert(e.Status == Status.ERR_YAML_PARSE && e.Message.Contains("0xFF is not UTF-8"), e.Message);
      System.IO.File.Delete(path);
      var wide = TensorDesc.Strided(DType.F32, new long[] { 3, 1, 1, 64 }, new long[] { 1L << 62, 64, 64, 1 });
      Assert(wide.Span == long.MaxValue, "span " + wide.Span);
    });

    Console.WriteLine(passed + " passed, " + failed + " failed");
    return failed == 0 ? 0 : 1;
  }
}
