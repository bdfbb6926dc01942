# bindings/python/psa/_config.py -- psa.Config (one validated preset) and the preset
# catalog, over the SWIG layer. Parameters are read and written by name ("block_size.n",
# the YAML-style key psa_param_info reports) or by psa.Param member.
"""Configs and presets."""

import enum

from . import capi


def _enum(name, prefix, exclude=()):
    """An IntEnum of the capi constants named prefix + X (PSA_DTYPE_F16 -> DType.F16)."""
    members = [(key[len(prefix):], getattr(capi, key)) for key in dir(capi)
               if key.startswith(prefix) and not key.endswith("_")
               and not any(key.startswith(e) for e in exclude)]
    return enum.IntEnum(name, sorted(members, key=lambda kv: kv[1]))


Status = enum.IntEnum("Status", [("OK", capi.PSA_OK)] + sorted(
    ((k[len("PSA_"):], getattr(capi, k)) for k in dir(capi) if k.startswith("PSA_ERR_")),
    key=lambda kv: kv[1]))
DType = _enum("DType", "PSA_DTYPE_")
Layout = _enum("Layout", "PSA_LAYOUT_")
Method = _enum("Method", "PSA_METHOD_")
Backend = _enum("Backend", "PSA_BACKEND_")
TextPosition = _enum("TextPosition", "PSA_TEXT_", exclude=("PSA_TEXT_RULE_",))
Param = _enum("Param", "PSA_PARAM_", exclude=("PSA_PARAM_TYPE_",))


def _param_id(key):
    if isinstance(key, str):
        return capi.psa_param_from_name(key)
    return int(key)


def param_info(key):
    """(name, is_int, lower, upper) of a parameter given by name or psa.Param."""
    name, ptype, lower, upper = capi.psa_param_info(_param_id(key))
    return name, ptype == capi.PSA_PARAM_TYPE_INT, lower, upper


class Config:
    """A validated set of parameters (one preset). Mapping-like:

        cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
        cfg["warmup_steps"] = 0          # or cfg[psa.Param.WARMUP_STEPS] = 0
        cfg["type"] = psa.Method.DENSE
    """

    def __init__(self, _handle=None):
        self._handle = _handle if _handle is not None else capi.psa_config_create()

    # -- construction ------------------------------------------------------------------
    @classmethod
    def load(cls, model, preset=None, path=None, yaml=None):
        """Loads `preset` (None: the model's default_attention) of `model` from the
        library's embedded attention_config.yaml, or from the file `path`, or from the
        YAML text `yaml`."""
        if path is not None and yaml is not None:
            raise ValueError("pass path= or yaml=, not both")
        if path is not None:
            return cls(capi.psa_config_load_file(str(path), model, preset))
        if yaml is not None:
            return cls(capi.psa_config_load_string(yaml, model, preset))
        return cls(capi.psa_config_load_embedded(model, preset))

    @staticmethod
    def presets(path=None, yaml=None):
        """{model: [preset, ...]} of the embedded YAML (or of `path` / `yaml`), file order."""
        return {m: c.presets for m, c in _catalog(path, yaml).items()}

    @staticmethod
    def default_preset(model, path=None, yaml=None):
        return _catalog(path, yaml)[model].default

    def copy(self):
        return Config(capi.psa_config_clone(self._handle))

    # -- parameters --------------------------------------------------------------------
    def __getitem__(self, key):
        pid = _param_id(key)
        if capi.psa_param_info(pid)[1] == capi.PSA_PARAM_TYPE_INT:
            return capi.psa_config_get_int(self._handle, pid)
        return capi.psa_config_get_double(self._handle, pid)

    def __setitem__(self, key, value):
        pid = _param_id(key)
        if capi.psa_param_info(pid)[1] == capi.PSA_PARAM_TYPE_INT:
            capi.psa_config_set_int(self._handle, pid, int(value))
        else:
            capi.psa_config_set_double(self._handle, pid, float(value))

    def keys(self):
        return [capi.psa_param_info(i)[0] for i in range(capi.PSA_PARAM_COUNT_)]

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def to_dict(self):
        return dict(self.items())

    def validate(self):
        """Checks the cross-parameter rules; raises psa.Error (PSA_ERR_INVALID_CONFIG)."""
        capi.psa_config_validate(self._handle)

    def __repr__(self):
        return "psa.Config(type=%d, block=%dx%d)" % (self["type"], self["block_size.m"],
                                                      self["block_size.n"])


class _Model:
    __slots__ = ("presets", "default")

    def __init__(self, presets, default):
        self.presets, self.default = presets, default


def _catalog(path=None, yaml=None):
    cat = (capi.psa_catalog_open_string(yaml) if yaml is not None
           else capi.psa_catalog_open(None if path is None else str(path)))
    models = {}
    for i in range(capi.psa_catalog_model_count(cat)):
        model = capi.psa_catalog_model_name(cat, i)
        count = capi.psa_catalog_preset_count(cat, model)
        models[model] = _Model([capi.psa_catalog_preset_name(cat, model, j) for j in range(count)],
                               capi.psa_catalog_default_preset(cat, model))
    return models
