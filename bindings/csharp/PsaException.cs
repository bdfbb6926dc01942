// bindings/csharp/PsaException.cs -- the exception of every failing libpsa call. Thrown by
// the one error hook in psa.i (the csout typemap of psa_status) with the library's message,
// and by this layer's own argument checks with a status of the same table.
using System;

namespace Psa {

public class PsaException : Exception {
  /// <summary>The psa_status of the failure (never Status.OK).</summary>
  public Status Status { get; }

  /// <summary>"PSA_ERR_INVALID_SHAPE", ...</summary>
  public string StatusName { get { return PsaNative.psa_status_name(Status); } }

  public PsaException(Status status, string message) : base(message) { Status = status; }

  public override string ToString() {
    return StatusName + ": " + Message;
  }
}

// Argument checks of the generated layer (psa.i's typemaps).
internal static class PsaStrings {
  // A string passed to C must not hold U+0000: C would read it only up to there.
  internal static void CheckNoNul(string value, string name) {
    if (value != null && value.IndexOf('\0') >= 0)
      throw new PsaException(Status.ERR_INVALID_ARGUMENT,
                             name + ": contains a NUL character at index " + value.IndexOf('\0'));
  }
}

}  // namespace Psa
