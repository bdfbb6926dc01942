# bindings/python/tests/test_diffusers.py -- psa.diffusers on diffusers' real transformer
# classes (WanTransformer3DModel T2V/I2V and the A14B pair, CogVideoXTransformer3DModel 5B
# and 1.5 geometries) built with tiny random configs, CPU, fp32: the baseline preset and an
# all-level-1 mask reproduce the default processors, a PSA preset stays close, the grid
# follows the latent shape, warm-up counts denoising steps (CFG as a batch of 2 or as two
# passes; scheduler-driven for pipelines), disable_psa restores everything, bad input is
# named. What ran dense is read from libpsa's own statistics after every forward.
import numpy as np
import pytest

import psa

try:  # skipped per test, not per module: a module with no test makes pytest exit 5
    import torch
    import psa.diffusers as psa_diffusers
    from diffusers import (CogVideoXTransformer3DModel, FlowMatchEulerDiscreteScheduler,
                           WanTransformer3DModel)
except ImportError:
    torch = psa_diffusers = None
    CogVideoXTransformer3DModel = FlowMatchEulerDiscreteScheduler = None
    WanTransformer3DModel = None

pytestmark = pytest.mark.skipif(psa_diffusers is None,
                                reason="torch or diffusers is not installed")

TEXT_DIM = 32


@pytest.fixture(autouse=True)
def fresh_cache():
    psa.clear_cache()
    yield
    psa.clear_cache()


def seed():
    return int(np.random.default_rng().integers(1 << 30))


def rel_l2(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


# ---- tiny real models ----------------------------------------------------------------------
def wan(i2v=False, layers=2, **extra):
    torch.manual_seed(seed())
    kw = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=32,
              in_channels=4, out_channels=4, text_dim=TEXT_DIM, freq_dim=32, ffn_dim=64,
              num_layers=layers, rope_max_seq_len=64)
    if i2v:
        kw.update(image_dim=16, added_kv_proj_dim=64)
    kw.update(extra)
    return WanTransformer3DModel(**kw).eval()


def cogvideox(rotary=False, patch_size_t=None, layers=2):
    torch.manual_seed(seed())
    return CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=32, in_channels=4, out_channels=4,
        time_embed_dim=32, text_embed_dim=TEXT_DIM, num_layers=layers, sample_width=32,
        sample_height=32, sample_frames=9, patch_size=2, patch_size_t=patch_size_t,
        max_text_seq_length=16, use_rotary_positional_embeddings=rotary).eval()


def wan_inputs(model, batch=1, frames=4, height=32, width=32, t=500.0):
    g = torch.Generator().manual_seed(seed())
    kw = dict(hidden_states=torch.randn(batch, 4, frames, height, width, generator=g),
              timestep=torch.full((batch,), t),
              encoder_hidden_states=torch.randn(batch, 512 if model.config.image_dim else 8,
                                                TEXT_DIM, generator=g),
              return_dict=False)
    if model.config.image_dim:
        kw["encoder_hidden_states_image"] = torch.randn(batch, 5, 16, generator=g)
    return kw


