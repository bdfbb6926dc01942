// bindings/csharp/Context.cs -- Psa.Context: a config bound to a backend (IDisposable over a
// SafeHandle). Forward on device pointers (IntPtr, CUDA, stream-ordered) or on managed
// arrays for the CPU backend: float[] for f32, ushort[] holding f16/bf16 bits (Mono has no
// System.Half). One context must not be used by two threads at once.
using System;
using System.Runtime.InteropServices;

namespace Psa {

/// <summary>Indices of ForwardStats.StageMs (PSA_STAGE_* of psa.h).</summary>
public static class Stage {
  public static readonly int Rearrange = PsaNative.PSA_STAGE_REARRANGE, Pool = PsaNative.PSA_STAGE_POOL,
      Importance = PsaNative.PSA_STAGE_IMPORTANCE, Mask = PsaNative.PSA_STAGE_MASK,
      Attention = PsaNative.PSA_STAGE_ATTENTION, Inverse = PsaNative.PSA_STAGE_INVERSE,
      Total = PsaNative.PSA_STAGE_TOTAL;
}

/// <summary>Indices of ForwardStats.LevelFraction (PSA_STAT_LEVEL_* of psa.h).</summary>
public static class LevelStat {
  public static readonly int Level1 = PsaNative.PSA_STAT_LEVEL_1, Level2 = PsaNative.PSA_STAT_LEVEL_2,
      Level4 = PsaNative.PSA_STAT_LEVEL_4, Level8 = PsaNative.PSA_STAT_LEVEL_8,
      Skip = PsaNative.PSA_STAT_LEVEL_SKIP;
}

/// <summary>Statistics of a context's last forward (psa_stats).</summary>
public sealed class ForwardStats {
  public bool RanDense;
  public long Step, CallIndex, QueryBlocks, KeyBlocks;
  public double Density;
  /// <summary>Fractions of block pairs at level 1, 2, 4, 8 and skipped (index: LevelStat).</summary>
  public double[] LevelFraction = new double[5];
  /// <summary>Host milliseconds per stage (index: Stage; CPU backend only).</summary>
  public double[] StageMs = new double[7];
  /// <summary>The arithmetic the attention ran: FP8 only where asked for and run on this shape.</summary>
  public Precision Precision;
}

public sealed class Context : IDisposable {
  private readonly ContextHandle handle;
  private byte[] workspace = new byte[0];  // CPU forwards on arrays reuse it

  public Context(Config config, Backend backend = Backend.AUTO, int device = -1) {
    if (config == null) throw new ArgumentNullException("config");
    IntPtr ptr;
    PsaNative.psa_context_create(config.Ptr, backend, device, out ptr);
    GC.KeepAlive(config);
    handle = new ContextHandle(ptr);
  }

  private IntPtr Ptr { get { return handle.Get("Psa.Context"); } }

  /// <summary>The backend actually chosen (CPU or CUDA).</summary>
  public Backend Backend {
    get { Backend b = PsaNative.psa_context_backend(Ptr); GC.KeepAlive(this); return b; }
  }

  /// <summary>A copy of the context's config.</summary>
  public Config GetConfig() {
    IntPtr ptr;
    PsaNative.psa_context_get_config(Ptr, out ptr);
    GC.KeepAlive(this);
    return new Config(ptr);
  }

  public void SetVideoGrid(long t, long h, long w, long textLength = 0,
                           TextPosition position = TextPosition.NONE) {
    PsaNative.psa_context_set_video_grid(Ptr, t, h, w, textLength, position);
    GC.KeepAlive(this);
  }

  /// <summary>Pins the denoising step (>= 0); -1 returns to counting forwards.</summary>
  public void SetStep(long step) { PsaNative.psa_context_set_step(Ptr, step); GC.KeepAlive(this); }

  public void ResetCalls() { PsaNative.psa_context_reset_calls(Ptr); GC.KeepAlive(this); }

  /// <summary>Workspace bytes a forward with these descriptors needs (plans the shape).</summary>
  public ulong WorkspaceSize(TensorDesc q, TensorDesc k, TensorDesc v, TensorDesc output) {
    ulong bytes;
    PsaNative.psa_workspace_size(Ptr, q, k, v, output, out bytes);
    GC.KeepAlive(this);
    return bytes;
  }

  /// <summary>Forward on raw pointers: device memory for CUDA (enqueued on `stream`, a
  /// cudaStream_t; inputs must stay valid until the stream reaches it), host memory for
  /// CPU. lse and stream may be IntPtr.Zero; workspace holds workspaceBytes bytes.</summary>
  public void Forward(TensorDesc qDesc, IntPtr q, TensorDesc kDesc, IntPtr k, TensorDesc vDesc,
                      IntPtr v, TensorDesc outDesc, IntPtr output, IntPtr lse, IntPtr workspace,
                      ulong workspaceBytes, IntPtr stream) {
    PsaNative.psa_attention_forward(Ptr, qDesc, q, kDesc, k, vDesc, v, outDesc, output, lse,
                                    workspace, workspaceBytes, stream);
    GC.KeepAlive(this);
  }

  /// <summary>CPU forward on f32 arrays. lse (optional) holds B*H*L floats.</summary>
  public void Forward(TensorDesc qDesc, float[] q, TensorDesc kDesc, float[] k, TensorDesc vDesc,
                      float[] v, TensorDesc outDesc, float[] output, float[] lse = null) {
    ForwardArrays(DType.F32, qDesc, q, q == null ? 0 : q.Length, kDesc, k, k == null ? 0 : k.Length,
                  vDesc, v, v == null ? 0 : v.Length, outDesc, output,
                  output == null ? 0 : output.Length, lse);
  }

