# bindings/python/psa/_config.py -- psa.Config (one validated preset) and the preset
# catalog, over the SWIG layer. Parameters are read and written by name ("block_size.n",
# the YAML-style key psa_param_info reports) or by psa.Param member; enum-valued parameters
# take and give the YAML words ("topk", "Gilbert", "rf_v2") as the enums below.
"""Configs, presets and the parameter enums."""

from __future__ import annotations

import enum
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Type, Union

from . import capi


# The parameter whose words each enum below carries, and the words once read from the library.
_ENUM_PARAM: Dict[str, int] = {
    "Method": capi.PSA_PARAM_METHOD, "MaskMode": capi.PSA_PARAM_MASK_MODE,
    "MaskFormat": capi.PSA_PARAM_MASK_FORMAT, "Rearrange": capi.PSA_PARAM_REARRANGE_METHOD,
    "TextRule": capi.PSA_PARAM_TEXT_RULE, "Precision": capi.PSA_PARAM_PRECISION}
_WORDS: Dict[str, Dict[int, str]] = {}


class _WordEnum(enum.IntEnum):
    """An IntEnum whose members also have a YAML word (``str(member)`` is the word).

    Members compare equal to their C values, so code written against the ints keeps
    working; :meth:`parse` accepts a word (in the YAML's case, or any case), a member or an
    int.
    """

    @classmethod
    def _words(cls) -> Dict[int, str]:
        """Value -> YAML word, as the library spells it (psa_param_value_name)."""
        words = _WORDS.get(cls.__name__)
        if words is None:
            param = _ENUM_PARAM[cls.__name__]
            words = {int(m): str(capi.psa_param_value_name(param, int(m))) for m in cls}
            _WORDS[cls.__name__] = words
        return words

    @property
    def word(self) -> str:
        """The YAML word of this value (e.g. ``"topk"``, ``"Gilbert"``)."""
        return self._words()[int(self)]

    def __str__(self) -> str:
        return self.word

    def __format__(self, spec: str) -> str:
        return format(self.word, spec)

    @classmethod
    def parse(cls, value: Union[str, int, "_WordEnum"], what: str = "") -> "_WordEnum":
        """The member for a YAML word, a member or an int; ValueError naming the allowed
        words otherwise."""
        label = what or cls.__name__
        if isinstance(value, bool):
            raise ValueError("%s = %r: expected one of %s" % (label, value, cls._allowed()))
        if isinstance(value, str):
            for number, word in cls._words().items():
                if value == word or value.lower() == word.lower():
                    return cls(number)
            raise ValueError("%s = %r: expected one of %s" % (label, value, cls._allowed()))
        try:
            return cls(int(value))
        except (ValueError, TypeError):
            raise ValueError("%s = %r: expected one of %s" % (label, value, cls._allowed())) \
                from None

    @classmethod
    def _allowed(cls) -> str:
        return ", ".join(repr(w) for w in cls._words().values())


class Method(_WordEnum):
    """Attention method (YAML ``type``)."""

    PSA = capi.PSA_METHOD_PSA
    DENSE = capi.PSA_METHOD_DENSE
    RF_V2 = capi.PSA_METHOD_RF_V2
    ADA_BSA = capi.PSA_METHOD_ADA_BSA
    PSA_CAUSAL = capi.PSA_METHOD_PSA_CAUSAL


class MaskMode(_WordEnum):
    """How mask quotas are read (YAML ``mask_mode``)."""

    TOPK = capi.PSA_MASK_MODE_TOPK
    THRESHOLDBOUND = capi.PSA_MASK_MODE_THRESHOLDBOUND
    ENERGYBOUND = capi.PSA_MASK_MODE_ENERGYBOUND


class MaskFormat(_WordEnum):
    """Mask format (YAML ``attn_impl``): segments (``new_mask_type``) or levels
    (``old_mask_type``)."""

    SEGMENTS = capi.PSA_MASK_FORMAT_SEGMENTS
    LEVELS = capi.PSA_MASK_FORMAT_LEVELS


class Rearrange(_WordEnum):
    """Token rearrangement (YAML ``rearrange_method``)."""

    GILBERT = capi.PSA_REARRANGE_GILBERT
    STA = capi.PSA_REARRANGE_STA
    SEMANTIC_AWARE = capi.PSA_REARRANGE_SEMANTIC_AWARE
    HYBRID = capi.PSA_REARRANGE_HYBRID


class TextRule(_WordEnum):
    """How text tokens enter the PSA mask (parameter ``text_rule``)."""

    SPAN = capi.PSA_TEXT_RULE_SPAN
    REFERENCE_SUFFIX = capi.PSA_TEXT_RULE_REFERENCE_SUFFIX