def cog_inputs(model, batch=1, frames=4, height=32, width=32, t=500.0):
    g = torch.Generator().manual_seed(seed())
    kw = dict(hidden_states=torch.randn(batch, frames, 4, height, width, generator=g),
              encoder_hidden_states=torch.randn(batch, 16, TEXT_DIM, generator=g),
              timestep=torch.full((batch,), t), return_dict=False)
    if model.config.use_rotary_positional_embeddings:
        from diffusers.models.embeddings import get_3d_rotary_pos_embed
        p, p_t = model.config.patch_size, model.config.patch_size_t or 1
        kw["image_rotary_emb"] = get_3d_rotary_pos_embed(
            embed_dim=model.config.attention_head_dim, crops_coords=None,
            grid_size=(height // p, width // p), temporal_size=frames // p_t,
            grid_type="slice", max_size=(height // p, width // p))
    return kw


MODELS = {
    "wan_t2v": (lambda: wan(), wan_inputs),
    "wan_i2v": (lambda: wan(i2v=True), wan_inputs),
    "cogvideox_5b": (lambda: cogvideox(), cog_inputs),
    "cogvideox_rope_pt2": (lambda: cogvideox(rotary=True, patch_size_t=2), cog_inputs),
}


def run(model, kw):
    with torch.no_grad():
        return model(**kw)[0]


@pytest.fixture
def library_stats(monkeypatch):
    """Every libpsa forward's (ran_dense, density, level-1 fraction, grid-free step)."""
    calls = []
    original = psa.capi.psa_attention_forward

    def forward(handle, *args):
        result = original(handle, *args)
        s = psa.capi.psa_stats()
        psa.capi.psa_context_get_stats(handle, s)
        calls.append((bool(s.ran_dense), float(s.density),
                      float(s.get_level_fraction(psa.capi.PSA_STAT_LEVEL_1))))
        return result

    monkeypatch.setattr(psa.capi, "psa_attention_forward", forward)
    return calls


# ---- outputs -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MODELS))
def test_baseline_preset_reproduces_default_processors(name, library_stats):
    make, inputs = MODELS[name]
    model = make()
    kw = inputs(model, batch=2)
    expected = run(model, kw)
    psa_diffusers.enable_psa(model, preset="baseline")
    got = run(model, kw)
    assert rel_l2(got, expected) <= 1e-5
    layers = len(getattr(model, "blocks", None) or model.transformer_blocks)
    assert len(library_stats) == layers and all(c[0] for c in library_stats)
    psa_diffusers.disable_psa(model)
    assert torch.equal(run(model, kw), expected)


ALL_LEVEL_1 = {"mask_mode": "topk", "attn_impl": "new_mask_type", "use_sim_mask": False,
               "warmup_steps": 0, "mask_ratios.1": 1.0, "mask_ratios.2": 1.0,
               "mask_ratios.4": 1.0, "mask_ratios.8": 1.0, "mask_ratios.0": 1.0}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_block_at_level_1_matches_dense(name, library_stats):
    make, inputs = MODELS[name]
    model = make()
    kw = inputs(model)
    expected = run(model, kw)
    psa_model = "CogVideo_5b" if name.startswith("cog") else "Wan2.1_14b"
    psa_diffusers.enable_psa(model, psa_model, "psa_balanced", **ALL_LEVEL_1)
    got = run(model, kw)
    assert library_stats and all(not dense and level1 == 1.0 and density == 1.0
                                 for dense, density, level1 in library_stats)
    assert rel_l2(got, expected) <= 1e-5


# A sparse preset (density 0.1 to 0.5 here) on random weights and inputs: the transformer's
# output stays within 5 % relative L2 of the default processors' (measured: 0.5 to 1.5 %).
PSA_ERROR_BOUND = 0.05


@pytest.mark.parametrize("name,psa_model,preset", [
    ("wan_t2v", "Wan2.1_1.3b", "psa_topk"), ("wan_i2v", "Wan2.1_14b", "psa_balanced"),
    ("cogvideox_5b", "CogVideo_5b", "psa_balanced"),
    ("cogvideox_rope_pt2", "CogVideo1.5_5b", "psa_balanced")])
def test_psa_preset_runs_sparse_within_bound(name, psa_model, preset, library_stats):
    make, inputs = MODELS[name]
    model = make()
    kw = inputs(model, frames=8, height=32, width=64)
    expected = run(model, kw)
    psa_diffusers.enable_psa(model, psa_model, preset, step_source="manual")
    psa_diffusers.set_step(model, 100)
    got = run(model, kw)
    assert library_stats and all(not c[0] and c[1] < 1.0 for c in library_stats)
    err = rel_l2(got, expected)
    assert 0.0 < err <= PSA_ERROR_BOUND, err


# ---- grid ----------------------------------------------------------------------------------
@pytest.mark.parametrize("make,inputs,latent,expected", [
    (lambda: wan(), wan_inputs, (4, 32, 32), (4, 16, 16)),
    (lambda: wan(), wan_inputs, (3, 16, 40), (3, 8, 20)),
    (lambda: wan(patch_size=(2, 2, 2)), wan_inputs, (6, 8, 24), (3, 4, 12)),
    (lambda: wan(patch_size=(1, 4, 2)), wan_inputs, (2, 32, 16), (2, 8, 8)),
    (lambda: cogvideox(), cog_inputs, (5, 16, 24), (5, 8, 12)),
    (lambda: cogvideox(rotary=True, patch_size_t=2), cog_inputs, (6, 16, 24), (3, 8, 12)),
])
def test_grid_follows_latent_shape_and_patch_size(make, inputs, latent, expected,
                                                  library_stats):
    model = make()
    frames, height, width = latent
    p_t, p_h, p_w = (model.config.patch_size if isinstance(model, WanTransformer3DModel)
                     else (model.config.patch_size_t or 1, model.config.patch_size,
                           model.config.patch_size))
    assert expected == (frames // p_t, height // p_h, width // p_w)
    kw = inputs(model, frames=frames, height=height, width=width)
    reference = run(model, kw)
    psa_diffusers.enable_psa(model, preset="baseline")
    got = run(model, kw)
    assert psa_diffusers.stats(model)[0]["grid"] == expected
    assert psa_diffusers.latent_grid(model, tuple(kw["hidden_states"].shape)) == expected
    assert rel_l2(got, reference) <= 1e-5


# ---- warm-up counts denoising steps --------------------------------------------------------
def denoise(call, model, inputs, steps, cfg, library_stats, scheduler=None):
    """A toy flow-matching loop with classifier-free guidance; returns per step the list of
    libpsa ran_dense flags of its forwards."""
    scheduler = scheduler or FlowMatchEulerDiscreteScheduler()
    scheduler.set_timesteps(steps)
    kw = inputs(model, batch=1)
    latents = kw["hidden_states"]
    seen = []
    for t in scheduler.timesteps:
        first = len(library_stats)
        if cfg == "batch":
            args = dict(kw, hidden_states=torch.cat([latents] * 2),
                        timestep=t.expand(2),
                        encoder_hidden_states=torch.cat([kw["encoder_hidden_states"]] * 2))
            for extra in ("encoder_hidden_states_image",):
                if extra in kw:
                    args[extra] = torch.cat([kw[extra]] * 2)
            cond, uncond = call(t, args).chunk(2)
        else:
            args = dict(kw, hidden_states=latents, timestep=t.expand(1))
            cond = call(t, args)
            uncond = call(t, dict(args, encoder_hidden_states=torch.zeros_like(
                kw["encoder_hidden_states"])))
        noise = uncond + 3.0 * (cond - uncond)
        latents = scheduler.step(noise, t, latents, return_dict=False)[0]
        seen.append([c[0] for c in library_stats[first:]])
    return seen


@pytest.mark.parametrize("cfg", ["batch", "two_passes"])
@pytest.mark.parametrize("warmup", [1, 2])
@pytest.mark.parametrize("name", ["wan_t2v", "cogvideox_5b"])
def test_warmup_counts_steps_from_the_timestep(name, warmup, cfg, library_stats):
    make, inputs = MODELS[name]
    model = make()
    psa_model = "CogVideo_5b" if name.startswith("cog") else "Wan2.1_1.3b"
    psa_diffusers.enable_psa(model, psa_model, warmup_steps=warmup)
    layers = 2

    def call(t, args):
        with torch.no_grad():
            return model(**args)[0]

    for generation in range(2):  # the second generation starts at step 0 again
        seen = denoise(call, model, inputs, 3, cfg, library_stats)
        per_step = layers * (1 if cfg == "batch" else 2)
        assert [len(s) for s in seen] == [per_step] * 3
        assert [all(s) for s in seen] == [i < warmup for i in range(3)]
        assert [any(s) for s in seen] == [i < warmup for i in range(3)]
        st = psa_diffusers.stats(model)[0]
        assert st["step"] == 2 and st["step_source"] == "timestep"
        assert st["dense_calls"] == per_step * warmup * (generation + 1)


class ToyPipeline:
    """What psa.diffusers reads of a diffusers pipeline: transformer(s) and scheduler."""

    def __init__(self, transformer, transformer_2=None):
        self.transformer = transformer
        self.transformer_2 = transformer_2
        self.scheduler = FlowMatchEulerDiscreteScheduler()


@pytest.mark.parametrize("cfg", ["batch", "two_passes"])
def test_warmup_counts_scheduler_steps_per_transformer_of_the_a14b_pair(cfg, library_stats):
    high, low = wan(), wan()
    pipe = ToyPipeline(high, low)
    psa_diffusers.enable_psa(pipe, warmup_steps=1)
    assert [s["model"] for s in psa_diffusers.stats(pipe)] == ["Wan2.2_A14B"] * 2
    assert [s["step_source"] for s in psa_diffusers.stats(pipe)] == ["scheduler"] * 2
    boundary = []

    def call(t, args):
        model = high if len(boundary) < 4 else low  # 2 steps each (4 calls = 2 steps x 2)
        boundary.append(model)
        if cfg == "batch":
            boundary.append(model)
        with torch.no_grad():
            return model(**args)[0]

    for _ in range(2):
        boundary.clear()
        seen = denoise(call, high, wan_inputs, 4, cfg, library_stats, pipe.scheduler)
        # high: its step 0 dense, step 1 sparse; low: its own step 0 dense, step 1 sparse
        assert [all(s) for s in seen] == [True, False, True, False]
        assert [any(s) for s in seen] == [True, False, True, False]
    psa_diffusers.disable_psa(pipe)
    assert "step" not in pipe.scheduler.__dict__ and "set_timesteps" not in pipe.scheduler.__dict__


def test_compiled_transformer_has_no_graph_break():
    model = wan()
    kw = wan_inputs(model)
    expected = run(model, kw)
    psa_diffusers.enable_psa(model, preset="baseline", step_source="manual")
    torch._dynamo.reset()
    with torch.no_grad():
        explained = torch._dynamo.explain(model)(**kw)
    assert explained.graph_break_count == 0, explained.break_reasons
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, fullgraph=True, backend=counter)
    with torch.no_grad():
        got = compiled(**kw)[0]
        assert rel_l2(got, expected) <= 1e-5
        for _ in range(2):  # new inputs, same shapes and step: no recompilation
            kw = wan_inputs(model)
            assert rel_l2(compiled(**kw)[0], run(model, kw)) <= 1e-5
        assert counter.frame_count == 1
    # a sparse preset, dense during its warm-up: one recompilation when the step leaves it
    psa_diffusers.enable_psa(model, "Wan2.1_1.3b", "psa_topk", warmup_steps=1,
                             step_source="manual")
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, fullgraph=True, backend=counter)
    with torch.no_grad():
        for step in (0, 1, 2, 3):
            psa_diffusers.set_step(model, step)
            assert rel_l2(compiled(**kw)[0], run(model, kw)) <= 1e-5
    assert counter.frame_count == 2


# ---- enable / disable, bad input -----------------------------------------------------------
def processors(model):
    return {name: m.processor for name, m in model.named_modules() if hasattr(m, "processor")}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_disable_restores_the_original_processors(name):
    model = MODELS[name][0]()
    before = processors(model)
    hooks = dict(model._forward_pre_hooks)
    psa_diffusers.enable_psa(model)
    during = processors(model)
    changed = {n for n in before if during[n] is not before[n]}
    assert changed == {n for n in before if n.endswith(".attn1")}  # attn2 / image attention kept
    psa_diffusers.enable_psa(model, preset="baseline")  # re-enable: still one layer of PSA
    psa_diffusers.disable_psa(model)
    after = processors(model)
    assert all(after[n] is before[n] for n in before) and len(after) == len(before)
    assert dict(model._forward_pre_hooks) == hooks and not psa_diffusers.is_enabled(model)
    psa_diffusers.disable_psa(model)  # no-op


def test_bad_input_is_named_before_any_forward(library_stats):
    with pytest.raises(TypeError, match="Linear"):
        psa_diffusers.enable_psa(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="object"):
        psa_diffusers.enable_psa(object())
    model = wan()
    before = processors(model)
    with pytest.raises(psa.Error, match="NoSuchModel"):
        psa_diffusers.enable_psa(model, "NoSuchModel")
    with pytest.raises(psa.Error, match="no_such_preset"):
        psa_diffusers.enable_psa(model, "Wan2.1_14b", "no_such_preset")
    with pytest.raises(psa.Error, match="no_such_key"):
        psa_diffusers.enable_psa(model, no_such_key=1)
    with pytest.raises(ValueError, match="step_source"):
        psa_diffusers.enable_psa(model, step_source="sometimes")
    assert all(processors(model)[n] is before[n] for n in before)
    assert not psa_diffusers.is_enabled(model)

    psa_diffusers.enable_psa(model)
    called = []
    model.patch_embedding.register_forward_pre_hook(lambda *a: called.append(1))
    with pytest.raises(ValueError, match=r"\(1, 4, 4, 31, 32\).*patch size"):
        run(model, wan_inputs(model, frames=4, height=31, width=32))
    assert not called and not library_stats
    cog = cogvideox(patch_size_t=2)
    psa_diffusers.enable_psa(cog)
    with pytest.raises(ValueError, match=r"\(1, 3, 4, 16, 16\).*patch size"):
        run(cog, cog_inputs(cog, frames=3, height=16, width=16))
    assert not library_stats


def test_subclassed_processors_are_refused():
    # A subclass may compute something else (here: twice the attention); replacing it would
    # silently drop that. Only diffusers' default classes themselves are replaced.
    from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0
    from diffusers.models.transformers.transformer_wan import WanAttnProcessor

    class Doubling(WanAttnProcessor):
        def __call__(self, *args, **kwargs):
            return 2 * super().__call__(*args, **kwargs)

    class CogDoubling(CogVideoXAttnProcessor2_0):
        def __call__(self, *args, **kwargs):
            return tuple(2 * x for x in super().__call__(*args, **kwargs))

    for model, cls, path in ((wan(), Doubling, "blocks.1.attn1"),
                             (cogvideox(), CogDoubling, "transformer_blocks.1.attn1")):
        model.get_submodule(path).set_processor(cls())
        before = processors(model)
        with pytest.raises(TypeError, match=r"%s uses .*\.%s, a subclass of"
                           % (path.replace(".", r"\."), cls.__name__)):
            psa_diffusers.enable_psa(model, preset="baseline")
        assert all(processors(model)[n] is before[n] for n in before)
        assert not psa_diffusers.is_enabled(model)


@pytest.mark.parametrize("make", [wan, cogvideox])
def test_causal_presets_are_refused(make):
    model = make()
    before = processors(model)
    for args, kwargs, match in (
            (("Qwen2-VL-7B",), {}, r"model='Qwen2-VL-7B'.*type psa_causal"),
            (("Qwen2.5-VL-7B", "baseline"), {}, r"'Qwen2.5-VL-7B', preset='baseline'.*"
                                                r"causal = true"),
            ((), {"causal": True}, r"causal = true")):
        with pytest.raises(ValueError, match=match + ".*bidirectional"):
            psa_diffusers.enable_psa(model, *args, **kwargs)
        assert all(processors(model)[n] is before[n] for n in before)
        assert not psa_diffusers.is_enabled(model)


def test_deepcopy_has_its_own_state(library_stats):
    import copy

    plain = wan()
    models = [copy.deepcopy(plain) for _ in range(3)]  # original, its reference, the copy's
    for model in models:
        psa_diffusers.enable_psa(model, "Wan2.1_1.3b", "psa_topk", warmup_steps=1)
    original, ref_original, ref_copy = models
    a = wan_inputs(original, frames=4, height=32, width=32)  # grid (4, 16, 16): 1024 tokens
    b = wan_inputs(original, frames=2, height=32, width=64)  # grid (2, 16, 32): 1024 tokens

    def at(kw, t):
        return dict(kw, timestep=torch.full((1,), t))

    assert torch.equal(run(original, at(a, 900.0)), run(ref_original, at(a, 900.0)))
    run(ref_copy, at(a, 900.0))  # the copy's history: the original's first forward
    copied = copy.deepcopy(original)
    # interleaved: each model counts its own steps (warm-up 1: step 0 dense, then sparse)
    # on its own latent (two grids of 1024 tokens)
    for i, (model, reference, kw, grid) in enumerate([
            (copied, ref_copy, at(b, 900.0), (2, 16, 32)),         # copy: step 0
            (original, ref_original, at(a, 800.0), (4, 16, 16)),   # original: step 1
            (copied, ref_copy, at(b, 850.0), (2, 16, 32)),         # copy: step 1
            (original, ref_original, at(a, 700.0), (4, 16, 16))]):  # original: step 2
        assert torch.equal(run(model, kw), run(reference, kw)), i
        assert psa_diffusers.stats(model)[0]["grid"] == grid
    for model, reference in ((original, ref_original), (copied, ref_copy)):
        mine, theirs = psa_diffusers.stats(model)[0], psa_diffusers.stats(reference)[0]
        assert (mine["step"], mine["forwards"], mine["sparse_calls"]) == \
            (theirs["step"], theirs["forwards"], theirs["sparse_calls"])
    assert psa_diffusers.stats(original)[0]["step"] == 2
    assert psa_diffusers.stats(copied)[0]["step"] == 1
    # disabling the copy leaves the original enabled, with its hooks
    hooks = (dict(original._forward_pre_hooks), dict(original._forward_hooks))
    psa_diffusers.disable_psa(copied)
    assert not copied._forward_pre_hooks and not copied._forward_hooks
    assert psa_diffusers.is_enabled(original)
    assert (dict(original._forward_pre_hooks), dict(original._forward_hooks)) == hooks
    assert torch.equal(run(original, at(a, 700.0)), run(ref_original, at(a, 700.0)))


def test_deepcopy_of_a_pipeline_drives_its_own_scheduler_steps():
    import copy
    import inspect

    pipe = ToyPipeline(wan())
    psa_diffusers.enable_psa(pipe, warmup_steps=1)
    # the wrappers show the scheduler's own signature (pipelines inspect it)
    assert "sigmas" in inspect.signature(pipe.scheduler.set_timesteps).parameters
    assert "generator" in inspect.signature(pipe.scheduler.step).parameters
    twin = copy.deepcopy(pipe)
    for p in (pipe, twin):
        p.scheduler.set_timesteps(4)
    kw = wan_inputs(twin.transformer)
    run(twin.transformer, kw)
    twin.scheduler.step(kw["hidden_states"], twin.scheduler.timesteps[0], kw["hidden_states"])
    assert psa_diffusers.stats(twin)[0]["step"] == 1
    assert psa_diffusers.stats(pipe)[0]["step"] == 0
    psa_diffusers.disable_psa(twin)
    assert psa_diffusers.is_enabled(pipe) and "step" in pipe.scheduler.__dict__


def test_grid_lives_for_one_forward():
    model = wan()
    psa_diffusers.enable_psa(model, preset="baseline")
    kw = wan_inputs(model)  # grid (4, 16, 16): 1024 tokens
    run(model, kw)
    assert psa_diffusers.stats(model)[0]["grid"] == (4, 16, 16)  # the last forward's
    hidden = torch.randn(1, 1024, 64)
    with torch.no_grad(), pytest.raises(RuntimeError, match="no video grid"):
        model.blocks[0].attn1(hidden)
    # also after a forward that raised midway
    handle = model.blocks[1].register_forward_pre_hook(lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        run(model, kw)
    handle.remove()
    with torch.no_grad(), pytest.raises(RuntimeError, match="no video grid"):
        model.blocks[0].attn1(hidden)
    psa_diffusers.disable_psa(model)
    assert not model._forward_hooks and not model._forward_pre_hooks


@pytest.mark.parametrize("name", ["wan_t2v", "cogvideox_5b"])
def test_timestep_source_names_a_missing_or_non_finite_timestep(name, library_stats):
    make, inputs = MODELS[name]
    model = make()
    psa_diffusers.enable_psa(model, warmup_steps=1)  # step_source "timestep"
    kw = inputs(model)
    run(model, kw)
    before = psa_diffusers.stats(model)[0]
    cases = [(None, TypeError, "timestep: None"),
             (torch.tensor([float("nan")]), ValueError, "timestep: .*nan.* not finite"),
             (torch.tensor([500.0, float("inf")]), ValueError,
              "timestep: .*inf.* not finite"),
             (float("nan"), ValueError, "not finite"),
             (torch.tensor([]), ValueError, "timestep: an empty tensor"),
             ("soon", TypeError, "timestep = 'soon'")]
    for _ in range(2):
        for value, error, match in cases:
            with pytest.raises(error, match=match):
                run(model, dict(kw, timestep=value))
    assert psa_diffusers.stats(model)[0] == before  # no step, no forward counted
    assert psa_diffusers._state_of(model).grid is None
    run(model, kw)  # the same timestep: the same step
    assert psa_diffusers.stats(model)[0]["step"] == before["step"]


# ---- CUDA (skipped without a GPU and libpsa's CUDA backend) --------------------------------
needs_cuda = pytest.mark.skipif(
    torch is None or not (torch.cuda.is_available() and psa.cuda_available()),
    reason="needs a CUDA device and libpsa's CUDA backend")


def cuda_wan():
    # head_dim 128: a head size the CUDA backend supports
    return wan(attention_head_dim=128, rope_max_seq_len=128).cuda().to(torch.bfloat16)


def to_cuda(kw):
    return {k: (v.cuda().to(torch.bfloat16) if isinstance(v, torch.Tensor) and
                v.is_floating_point() and k != "timestep" else
                v.cuda() if isinstance(v, torch.Tensor) else
                tuple(x.cuda() for x in v) if isinstance(v, tuple) else v)
            for k, v in kw.items()}


@needs_cuda
@pytest.mark.parametrize("preset,bound", [("baseline", 2e-2), ("psa_balanced", 0.1)])
def test_cuda_bf16_wan_matches_default_processors(preset, bound, library_stats):
    model = cuda_wan()
    kw = to_cuda(wan_inputs(model, batch=2, frames=8, height=32, width=64))
    expected = run(model, kw)
    psa_diffusers.enable_psa(model, "Wan2.1_1.3b", preset, step_source="manual")
    psa_diffusers.set_step(model, 100)
    got = run(model, kw)
    torch.cuda.synchronize()
    assert got.dtype == torch.bfloat16 and rel_l2(got, expected) <= bound
    assert library_stats


@needs_cuda
def test_cuda_compiled_transformer_has_no_graph_break():
    model = cuda_wan()
    kw = to_cuda(wan_inputs(model, frames=8, height=32, width=64))
    psa_diffusers.enable_psa(model, "Wan2.1_1.3b", step_source="manual")
    psa_diffusers.set_step(model, 100)
    expected = run(model, kw)
    torch._dynamo.reset()
    with torch.no_grad():
        explained = torch._dynamo.explain(model)(**kw)
        print("graph breaks: %d, graphs: %d" % (explained.graph_break_count,
                                                explained.graph_count))
        assert explained.graph_break_count == 0, explained.break_reasons
        torch._dynamo.reset()
        got = torch.compile(model, fullgraph=True)(**kw)[0]
    assert rel_l2(got, expected) <= 2e-2


@needs_cuda
def test_cuda_graph_capture_of_a_step_replays_bit_identically():
    model = cuda_wan()
    kw = to_cuda(wan_inputs(model, batch=2, frames=8, height=32, width=64))
    # the timestep source reads the timestep on the host, which capture forbids
    psa_diffusers.enable_psa(model, "Wan2.1_1.3b", step_source="manual")
    psa_diffusers.set_step(model, 100)
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                eager = model(**kw)[0]
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = model(**kw)[0]
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, eager)
        first = captured.clone()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, first)


REAL_CONFIGS = {
    # diffusers' configs of the released checkpoints (random weights: values do not matter)
    "Wan2.1_1.3b": (lambda: WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
        out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30,
        cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6),
        dict(latent=(1, 16, 21, 60, 104), text=512)),
    "CogVideo_5b": (lambda: CogVideoXTransformer3DModel(
        num_attention_heads=48, attention_head_dim=64, in_channels=16, out_channels=16,
        text_embed_dim=4096, num_layers=42, sample_width=90, sample_height=60,
        sample_frames=49, patch_size=2, max_text_seq_length=226,
        use_rotary_positional_embeddings=True),
        dict(latent=(1, 13, 16, 60, 90), text=226)),
}


