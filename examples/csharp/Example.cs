// examples/csharp/Example.cs -- PSA from C# (Mono) through the Psa assembly: load a preset,
// run a sparse forward on a small video-like input on float[] arrays (CPU backend), compare
// with a dense forward (a second context with Param.METHOD = Method.DENSE). The input is the
// one of examples/c/video_input.h. Build and run from the repository root, against the
// CMake build in build/ (examples/README.md):
//   cmake --build build --target psa_csharp_assembly && mcs -r:build/bindings/csharp/Psa.dll -out:build/examples/Example.exe examples/csharp/Example.cs && MONO_PATH=build/bindings/csharp LD_LIBRARY_PATH=build/bindings/csharp:build mono build/examples/Example.exe
using System;
using Psa;

static class Example {
  const int Heads = 2, T = 4, H = 16, W = 16, Dim = 64, Len = T * H * W;

  // Counter-based splitmix64 draw `i` in [0, 1): identical in every example's language.
  static double Uniform(ulong i) {
    ulong z = 42UL + (i + 1UL) * 0x9e3779b97f4a7c15UL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
    z ^= z >> 31;
    return (z >> 11) * (1.0 / 9007199254740992.0);
  }

  static void VideoQkv(float[] q, float[] k, float[] v) {
    const double twoPi = 6.283185307179586;
    ulong noiseBase = (ulong)(Heads * 2 * Dim * 4);
    for (long hd = 0; hd < Heads; ++hd)
      for (long l = 0; l < Len; ++l) {
        double tt = (double)(l / (H * W)) / T, hh = (double)((l / W) % H) / H, ww = (double)(l % W) / W;
        for (long d = 0; d < Dim; ++d) {
          var wave = new double[2];
          for (int c = 0; c < 2; ++c) {
            ulong b = (ulong)(((hd * 2 + c) * Dim + d) * 4);
            double ft = 3 * Uniform(b) - 1.5, fh = 3 * Uniform(b + 1) - 1.5;
            double fw = 3 * Uniform(b + 2) - 1.5, phase = twoPi * Uniform(b + 3);
            wave[c] = Math.Cos(twoPi * (ft * tt + fh * hh + fw * ww) + phase);
          }
          long at = (hd * Len + l) * Dim + d;
          ulong n = noiseBase + (ulong)at * 2UL;
          q[at] = (float)(1.4142135623730951 * wave[0] + 0.2 * (Uniform(n) - 0.5));
          k[at] = (float)(1.4142135623730951 * wave[0] + 0.2 * (Uniform(n + 1) - 0.5));
          v[at] = (float)wave[1];
        }
      }
  }

  static ForwardStats Run(Config config, float[] q, float[] k, float[] v, float[] output) {
    using (var ctx = new Context(config, Backend.CPU)) {
      ctx.SetVideoGrid(T, H, W);
      ctx.SetStep(config.GetInt(Param.WARMUP_STEPS));  // the first step after warm-up: sparse
      var desc = TensorDesc.Create(Layout.BNSD, DType.F32, 1, Heads, Len, Dim);
      ctx.Forward(desc, q, desc, k, desc, v, desc, output);
      return ctx.GetStats();
    }
  }

  static int Main() {
    int n = Heads * Len * Dim;
    float[] q = new float[n], k = new float[n], v = new float[n];
    float[] sparse = new float[n], dense = new float[n];
    VideoQkv(q, k, v);
    Console.WriteLine("libpsa " + Context.LibraryVersion + ", Psa.dll " +
                      typeof(Context).Assembly.GetName().Version);
    try {
      ForwardStats s, d;
      using (var config = Config.Load("Wan2.1_1.3b", "psa_balanced")) {
        s = Run(config, q, k, v, sparse);
        config.Set(Param.METHOD, (long)Method.DENSE);
        d = Run(config, q, k, v, dense);
      }
      double num = 0, den = 0;
      for (int i = 0; i < n; ++i) {
        num += (sparse[i] - (double)dense[i]) * (sparse[i] - (double)dense[i]);
        den += (double)dense[i] * dense[i];
      }
      double err = Math.Sqrt(num / den);
      Console.WriteLine("density {0:F4}, rel-L2 vs dense {1:E4}, time sparse {2:F1} ms, dense {3:F1} ms",
                        s.Density, err, s.StageMs[Stage.Total],
                        d.StageMs[Stage.Total]);
      try {
        Config.Load("Wan2.1_1.3b", "no_such_preset");
      } catch (PsaException e) {
        Console.WriteLine("expected error: " + e);
      }
      return s.Density > 0 && s.Density < 1 && d.RanDense && err < 0.5 ? 0 : 1;
    } catch (PsaException e) {
      Console.Error.WriteLine("error: " + e);
      return 1;
    }
  }
}