class Precision(_WordEnum):
    """Arithmetic of the sparse attention stage (parameter ``precision``): DEFAULT (the
    input's 16-bit type on the GPU, fp32 on the CPU) or FP8 (the 8-bit rule, PSA's block
    importance on the same int8 operands: the CPU backend evaluates it exactly; the CUDA backend
    runs it on Hopper for type psa, non-causal, head_dim 128, power-of-two sample counts, and the
    default elsewhere -- ``Stats.precision`` says which ran)."""

    DEFAULT = capi.PSA_PRECISION_DEFAULT
    FP8 = capi.PSA_PRECISION_FP8


def _int_enum(name: str, prefix: str, exclude: Tuple[str, ...] = ()) -> Type[enum.IntEnum]:
    """An IntEnum of the capi constants named prefix + X (PSA_DTYPE_F16 -> DType.F16)."""
    members = [(key[len(prefix):], int(getattr(capi, key))) for key in dir(capi)
               if key.startswith(prefix) and not key.endswith("_")
               and not any(key.startswith(e) for e in exclude)]
    made = enum.IntEnum(name, sorted(members, key=lambda kv: kv[1]))  # type: ignore[misc]
    made.__module__ = __name__
    return made


Status = enum.IntEnum("Status", [("OK", int(capi.PSA_OK))] + sorted(  # type: ignore[misc]
    ((k[len("PSA_"):], int(getattr(capi, k))) for k in dir(capi) if k.startswith("PSA_ERR_")),
    key=lambda kv: kv[1]))
Status.__doc__ = "psa_status values (psa.Error.status compares equal to these)."
DType = _int_enum("DType", "PSA_DTYPE_")
DType.__doc__ = "Element types: F32, F16, BF16."
Layout = _int_enum("Layout", "PSA_LAYOUT_")
Layout.__doc__ = "Stride patterns of psa_tensor_desc_init: BNSD, BSND, BSH."
Backend = _int_enum("Backend", "PSA_BACKEND_")
Backend.__doc__ = "Backends: AUTO (CUDA when built in and a device exists), CPU, CUDA."
TextPosition = _int_enum("TextPosition", "PSA_TEXT_", exclude=("PSA_TEXT_RULE_",))
TextPosition.__doc__ = "Where text tokens sit in the sequence: NONE, FIRST, LAST."
Param = _int_enum("Param", "PSA_PARAM_", exclude=("PSA_PARAM_TYPE_",))
Param.__doc__ = "Parameter ids; their YAML-style names are what Config keys are."

# Parameters whose values are enum words; 0/1 integer parameters read back as bool.
_ENUM_PARAMS: Dict[str, Type[_WordEnum]] = {
    "type": Method, "mask_mode": MaskMode, "attn_impl": MaskFormat,
    "rearrange_method": Rearrange, "text_rule": TextRule, "precision": Precision}

Value = Union[int, float, bool, str, _WordEnum]
Key = Union[str, int]


def _flat_items(values: Mapping[Any, Any], prefix: str, depth: int) -> Iterator[Tuple[Any, Any]]:
    """(key, value) pairs of `values` with nested mappings joined into dotted keys
    ({"block_size": {"n": 64}} -> ("block_size.n", 64)); keys at the top level pass through
    unchanged (names or psa.Param members). The YAML nests one level below a section name;
    deeper is an error."""
    for key, value in values.items():
        name = prefix + str(key) if prefix else key
        if isinstance(value, Mapping):
            if depth >= 1 or isinstance(key, bool) or not isinstance(key, (str, int)):
                names = (str(capi.psa_param_info(i)[0]) for i in range(int(capi.PSA_PARAM_COUNT_)))
                sections = sorted({n.split(".")[0] for n in names if "." in n})  # the psa.h names
                raise ValueError("%s: a nested mapping is allowed only under a YAML section name "
                                 "(%s)" % (name, ", ".join(sections)))
            yield from _flat_items(value, "%s." % name, depth + 1)
        elif isinstance(value, (list, tuple)):
            raise TypeError("%s = %r: expected a number or a word; a mask ratio is its interval's "
                            "end (mask_ratios.1 = 0.1), the start being the previous level's end"
                            % (name, value))
        else:
            yield name, value


def flat_overrides(values: Mapping[Any, Any]) -> List[Tuple[Any, Any]]:
    """_flat_items of a dict of overrides as a list; ValueError when two spellings name one
    parameter ({"block_size.n": 64, "block_size": {"n": 32}})."""
    items = list(_flat_items(values, "", 0))
    seen = set()
    for name, _ in items:
        if isinstance(name, str):
            if name in seen:
                raise ValueError("%s: given twice (as a dotted key and nested)" % (name,))
            seen.add(name)
    return items


