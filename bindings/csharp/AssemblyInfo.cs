// bindings/csharp/AssemblyInfo.cs -- identity of Psa.dll. The version must equal
// PSA_VERSION_* in include/psa.h (checked by the packaging.versions test and, at run time,
// against psa_version_string() by the C# test).
using System.Reflection;

[assembly: AssemblyTitle("Psa")]
[assembly: AssemblyDescription("Pyramid Sparse Attention (libpsa) bindings")]
[assembly: AssemblyVersion("0.1.0.0")]
[assembly: AssemblyInformationalVersion("0.1.0")]
// Licensed under the Apache License, Version 2.0 (LICENSE and NOTICE at the repository root).
[assembly: AssemblyCopyright("Copyright The libpsa authors. Licensed under the Apache License, Version 2.0")]
[assembly: AssemblyMetadata("License", "Apache-2.0")]