@needs_cuda
@pytest.mark.skipif(not __import__("os").environ.get("PSA_TEST_REAL_CONFIGS"),
                    reason="set PSA_TEST_REAL_CONFIGS=1 (GPU, several GB)")
@pytest.mark.parametrize("name", sorted(REAL_CONFIGS))
def test_cuda_real_configs_bf16(name, library_stats):
    make, shape = REAL_CONFIGS[name]
    torch.manual_seed(seed())
    model = make().eval().cuda().to(torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(seed())
    latent = torch.randn(shape["latent"], generator=g, device="cuda", dtype=torch.bfloat16)
    text = torch.randn(1, shape["text"], 4096, generator=g, device="cuda",
                       dtype=torch.bfloat16)
    kw = dict(hidden_states=latent, encoder_hidden_states=text,
              timestep=torch.full((1,), 500.0, device="cuda"), return_dict=False)
    if name.startswith("Cog"):
        from diffusers.models.embeddings import get_3d_rotary_pos_embed
        _, f, _, h, w = shape["latent"]
        kw["image_rotary_emb"] = tuple(x.cuda() for x in get_3d_rotary_pos_embed(
            embed_dim=64, crops_coords=None, grid_size=(h // 2, w // 2), temporal_size=f,
            grid_type="slice", max_size=(h // 2, w // 2)))
    expected = run(model, kw)
    psa_diffusers.enable_psa(model, name, "baseline")
    baseline = run(model, kw)
    psa_diffusers.enable_psa(model, name, step_source="manual")
    psa_diffusers.set_step(model, 100)
    sparse = run(model, kw)
    torch.cuda.synchronize()
    print("%s: baseline rel-L2 %.2e, psa_balanced rel-L2 %.2e, density %.3f"
          % (name, rel_l2(baseline, expected), rel_l2(sparse, expected),
             library_stats[-1][1]))
    assert rel_l2(baseline, expected) <= 2e-2
    assert rel_l2(sparse, expected) <= 0.1
