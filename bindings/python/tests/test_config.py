# bindings/python/tests/test_config.py -- psa.Config: presets by model/preset name, listing,
# parameters by name and by psa.Param, copies, validation.
import numpy as np
import pytest

import psa


def test_presets_list_every_model_and_default():
    presets = psa.presets()
    assert "Wan2.1_1.3b" in presets
    assert presets["Wan2.1_1.3b"][:2] == ["baseline", "psa_balanced"]
    assert psa.Config.default_preset("Wan2.1_1.3b") == "psa_balanced"


def test_load_named_and_default_preset():
    named = psa.Config.load("Wan2.1_1.3b", "psa_topk")
    assert named["block_size.n"] == 32
    assert named[psa.Param.MASK_MODE] == 0  # topk
    default = psa.Config.load("Wan2.1_1.3b")
    assert default["block_size.n"] == 128
    assert default["type"] == psa.Method.PSA
    assert psa.Config.load("Wan2.1_1.3b", "baseline")["type"] == psa.Method.DENSE


def test_load_from_yaml_text_and_file(tmp_path):
    text = psa.capi.psa_embedded_config_yaml()
    from_text = psa.Config.load("Wan2.1_1.3b", "psa_topk", yaml=text)
    path = tmp_path / "attention_config.yaml"
    path.write_text(text)
    from_file = psa.Config.load("Wan2.1_1.3b", "psa_topk", path=path)
    assert from_text.to_dict() == from_file.to_dict() == psa.Config.load(
        "Wan2.1_1.3b", "psa_topk").to_dict()
    assert psa.presets(path=path) == psa.presets()


def test_set_get_by_name_and_param():
    cfg = psa.Config()
    cfg["warmup_steps"] = 3
    assert cfg[psa.Param.WARMUP_STEPS] == 3
    cfg[psa.Param.SCALE] = 0.125
    assert cfg["scale"] == 0.125
    assert isinstance(cfg["scale"], float) and isinstance(cfg["seed"], int)
    assert len(cfg.keys()) == psa.capi.PSA_PARAM_COUNT_
    with pytest.raises(psa.Error) as info:
        cfg["no_such_param"] = 1
    assert info.value.status == psa.Status.ERR_NOT_FOUND


def test_copy_is_independent():
    cfg = psa.Config.load("Wan2.1_1.3b")
    other = cfg.copy()
    other["warmup_steps"] = 0
    assert cfg["warmup_steps"] == 15 and other["warmup_steps"] == 0


def test_validate_reports_cross_parameter_rules():
    cfg = psa.Config()
    cfg["mask_ratios.1"] = 0.9  # ends must not decrease: 1:.9 then 2:.15
    with pytest.raises(psa.Error) as info:
        cfg.validate()
    assert info.value.status == psa.Status.ERR_INVALID_CONFIG
    assert "mask_ratios" in info.value.message


def test_precision_key_words_and_cpu_forward():
    cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    assert cfg["precision"] == psa.Precision.DEFAULT and str(cfg["precision"]) == "default"
    cfg["precision"] = "fp8"
    assert cfg["precision"] == psa.Precision.FP8 and str(cfg["precision"]) == "fp8"
    with pytest.raises(ValueError, match="'default', 'fp8'"):
        cfg["precision"] = "int4"
    # The 8-bit rule on the CPU backend: a few tenths of a percent from the default precision,
    # never equal to it.
    import numpy as np
    from conftest import rel_l2, video_qkv
    q, k, v = video_qkv((2, 16, 16), seed=int(np.random.default_rng().integers(1 << 30)))
    grid = (2, 16, 16)
    out8 = psa.attention(q, k, v, grid=grid, step=20, config=cfg)
    cfg["precision"] = "default"
    out16 = psa.attention(q, k, v, grid=grid, step=20, config=cfg)
    assert 0.0 < rel_l2(out8, out16) < 0.05
    # Stats.precision: what the attention ran (the CPU backend runs fp8 for every sparse step;
    # a warm-up step is dense, at the default precision).
    cfg["precision"] = "fp8"
    with psa.Context(cfg, backend="cpu") as ctx:
        ctx.set_video_grid(*grid)
        for step, want in ((0, psa.Precision.DEFAULT), (cfg["warmup_steps"], psa.Precision.FP8)):
            ctx.set_step(step)
            ctx.forward(q, k, v)
            s = ctx.stats()
            assert s.precision == want and s.ran_dense == (step < cfg["warmup_steps"])


def test_update_takes_nested_sections_as_the_yaml_writes_them():
    cfg = psa.Config.load("Wan2.1_1.3b", "psa_topk")
    flat = cfg.copy().update({"block_size.n": 64, "mask_ratios.1": 0.05, "warmup_steps": 2})
    nested = cfg.copy().update({"block_size": {"n": 64}, "mask_ratios": {1: 0.05}}, warmup_steps=2)
    assert nested.to_dict() == flat.to_dict()
    assert nested["block_size.n"] == 64 and nested["mask_ratios.1"] == 0.05
    # the same through config= of the one-call API (a dict of overrides of the preset)
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((1, 2, 256, 64)).astype(np.float32) for _ in range(3))
    a = psa.attention(q, k, v, model="Wan2.1_1.3b", preset="psa_topk", config={"block_size.n": 64})
    b = psa.attention(q, k, v, model="Wan2.1_1.3b", preset="psa_topk", config={"block_size": {"n": 64}})
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad, error, words", [
    ({"block_size": {"m": {"x": 1}}}, ValueError, "block_size.m: a nested mapping"),
    ({"mask_ratios": {1: [0.0, 0.1]}}, TypeError, "mask_ratios.1 = [0.0, 0.1]"),
    ({"warmup_steps": (1, 2)}, TypeError, "warmup_steps = (1, 2)"),
    ({"block_size": {"q": 1}}, psa.Error, "block_size.q"),
    ({"block_size.n": 64, "block_size": {"n": 32}}, ValueError, "block_size.n: given twice"),
])
def test_update_rejects_bad_nesting_and_sets_nothing(bad, error, words):
    cfg = psa.Config.load("Wan2.1_1.3b")
    before = cfg.to_dict()
    with pytest.raises(error) as info:
        cfg.update(dict(bad, warmup_steps=7) if "warmup_steps" not in bad else bad)
    assert words in str(info.value)
    assert cfg.to_dict() == before  # the failing key comes first; shape errors before any set


def test_op_keys_take_nested_sections_as_one_spelling():
    torch = pytest.importorskip("torch")  # noqa: F841 (psa.torch needs it)
    import psa.torch as pt
    nested = pt.config_key("Wan2.1_1.3b", "psa_topk", {"mask_ratios": {1: 0.05}, "block_size": {"n": 64}})
    flat = pt.config_key("Wan2.1_1.3b", "psa_topk", {"block_size.n": 64, "mask_ratios.1": 0.05})
    assert nested == flat
    with pytest.raises(TypeError, match=r"mask_ratios.1 = \[0.0, 0.1\]"):
        pt.config_key(config={"mask_ratios": {1: [0.0, 0.1]}})
