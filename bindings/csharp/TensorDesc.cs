// bindings/csharp/TensorDesc.cs -- factories for the SWIG proxy of psa_tensor_desc: shape
// [B, H, L, D] in a layout (psa_tensor_desc_init), or explicit strides in elements.
using System;

namespace Psa {

public partial class TensorDesc {
  /// <summary>A contiguous [B, H, L, D] tensor stored in `layout` (BNSD, BSND, BSH).</summary>
  public static TensorDesc Create(Layout layout, DType dtype, long batch, long heads,
                                  long seqLen, long headDim) {
    var desc = new TensorDesc();
    PsaNative.psa_tensor_desc_init(desc, layout, dtype, batch, heads, seqLen, headDim);
    return desc;
  }

  /// <summary>Logical shape [B, H, L, D] with explicit strides (elements) per dimension.</summary>
  public static TensorDesc Strided(DType dtype, long[] shape, long[] strides) {
    if (shape == null || strides == null || shape.Length != 4 || strides.Length != 4)
      throw new ArgumentException("shape and strides need 4 entries: [B, H, L, D]");
    var desc = new TensorDesc();
    desc.dtype = dtype;
    desc.set_shape(shape[0], shape[1], shape[2], shape[3]);
    desc.set_strides(strides[0], strides[1], strides[2], strides[3]);
    return desc;
  }

  public long[] Shape { get { return new[] { get_shape(0), get_shape(1), get_shape(2), get_shape(3) }; } }
  public long[] Strides { get { return new[] { get_stride(0), get_stride(1), get_stride(2), get_stride(3) }; } }

  /// <summary>Elements a buffer must hold: one past the largest offset the strides reach;
  /// long.MaxValue when that does not fit in a long (libpsa refuses such a descriptor).</summary>
  public long Span {
    get {
      long last = 0;
      try {
        checked {
          for (int i = 0; i < 4; ++i) {
            if (get_shape(i) <= 0) return 0;
            last += (get_shape(i) - 1) * get_stride(i);
          }
          return last + 1;
        }
      } catch (OverflowException) {
        return long.MaxValue;
      }
    }
  }
}

}  // namespace Psa
