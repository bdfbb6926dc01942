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

}  // namespace Psa
