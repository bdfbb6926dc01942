# bindings/python/psa/_keys.py -- config keys: a psa.Config written as one self-describing
# string ("model=M[,preset=P];name=value;..." or "config;name=value;..." with every
# parameter), the form in which a config travels through a torch custom op's schema
# (psa.torch) and an XLA FFI attribute (psa.jax, whose handler parses the same grammar).
"""Config keys shared by psa.torch and psa.jax."""

from __future__ import annotations

import threading
from typing import Dict, List, Mapping, Optional, Tuple, Union

from . import _api
from ._config import Config, Value, _WordEnum, flat_overrides

ConfigArg = Union[None, str, Config, Mapping[str, Value]]
"""What a config argument may be: None, a key, a psa.Config or a dict of overrides."""


def _word(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _WordEnum):
        return value.word
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        if not value or any(c in value for c in ";=, "):
            raise ValueError("config value %r: expected a word without ';', '=', ',' or "
                             "spaces" % (value,))
        return value
    raise TypeError("config value %r: expected a bool, int, float or YAML word" % (value,))


def _parse_value(text: str) -> Value:
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


_KEYS: Dict[str, Config] = {}
_KEYS_LOCK = threading.Lock()
_KEYS_CAPACITY = 256


def config_from_key(key: str) -> Config:
    """The validated psa.Config a key describes (cached: do not modify it, copy it first).
    ValueError for a malformed key, psa.Error for an unknown model/preset or a bad value."""
    with _KEYS_LOCK:
        cfg = _KEYS.get(key)
    if cfg is not None:
        return cfg
    if not isinstance(key, str) or not key:
        raise ValueError("config key %r: expected a string from config_key()" % (key,))
    fields = key.split(";")
    head, pairs = fields[0], fields[1:]
    overrides: Dict[str, Value] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name or not text:
            raise ValueError("config key %r: %r is not name=value" % (key, pair))
        overrides[name] = _parse_value(text)
    if head == "config":
        cfg = Config()
    else:
        model: Optional[str] = None
        preset: Optional[str] = None
        for part in head.split(","):
            name, sep, text = part.partition("=")
            if sep and name == "model" and text:
                model = text
            elif sep and name == "preset" and text:
                preset = text
            else:
                raise ValueError("config key %r: expected 'config' or 'model=M[,preset=P]' "
                                 "before the first ';'" % (key,))
        if model is None:
            raise ValueError("config key %r: names no model" % (key,))
        cfg = Config.load(model, preset)
    cfg.update(overrides)
    cfg.validate()
    with _KEYS_LOCK:
        if len(_KEYS) >= _KEYS_CAPACITY:
            _KEYS.pop(next(iter(_KEYS)))
        cfg = _KEYS.setdefault(key, cfg)
    return cfg


def make_key(model: Optional[str] = None, preset: Optional[str] = None,
               config: ConfigArg = None) -> str:
    """The handler's config attribute: ``model`` / ``preset`` (default: psa.DEFAULT_MODEL's
    default preset) with `config` a dict of overrides (``{"mask_ratios.1": 0.2}``), or
    `config` a psa.Config (every parameter is written into the key), or `config` an existing
    key (from psa.torch.config_key or psa.jax.config_key: one grammar). Validated here:
    psa.Error for an unknown model, preset or parameter, ValueError for a malformed key."""
    if isinstance(config, str):
        if model is not None or preset is not None:
            raise ValueError("config = %r is a key: pass it without model=/preset=" % (config,))
        config_from_key(config)
        return config
    if isinstance(config, Config):
        if model is not None or preset is not None:
            raise ValueError("config: pass either config=psa.Config(...) or model=/preset=, "
                             "not both (a dict config= holds overrides of the preset)")
        key = ";".join(["config"] + ["%s=%s" % (name, _word(value))
                                     for name, value in config.items()])
    else:
        if model is not None and not isinstance(model, str):
            raise TypeError("model = %r: expected a model name (str), e.g. %r"
                            % (model, _api.DEFAULT_MODEL))
        if preset is not None and not isinstance(preset, str):
            raise TypeError("preset = %r: expected a preset name (str)" % (preset,))
        if config is not None and not isinstance(config, Mapping):
            raise TypeError("config = %r: expected a key (str), a psa.Config or a dict of "
                            "parameter overrides" % (config,))
        for word, what in ((model, "model"), (preset, "preset")):
            if word is not None and (not word or any(c in word for c in ";=, ")):
                raise ValueError("%s = %r: not a %s name" % (what, word, what))
        head = "model=%s" % (model if model is not None else _api.DEFAULT_MODEL)
        if preset is not None:
            head += ",preset=%s" % preset
        # nested sections as the YAML writes them ({"block_size": {"n": 64}}) become dotted
        # names, so that both spellings give one key
        pairs = flat_overrides(dict(config or {}))
        for name, _ in pairs:
            if not isinstance(name, str) or not name or any(c in name for c in ";= "):
                raise ValueError("config key name %r: expected a parameter name" % (name,))
        items: List[Tuple[str, Value]] = sorted(pairs, key=lambda kv: kv[0])
        key = ";".join([head] + ["%s=%s" % (name, _word(value)) for name, value in items])
    config_from_key(key)  # unknown model/preset/parameter or a bad value raise here
    return key


# ---- the call ------------------------------------------------------------------------------