  /// <summary>CPU forward on f16 or bf16 values given as their 16-bit patterns.</summary>
  public void Forward(TensorDesc qDesc, ushort[] q, TensorDesc kDesc, ushort[] k,
                      TensorDesc vDesc, ushort[] v, TensorDesc outDesc, ushort[] output,
                      float[] lse = null) {
    if (qDesc == null) throw new ArgumentNullException("qDesc");
    if (qDesc.dtype == DType.F32)
      throw new PsaException(Status.ERR_INVALID_DTYPE,
                             "q: dtype = f32 with ushort[] data; use float[] for f32");
    ForwardArrays(qDesc.dtype, qDesc, q, q == null ? 0 : q.Length, kDesc, k, k == null ? 0 : k.Length,
                  vDesc, v, v == null ? 0 : v.Length, outDesc, output,
                  output == null ? 0 : output.Length, lse);
  }

  private void ForwardArrays(DType arrayType, TensorDesc qDesc, Array q, long qLen,
                             TensorDesc kDesc, Array k, long kLen, TensorDesc vDesc, Array v,
                             long vLen, TensorDesc outDesc, Array output, long outLen,
                             float[] lse) {
    if (Backend != Backend.CPU)
      throw new PsaException(Status.ERR_WRONG_MEMORY_SPACE,
                             "managed arrays are host memory: use the IntPtr overload with " +
                             "device pointers for the CUDA backend");
    CheckLength("q", qDesc, qLen, arrayType);
    CheckLength("k", kDesc, kLen, arrayType);
    CheckLength("v", vDesc, vLen, arrayType);
    CheckLength("out", outDesc, outLen, arrayType);
    // libpsa checks the shapes first: after it, B * H * L fits in a long.
    ulong bytes = WorkspaceSize(qDesc, kDesc, vDesc, outDesc);
    if (lse != null) {
      long need = outDesc.get_shape(0) * outDesc.get_shape(1) * outDesc.get_shape(2);
      if (lse.Length < need)
        throw new PsaException(Status.ERR_BUFFER_TOO_SMALL,
                               "lse: " + lse.Length + " floats; need " + need + " (B*H*L)");
    }
    if ((ulong)workspace.Length < bytes) workspace = new byte[bytes];
    var pins = new GCHandle[6];
    try {
      int n = 0;
      IntPtr pq = Pin(q, pins, n++), pk = Pin(k, pins, n++), pv = Pin(v, pins, n++);
      IntPtr po = Pin(output, pins, n++), pl = Pin(lse, pins, n++), pw = Pin(workspace, pins, n++);
      Forward(qDesc, pq, kDesc, pk, vDesc, pv, outDesc, po, pl, bytes == 0 ? IntPtr.Zero : pw,
              bytes, IntPtr.Zero);
    } finally {
      foreach (var pin in pins) if (pin.IsAllocated) pin.Free();
    }
  }

  private static void CheckLength(string name, TensorDesc desc, long length, DType arrayType) {
    if (desc == null) throw new ArgumentNullException(name + "Desc");
    if (arrayType != DType.F32 && desc.dtype == DType.F32)
      throw new PsaException(Status.ERR_INVALID_DTYPE,
                             name + ": dtype = f32 with ushort[] data; use float[] for f32");
    if (arrayType == DType.F32 && desc.dtype != DType.F32)
      throw new PsaException(Status.ERR_INVALID_DTYPE,
                             name + ": dtype = " + desc.dtype + " with float[] data; use ushort[] bits");
    if (length < desc.Span)
      throw new PsaException(Status.ERR_BUFFER_TOO_SMALL,
                             name + ": array of " + length + " elements; the descriptor reaches " +
                             desc.Span);
  }

  private static IntPtr Pin(Array array, GCHandle[] pins, int slot) {
    if (array == null) return IntPtr.Zero;
    pins[slot] = GCHandle.Alloc(array, GCHandleType.Pinned);
    return pins[slot].AddrOfPinnedObject();
  }

  /// <summary>Statistics of the last forward (on CUDA this waits for its stream).</summary>
  public ForwardStats GetStats() {
    using (var raw = new Stats()) {
      PsaNative.psa_context_get_stats(Ptr, raw);
      GC.KeepAlive(this);
      var s = new ForwardStats {
        RanDense = raw.ran_dense != 0, Step = raw.step, CallIndex = raw.call_index,
        QueryBlocks = raw.query_blocks, KeyBlocks = raw.key_blocks, Density = raw.density,
        Precision = (Precision)raw.precision
      };
      for (int i = 0; i < 5; ++i) s.LevelFraction[i] = raw.get_level_fraction(i);
      for (int i = 0; i < 7; ++i) s.StageMs[i] = raw.get_stage_ms(i);
      return s;
    }
  }

  public void Dispose() { handle.Dispose(); }

  /// <summary>Version of the loaded libpsa ("MAJOR.MINOR.PATCH").</summary>
  public static string LibraryVersion { get { return PsaNative.psa_version_string(); } }

  /// <summary>Version of the psa.h this assembly was generated from (PSA_VERSION_STRING).</summary>
  public static string HeaderVersion { get { return PsaNative.PSA_VERSION_STRING; } }
}

}  // namespace Psa