def check_text(name: str, value: Optional[str]) -> None:
    """For a str argument that libpsa reads as C text (None: not given): TypeError naming the
    argument for anything but a str, ValueError for a NUL character (C would read only the
    part before it) or text that is not UTF-8 (lone surrogates)."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError("%s = %r: expected a str" % (name, value))
    if "\0" in value:
        raise ValueError("%s = %r: must not contain a NUL character" % (name, value))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("%s = %r: not valid UTF-8 (character %d)" % (name, value, e.start)) \
            from None


def path_text(name: str, path: Any) -> str:
    """`path` (str, bytes or os.PathLike) as the UTF-8 text libpsa opens: TypeError naming the
    argument for other types, ValueError for NUL characters and for bytes (or
    surrogate-escaped text) that are not UTF-8."""
    try:
        target: Union[str, bytes] = os.fspath(path)
    except TypeError:
        raise TypeError("%s = %r: expected a str, bytes or os.PathLike" % (name, path)) from None
    if isinstance(target, bytes):
        try:
            target = target.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError("%s = %r: not valid UTF-8 (byte %d); libpsa opens UTF-8 paths"
                             % (name, target, e.start)) from None
    try:
        target.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("%s = %r: not valid UTF-8 (character %d); libpsa opens UTF-8 paths"
                         % (name, target, e.start)) from None
    if "\0" in target:
        raise ValueError("%s = %r: must not contain a NUL character" % (name, target))
    return target


def _param_id(key: Key) -> int:
    if isinstance(key, str):
        check_text("config key", key)
        return int(capi.psa_param_from_name(key))
    if isinstance(key, bool) or not isinstance(key, int):
        raise TypeError("config key %r: expected a parameter name (str) or psa.Param" % (key,))
    if not 0 <= key < int(capi.PSA_PARAM_COUNT_):
        raise ValueError("config key %r: expected a psa.Param in 0..%d"
                         % (key, int(capi.PSA_PARAM_COUNT_) - 1))
    return int(key)


def param_info(key: Key) -> Tuple[str, bool, float, float]:
    """``(name, is_int, lower, upper)`` of a parameter given by name or psa.Param."""
    name, ptype, lower, upper = capi.psa_param_info(_param_id(key))
    return str(name), ptype == capi.PSA_PARAM_TYPE_INT, float(lower), float(upper)


def _is_bool_param(name: str, is_int: bool, lower: float, upper: float) -> bool:
    return is_int and lower == 0.0 and upper == 1.0 and name not in _ENUM_PARAMS


class Config:
    """A validated set of parameters (one preset), used like a dict keyed by the YAML-style
    parameter names::

        cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
        cfg["warmup_steps"] = 0
        cfg["mask_mode"] = "topk"           # YAML words (or psa.MaskMode.TOPK, or 0)
        cfg["type"] = "dense"
        cfg["mask_mode"]                    # -> psa.MaskMode.TOPK (str() gives "topk")
        cfg["use_rearrange"]                # -> True

    Enum-valued keys read back as their enum (``Method``, ``MaskMode``, ``MaskFormat``,
    ``Rearrange``, ``TextRule``, ``Precision``), 0/1 flags as bool, other integers as int and the rest as
    float. Cross-parameter rules are checked by :meth:`validate` and when a context is made.
    """

    def __init__(self, _handle: object = None) -> None:
        """A config holding the library defaults (PSA, topk, block 128x64, no warm-up)."""
        self._handle = _handle if _handle is not None else capi.psa_config_create()

    # -- construction ------------------------------------------------------------------
    @classmethod
    def load(cls, model: str, preset: Optional[str] = None, path: Optional[str] = None,
             yaml: Optional[str] = None) -> "Config":
        """Loads `preset` (None: the model's ``default_attention``) of `model` from the
        library's embedded attention_config.yaml, or from the file `path`, or from the YAML
        text `yaml`. Raises psa.Error (PSA_ERR_NOT_FOUND lists the models/presets)."""
        if path is not None and yaml is not None:
            raise ValueError("pass path= or yaml=, not both")
        if model is None:
            raise TypeError("model = None: expected a model name (str)")
        for arg, text in (("model", model), ("preset", preset), ("yaml", yaml)):
            check_text(arg, text)
        if path is not None:
            return cls(capi.psa_config_load_file(path_text("path", path), model, preset))
        if yaml is not None:
            return cls(capi.psa_config_load_string(yaml, model, preset))
        return cls(capi.psa_config_load_embedded(model, preset))

    @staticmethod
    def presets(path: Optional[str] = None, yaml: Optional[str] = None) -> Dict[str, List[str]]:
        """``{model: [preset, ...]}`` of the embedded YAML (or of `path` / `yaml`), in file
        order."""
        return {m: c.presets for m, c in _catalog(path, yaml).items()}

    @staticmethod
    def default_preset(model: str, path: Optional[str] = None,
                       yaml: Optional[str] = None) -> str:
        """The model's ``default_attention`` preset name."""
        models = _catalog(path, yaml)
        if model not in models:
            raise KeyError("model %r: known models are %s" % (model, ", ".join(models)))
        return models[model].default

    def copy(self) -> "Config":
        """An independent deep copy."""
        return Config(capi.psa_config_clone(self._handle))

    # -- parameters --------------------------------------------------------------------
    def __getitem__(self, key: Key) -> Value:
        pid = _param_id(key)
        name, is_int, lower, upper = param_info(pid)
        if not is_int:
            return float(capi.psa_config_get_double(self._handle, pid))
        value = int(capi.psa_config_get_int(self._handle, pid))
        if name in _ENUM_PARAMS:
            return _ENUM_PARAMS[name](value)
        if _is_bool_param(name, is_int, lower, upper):
            return bool(value)
        return value

    def __setitem__(self, key: Key, value: Value) -> None:
        pid = _param_id(key)
        name, is_int, lower, upper = param_info(pid)
        if name in _ENUM_PARAMS:
            value = _ENUM_PARAMS[name].parse(value, name)  # type: ignore[arg-type]
        elif isinstance(value, str):
            raise ValueError("%s = %r: expected a number" % (name, value))
        elif not isinstance(value, (int, float)):
            raise TypeError("%s = %r: expected a number" % (name, value))
        if is_int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError("%s = %r: expected an integer" % (name, value))
            if not -2**63 <= value < 2**63:
                raise ValueError("%s = %r: outside int64" % (name, value))
            capi.psa_config_set_int(self._handle, pid, int(value))
        else:
            capi.psa_config_set_double(self._handle, pid, float(value))

    def __contains__(self, key: object) -> bool:
        try:
            _param_id(key)  # type: ignore[arg-type]
        except Exception:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return int(capi.PSA_PARAM_COUNT_)

    def keys(self) -> List[str]:
        """The parameter names, in psa.Param order."""
        return [str(capi.psa_param_info(i)[0]) for i in range(int(capi.PSA_PARAM_COUNT_))]

    def items(self) -> List[Tuple[str, Value]]:
        """``(name, value)`` pairs, in psa.Param order."""
        return [(k, self[k]) for k in self.keys()]

    def to_dict(self) -> Dict[str, Value]:
        """The parameters as a plain dict (enum values as their enum members)."""
        return dict(self.items())

    def update(self, values: Optional[Mapping[Any, Any]] = None, **kwargs: Value) -> "Config":
        """Sets several parameters and returns self: ``cfg.update(warmup_steps=0)``, dotted keys
        through a dict (``{"block_size.n": 64}``), or nested as the YAML writes them
        (``{"block_size": {"m": 128, "n": 64}, "mask_ratios": {1: 0.1}}``; a mask ratio is its
        interval's end)."""
        for key, value in flat_overrides(dict(values or {}, **kwargs)):  # shape errors first
            self[key] = value
        return self

    def validate(self) -> None:
        """Checks the cross-parameter rules; raises psa.Error (PSA_ERR_INVALID_CONFIG)."""
        capi.psa_config_validate(self._handle)

    def fingerprint(self) -> Tuple[Tuple[int, Union[int, float]], ...]:
        """Every parameter's raw value, as a hashable tuple (equal configs, equal tuples)."""
        values: List[Tuple[int, Union[int, float]]] = []
        for pid in range(int(capi.PSA_PARAM_COUNT_)):
            if capi.psa_param_info(pid)[1] == capi.PSA_PARAM_TYPE_INT:
                values.append((pid, int(capi.psa_config_get_int(self._handle, pid))))
            else:
                values.append((pid, float(capi.psa_config_get_double(self._handle, pid))))
        return tuple(values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self.fingerprint() == other.fingerprint()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return "psa.Config(type=%s, block_size=%sx%s, mask_mode=%s)" % (
            self["type"], self["block_size.m"], self["block_size.n"], self["mask_mode"])


class _Model:
    __slots__ = ("presets", "default")

    def __init__(self, presets: List[str], default: str) -> None:
        self.presets, self.default = presets, default


def _catalog(path: Optional[str] = None, yaml: Optional[str] = None) -> Dict[str, _Model]:
    if path is not None and yaml is not None:
        raise ValueError("pass path= or yaml=, not both")
    check_text("yaml", yaml)
    cat = (capi.psa_catalog_open_string(yaml) if yaml is not None
           else capi.psa_catalog_open(None if path is None else path_text("path", path)))
    models: Dict[str, _Model] = {}
    for i in range(int(capi.psa_catalog_model_count(cat))):
        model = str(capi.psa_catalog_model_name(cat, i))
        count = int(capi.psa_catalog_preset_count(cat, model))
        models[model] = _Model([str(capi.psa_catalog_preset_name(cat, model, j))
                                for j in range(count)],
                               str(capi.psa_catalog_default_preset(cat, model)))
    return models
