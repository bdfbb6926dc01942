// bindings/csharp/Config.cs -- Psa.Config (one validated preset) and the preset catalog,
// over the SWIG-generated PsaNative. Parameters by Param id or by their YAML-style name
// ("block_size.n"); failures throw PsaException from the error hook in psa.i.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Psa {

public sealed class Config : IDisposable {
  internal readonly ConfigHandle Handle;

  /// <summary>The library defaults.</summary>
  public Config() {
    IntPtr ptr;
    PsaNative.psa_config_create(out ptr);
    Handle = new ConfigHandle(ptr);
  }

  internal Config(IntPtr ptr) { Handle = new ConfigHandle(ptr); }

  /// <summary>Preset `preset` (null: the model's default_attention) of `model` from the
  /// embedded attention_config.yaml.</summary>
  public static Config Load(string model, string preset = null) {
    IntPtr ptr;
    PsaNative.psa_config_load_embedded(model, preset, out ptr);
    return new Config(ptr);
  }

  public static Config LoadFile(string path, string model, string preset = null) {
    IntPtr ptr;
    PsaNative.psa_config_load_file(path, model, preset, out ptr);
    return new Config(ptr);
  }

  public static Config LoadYaml(string yaml, string model, string preset = null) {
    IntPtr ptr;
    PsaNative.psa_config_load_string(yaml, model, preset, out ptr);
    return new Config(ptr);
  }

  /// <summary>Model -> preset names of the embedded YAML (or of the file `path`), in file
  /// order.</summary>
  public static Dictionary<string, List<string>> Presets(string path = null) {
    IntPtr ptr;
    PsaNative.psa_catalog_open(path, out ptr);
    using (var catalog = new CatalogHandle(ptr)) {
      var result = new Dictionary<string, List<string>>();
      IntPtr cat = catalog.Get("catalog");
      int models = PsaNative.psa_catalog_model_count(cat);
      for (int i = 0; i < models; ++i) {
        string model = PsaNative.psa_catalog_model_name(cat, i);
        var names = new List<string>();
        int count = PsaNative.psa_catalog_preset_count(cat, model);
        for (int j = 0; j < count; ++j) names.Add(PsaNative.psa_catalog_preset_name(cat, model, j));
        result[model] = names;
      }
      return result;
    }
  }

  public Config Clone() {
    IntPtr ptr;
    PsaNative.psa_config_clone(Ptr, out ptr);
    GC.KeepAlive(this);
    return new Config(ptr);
  }

  /// <summary>Checks the cross-parameter rules (PsaException ERR_INVALID_CONFIG).</summary>
  public void Validate() { PsaNative.psa_config_validate(Ptr); GC.KeepAlive(this); }

  public void Set(Param param, long value) {
    PsaNative.psa_config_set_int(Ptr, param, value);
    GC.KeepAlive(this);
  }

  public void Set(Param param, double value) {
    PsaNative.psa_config_set_double(Ptr, param, value);
    GC.KeepAlive(this);
  }

  /// <summary>Sets a parameter by name, as an int or a double according to its type. An
  /// integer parameter takes only a whole value inside long (64.9, NaN or 1e19 throw, naming
  /// the parameter and the value, as YAML does).</summary>
  public void Set(string name, double value) {
    Param param = ParamFromName(name);
    if (!IsInt(param)) {
      Set(param, value);
      return;
    }
    // -2^63 <= value < 2^63: both bounds are exact doubles.
    if (double.IsNaN(value) || double.IsInfinity(value) || Math.Floor(value) != value ||
        value < -9223372036854775808.0 || value >= 9223372036854775808.0)
      throw new PsaException(Status.ERR_INVALID_ARGUMENT,
                             name + " = " + value.ToString("R", System.Globalization.CultureInfo.InvariantCulture) +
                             ": expected an integer");
    Set(param, (long)value);
  }

  public long GetInt(Param param) {
    long value;
    PsaNative.psa_config_get_int(Ptr, param, out value);
    GC.KeepAlive(this);
    return value;
  }

  public double GetDouble(Param param) {
    double value;
    PsaNative.psa_config_get_double(Ptr, param, out value);
    GC.KeepAlive(this);
    return value;
  }

  /// <summary>Any parameter by name, as a double.</summary>
  public double Get(string name) {
    Param param = ParamFromName(name);
    return IsInt(param) ? GetInt(param) : GetDouble(param);
  }

  public static Param ParamFromName(string name) {
    Param param;
    PsaNative.psa_param_from_name(name, out param);
    return param;
  }

  public static string ParamName(Param param) {
    IntPtr name;
    ParamType type;
    double lower, upper;
    PsaNative.psa_param_info(param, out name, out type, out lower, out upper);
    return Marshal.PtrToStringAnsi(name);
  }

  private static bool IsInt(Param param) {
    IntPtr name;
    ParamType type;
    double lower, upper;
    PsaNative.psa_param_info(param, out name, out type, out lower, out upper);
    return type == ParamType.INT;
  }

  internal IntPtr Ptr { get { return Handle.Get("Psa.Config"); } }

  public void Dispose() { Handle.Dispose(); }
}

}  // namespace Psa
