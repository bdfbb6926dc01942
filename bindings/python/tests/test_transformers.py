"""psa.transformers: the causal PSA prefill hook on tiny random Qwen2.5-VL / Qwen2-VL models
built from configs (no download): a dense preset gives the model's own logits, the
all-level-1 psa_causal config too, the sparse preset stays close and generates greedily with
decode steps through the model's own attention; the KV cache and the vision tower are
untouched; disable_psa restores the model."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import psa  # noqa: E402
import psa.transformers as pt  # noqa: E402

ALL_LEVEL_ONE = {"mask_ratios.1": 1.0, "mask_ratios.2": 1.0, "mask_ratios.4": 1.0,
                 "mask_ratios.8": 1.0, "mask_ratios.0": 1.0, "text_length": 0}


def tiny(kind="2.5", attn="eager"):
    torch.manual_seed(1234)
    text = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                 "mrope_section": [2, 3, 3]})
    vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32,
                  out_hidden_size=64, embed_dim=32, mlp_ratio=1, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[0],
                  window_size=112)
    if kind == "2.5":
        cfg = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision)
        cls = transformers.Qwen2_5_VLForConditionalGeneration
    else:
        vision = {k: v for k, v in vision.items()
                  if k not in ("out_hidden_size", "fullatt_block_indexes", "window_size",
                               "intermediate_size")}
        vision["hidden_size"] = 64
        cfg = transformers.Qwen2VLConfig(text_config=text, vision_config=vision)
        cls = transformers.Qwen2VLForConditionalGeneration
    cfg._attn_implementation = attn
    model = cls(cfg).eval()
    return model


def ids(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 500, (1, n), generator=g)


@pytest.mark.parametrize("kind,attn", [("2.5", "eager"), ("2.5", "sdpa"), ("2", "eager")])
def test_dense_preset_and_all_level_one_give_the_models_logits(kind, attn):
    model = tiny(kind, attn)
    x = ids(300)
    with torch.no_grad():
        want = model(input_ids=x).logits
        assert pt.enable_psa(model, preset="baseline") == 2
        got = model(input_ids=x).logits
        assert pt.psa_stats(model)["prefill"] == 2
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        pt.enable_psa(model, config=ALL_LEVEL_ONE)
        got = model(input_ids=x).logits
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert pt.psa_stats(model)["prefill"] == 2
    assert pt.disable_psa(model) == 2
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=x).logits, want, rtol=0, atol=0)


def test_sparse_prefill_differs_then_generates_with_decode_fallback():
    model = tiny("2.5", "sdpa")
    x = ids(700, seed=3)
    sparse = {"text_length": 0, "xattn_stride": 16, "mask_ratios.1": 0.2,
              "mask_ratios.2": 0.3, "mask_ratios.4": 0.4, "mask_ratios.8": 0.5}
    with torch.no_grad():
        want = model(input_ids=x).logits
        pt.enable_psa(model, config=sparse)
        got = model(input_ids=x).logits
        assert torch.isfinite(got).all()
        diff = (got - want).abs().max().item()
        # Sparse attention on random weights: a different, finite, still related result.
        assert 0 < diff
        cos = torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0)
        assert cos > 0.9
        before = pt.psa_stats(model)
        gen = model.generate(input_ids=x, max_new_tokens=4, do_sample=False)
        after = pt.psa_stats(model)
    assert gen.shape == (1, 704)
    assert torch.equal(gen[:, :700], x)
    # One prefill call per layer, then decode steps (query length 1) through the model's own
    # attention: 3 more steps x 2 layers.
    assert after["prefill"] - before["prefill"] == 2
    assert after["fallback"] - before["fallback"] == 6
    # Greedy decoding with the all-level-1 config equals the model's own generation.
    with torch.no_grad():
        pt.enable_psa(model, config=ALL_LEVEL_ONE)
        mine = model.generate(input_ids=x[:, :200], max_new_tokens=5, do_sample=False)
        pt.disable_psa(model)
        theirs = model.generate(input_ids=x[:, :200], max_new_tokens=5, do_sample=False)
    assert torch.equal(mine, theirs)


def test_vision_tower_untouched_and_bad_arguments():
    model = tiny("2.5")
    pt.enable_psa(model)
    for m in model.modules():
        if "Vision" in type(m).__name__:
            assert not hasattr(m, "_psa_hook")
            assert getattr(getattr(m, "config", None), "_attn_implementation", "") \
                != pt.ATTN_IMPLEMENTATION
    with pytest.raises(ValueError, match="causal = false"):
        pt.enable_psa(model, preset_model="Wan2.1_1.3b", preset="baseline")
    with pytest.raises(psa.Error, match="xattn_stride = 24"):
        pt.enable_psa(model, config={"xattn_stride": 24})
    with pytest.raises(ValueError, match="has no attention module"):
        pt.enable_psa(torch.nn.Linear(2, 2))
    assert pt.disable_psa(model) == 2


def test_training_any_of_q_k_v_in_the_graph_falls_back():
    # LoRA-style: everything frozen but layer 0's v_proj. Only v requires grad in layer 0
    # (q and k do not); layer 1's inputs then do too. Both go to the model's own attention.
    model = tiny("2.5")
    for name, p in model.named_parameters():
        p.requires_grad_(name.endswith("layers.0.self_attn.v_proj.weight")
                         or name.endswith("layers.0.self_attn.v_proj.bias"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable
    model.train()
    x = ids(300, seed=5)
    want = model(input_ids=x).logits
    pt.enable_psa(model)
    got = model(input_ids=x).logits
    assert pt.psa_stats(model) == {"prefill": 0, "fallback": 2, "modules": 2}
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    got.float().square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in trainable)
    # without grad mode nothing is in a graph: the prefill runs through libpsa
    with torch.no_grad():
        model(input_ids=x)
    assert pt.psa_stats(model)["prefill"] == 2
    pt.disable_psa(model)
