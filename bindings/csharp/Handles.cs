// bindings/csharp/Handles.cs -- SafeHandles owning libpsa's opaque objects: the runtime
// releases them exactly once, also when a Dispose() is forgotten. Destroy calls never fail.
using System;
using System.Runtime.InteropServices;

namespace Psa {

internal abstract class PsaHandle : SafeHandle {
  protected PsaHandle(IntPtr ptr) : base(IntPtr.Zero, true) { SetHandle(ptr); }
  public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

  // The raw pointer for one native call; throws once disposed.
  internal IntPtr Get(string owner) {
    if (IsClosed || IsInvalid) throw new ObjectDisposedException(owner);
    return handle;
  }
}

internal sealed class ConfigHandle : PsaHandle {
  internal ConfigHandle(IntPtr ptr) : base(ptr) {}
  protected override bool ReleaseHandle() { PsaNative.psa_config_destroy(handle); return true; }
}

internal sealed class ContextHandle : PsaHandle {
  internal ContextHandle(IntPtr ptr) : base(ptr) {}
  protected override bool ReleaseHandle() { PsaNative.psa_context_destroy(handle); return true; }
}

internal sealed class CatalogHandle : PsaHandle {
  internal CatalogHandle(IntPtr ptr) : base(ptr) {}
  protected override bool ReleaseHandle() { PsaNative.psa_catalog_destroy(handle); return true; }
}

}  // namespace Psa
