#!/usr/bin/env python3
"""benchmarks/diffusers_step_bench.py -- one denoising step of diffusers' WanTransformer3DModel,
dense SDPA (diffusers' default attention processors) against libpsa (psa.diffusers.enable_psa),
eager and torch.compile.

What is timed: one denoising step of the transformer with classifier-free guidance, i.e. both
CFG passes -- the transformer called once on a batch of 2 (cond + uncond, --cfg batch) or twice
on a batch of 1 (--cfg two, what diffusers' WanPipeline does) -- plus the guidance combine
(uncond + g * (cond - uncond), elementwise). The scheduler update, the text encoder and the VAE
are not part of it.

Sizes (the released diffusers configs of Wan-AI/Wan2.1-T2V-*-Diffusers, transformer/config.json;
text: umT5-XXL, 512 tokens of 4096):
  --model 1.3b  Wan2.1-1.3B, 480x832, 81 frames: latent 16x21x60x104, patch 1x2x2 -> 21x30x52 =
                32,760 tokens; 30 layers, dim 1536 (12 heads x 128), ffn 8960.
  --model 14b   Wan2.1-14B, 720x1280, 81 frames: latent 16x21x90x160 -> 21x45x80 = 75,600 tokens;
                40 layers, dim 5120 (40 heads x 128), ffn 13824.
Weights are random (speed does not depend on their values; the *density* of threshold presets
such as psa_balanced does, see below), built directly on the device in the chosen dtype; the
modules diffusers keeps in fp32 when loading a checkpoint in bf16 (_keep_in_fp32_modules:
time embedder, scale_shift_table, norms) are kept in fp32 here too. --layers N builds only N
transformer blocks; the table then says "N of 40 layers" and adds an estimate for the full depth:
outside + (step - outside) * L_full / N, with `outside` (patch embedding, condition embedder,
RoPE, output head) measured by a step with the blocks removed (eager).

Configurations (--configs, comma separated; default: dense, psa_balanced, the model's presets
with mask_mode topk, topk:0.15):
  dense        diffusers' default processors: torch SDPA, backend forced with
               torch.nn.attention.sdpa_kernel (--sdpa, default cudnn on CUDA); the SDPA kernel
               names seen by the profiler are recorded.
  PRESET       psa.diffusers.enable_psa(model, model=<psa model>, preset=PRESET,
               step_source="manual") and set_step() past the preset's warmup_steps, so every
               timed step is sparse (checked: libpsa's own statistics of one step must show no
               dense forward).
  topk:D       psa_balanced with topk quotas, every kept key block at level 1 and the rest
               skipped, density D (as "topk:D" in BENCHMARKS.md / psa_bench): a fixed density
               whatever the attention maps look like.
Random weights give near-uniform attention maps, so a threshold preset (psa_balanced keeps
blocks until a share of the estimated mass is covered) reaches a different density than with
trained weights; the measured density is reported for every row, and topk:D pins it.

Per configuration: W warm-up steps (--warmup; the first one includes compilation when
compiling), one untimed step that reads libpsa's statistics after every forward (mean density;
fails the configuration if any forward ran dense), one step under torch.profiler (attention
share), then N timed steps (--steps; CUDA events around each step, synchronised; the median is
reported).

Attention share: from the profiled step. Every outermost attention operator (psa::attention, or
an aten scaled-dot-product-attention op whose query and key lengths are equal = self-attention;
cross-attention to the 512 text tokens is counted separately) contributes the device time of
the kernels launched inside it; the share is that sum over the sum of all device kernel/memcpy/
memset time of the step. When the profiler does not attribute libpsa's kernels to the operator
(its CUDA runtime is linked statically), kernels named psa::gpu::* are summed instead (the JSON
says which). On the CPU (--tiny) CPU time of the operators over the step's wall time is used.

Output: a Markdown table on stdout (progress on stderr) and, with --json FILE, the whole record
(date, GPU, driver, torch/CUDA/cuDNN/diffusers/libpsa versions, git commit, per-row details,
profiler breakdown by kernel class and the top kernels), rewritten after every configuration so
that a run cut short keeps what it measured (--render FILE prints the table of such a record).
--budget-s S skips configurations that would end past S seconds from the start (estimated from
the steps measured so far).

Examples:
  python benchmarks/diffusers_step_bench.py --tiny                       # CPU smoke test
  python benchmarks/diffusers_step_bench.py --model 1.3b --compile --json wan13.json
  python benchmarks/diffusers_step_bench.py --model 14b --layers 10 --compile --steps 3
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# diffusers' WanTransformer3DModel kwargs of the released Wan2.1 T2V checkpoints.
_WAN_COMMON = dict(patch_size=(1, 2, 2), attention_head_dim=128, in_channels=16, out_channels=16,
                   text_dim=4096, freq_dim=256, cross_attn_norm=True,
                   qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None,
                   added_kv_proj_dim=None, rope_max_seq_len=1024)
MODELS: Dict[str, Dict[str, Any]] = {
    "1.3b": dict(label="Wan2.1-1.3B 480p/81 frames", psa_model="Wan2.1_1.3b",
                 config=dict(_WAN_COMMON, num_attention_heads=12, ffn_dim=8960, num_layers=30),
                 latent=(16, 21, 60, 104), text=(512, 4096)),
    "14b": dict(label="Wan2.1-14B 720p/81 frames", psa_model="Wan2.1_14b",
                config=dict(_WAN_COMMON, num_attention_heads=40, ffn_dim=13824, num_layers=40),
                latent=(16, 21, 90, 160), text=(512, 4096)),
}
# --tiny: the same classes and code paths at CPU-friendly sizes (grid 5x16x24 = 1,920 tokens).
TINY: Dict[str, Any] = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=64, in_channels=4,
            out_channels=4, text_dim=64, freq_dim=32, ffn_dim=256, num_layers=2,
            cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=64)
TINY_LATENT, TINY_TEXT = (4, 5, 32, 48), (16, 64)

GUIDANCE = 5.0
SDPA_OP_PREFIXES = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product",
                    "aten::_flash_attention_forward", "aten::_efficient_attention_forward",
                    "aten::_cudnn_attention_forward")
PSA_OP = "psa::attention"


def log(msg: str) -> None:
    print("[step-bench %6.1fs] %s" % (time.time() - T0, msg), file=sys.stderr, flush=True)


T0 = time.time()


# ---- environment -------------------------------------------------------------------------
def git_commit(explicit: Optional[str]) -> Dict[str, Any]:
    if explicit:
        return {"commit": explicit, "source": "--commit"}
    try:
        sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        if sha.returncode == 0:
            dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                    "--untracked-files=no"], capture_output=True, text=True,
                                   timeout=10)
            return {"commit": sha.stdout.strip(), "source": "git rev-parse",
                    "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"commit": None, "source": "unknown (no --commit, no git)"}


def environment(torch: Any, device: str, commit: Optional[str]) -> Dict[str, Any]:
    import diffusers
    import psa
    env: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0], "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "diffusers": diffusers.__version__, "libpsa_python": psa.__version__,
        "libpsa_library": psa.library_version(), "git": git_commit(commit), "device": device,
    }
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name()
        env["gpu_capability"] = "%d.%d" % torch.cuda.get_device_capability()
        env["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=20)
            env["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else None
        except (OSError, subprocess.SubprocessError, IndexError):
            env["driver"] = None
    else:
        import platform
        env["cpu"] = platform.processor() or platform.machine()
        env["cpu_threads"] = torch.get_num_threads()
    return env


# ---- model and inputs --------------------------------------------------------------------
def build_model(torch: Any, config: Dict[str, Any], device: str, dtype: Any, seed: int) -> Any:
    """WanTransformer3DModel with random weights, created on `device` in `dtype` (no host
    copy, no fp32 stage), with diffusers' _keep_in_fp32_modules in fp32 as from_pretrained
    (torch_dtype=bf16) leaves them."""
    from diffusers import WanTransformer3DModel
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = WanTransformer3DModel(**config)
    finally:
        torch.set_default_dtype(previous)
    keep = list(getattr(model, "_keep_in_fp32_modules", None) or [])
    for name, param in model.named_parameters():
        if param.dtype != torch.float32 and any(k in name.split(".") for k in keep):
            param.data = param.data.float()
    return model.eval().requires_grad_(False)


def make_inputs(torch: Any, latent: Tuple[int, ...], text: Tuple[int, int], device: str,
                dtype: Any, seed: int) -> Dict[str, Any]:
    g = torch.Generator(device=device).manual_seed(seed)
    lat = torch.randn((1,) + tuple(latent), generator=g, device=device, dtype=dtype)
    cond = torch.randn((1,) + tuple(text), generator=g, device=device, dtype=dtype)
    uncond = torch.randn((1,) + tuple(text), generator=g, device=device, dtype=dtype)
    t1 = torch.full((1,), 500.0, device=device)
    return {"lat1": lat, "t1": t1, "cond": cond, "uncond": uncond,
            "lat2": torch.cat([lat, lat]), "t2": torch.cat([t1, t1]),
            "text2": torch.cat([cond, uncond])}


def make_step(fn: Any, x: Dict[str, Any], cfg_style: str) -> Any:
    if cfg_style == "batch":
        def step() -> Any:
            out = fn(hidden_states=x["lat2"], timestep=x["t2"],
                     encoder_hidden_states=x["text2"], return_dict=False)[0]
            cond, uncond = out.chunk(2)
            return uncond + GUIDANCE * (cond - uncond)
    else:
        def step() -> Any:
            cond = fn(hidden_states=x["lat1"], timestep=x["t1"],
                      encoder_hidden_states=x["cond"], return_dict=False)[0]
            uncond = fn(hidden_states=x["lat1"], timestep=x["t1"],
                        encoder_hidden_states=x["uncond"], return_dict=False)[0]
            return uncond + GUIDANCE * (cond - uncond)
    return step


# ---- timing ------------------------------------------------------------------------------
class Timer:
    def __init__(self, torch: Any, device: str) -> None:
        self.torch, self.cuda = torch, device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def time_ms(self, fn: Any) -> float:
        """One call of fn, ms: CUDA events around it (synchronised), or wall time on CPU."""
        if self.cuda:
            e0 = self.torch.cuda.Event(enable_timing=True)
            e1 = self.torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            return float(e0.elapsed_time(e1))
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3


# ---- libpsa statistics of one step ---------------------------------------------------------
@contextlib.contextmanager
def psa_forward_stats() -> Iterator[List[Tuple[bool, float]]]:
    """Collects (ran_dense, density) of every libpsa forward inside the block (reads the
    context's statistics right after each forward: synchronises, so only for untimed steps)."""
    import psa
    calls: List[Tuple[bool, float]] = []
    original = psa.capi.psa_attention_forward

    def forward(handle: Any, *args: Any) -> Any:
        result = original(handle, *args)
        s = psa.capi.psa_stats()
        psa.capi.psa_context_get_stats(handle, s)
        calls.append((bool(s.ran_dense), float(s.density)))
        return result

    psa.capi.psa_attention_forward = forward
    try:
        yield calls
    finally:
        psa.capi.psa_attention_forward = original


# ---- profiler analysis -------------------------------------------------------------------
def _is_attention_op(name: str) -> bool:
    return name == PSA_OP or name.startswith(SDPA_OP_PREFIXES)


def _kernels(event: Any, out: Dict[str, float]) -> None:
    for k in getattr(event, "kernels", []) or []:
        out[k.name] = out.get(k.name, 0.0) + float(k.duration)
    for child in event.cpu_children:
        _kernels(child, out)


def _classify_kernel(name: str) -> str:
    n = name.lower()
    if "psa::gpu" in n:
        return "libpsa"
    if any(s in n for s in ("flash", "fmha", "sdpa", "attention", "cudnn_generated_fort")):
        return "sdpa"
    if any(s in n for s in ("gemm", "xmma", "cutlass", "nvjet", "cublas", "wgmma",
                            "matmul", "splitk")):
        return "gemm"
    if n.startswith(("memcpy", "memset")) or "memcpy" in n or "memset" in n:
        return "memcpy/memset"
    if "triton" in n:
        return "triton (fused elementwise/norm)"
    return "other kernels"


def analyse_profile(prof: Any, device: str, wall_ms: float) -> Dict[str, Any]:
    from torch.autograd import DeviceType
    events = list(prof.events())
    cuda = device == "cuda"
    self_ms = cross_ms = 0.0
    n_self = n_cross = n_unknown = 0
    attn_kernels: Dict[str, float] = {}
    for e in events:
        if e.device_type != DeviceType.CPU or not _is_attention_op(e.name):
            continue
        parent, nested = e.cpu_parent, False
        while parent is not None:
            if _is_attention_op(parent.name):
                nested = True
                break
            parent = parent.cpu_parent
        if nested:
            continue
        t_ms = (e.device_time_total if cuda else e.cpu_time_total) / 1e3
        shapes = e.input_shapes or []
        if e.name == PSA_OP:
            is_self: Optional[bool] = True
        elif len(shapes) >= 2 and len(shapes[0]) == 4 and len(shapes[1]) == 4:
            is_self = shapes[0][2] == shapes[1][2]
        else:
            is_self = None
        if is_self is None:
            n_unknown += 1
            is_self = True  # counted as self-attention; flagged in the record
        if is_self:
            self_ms += t_ms
            n_self += 1
            if cuda:
                _kernels(e, attn_kernels)
        else:
            cross_ms += t_ms
            n_cross += 1
    result: Dict[str, Any] = {"self_attention_ops": n_self, "cross_attention_ops": n_cross,
                              "attention_ops_without_shapes": n_unknown}
    if cuda:
        by_name: Dict[str, float] = {}
        for e in events:
            if e.device_type == DeviceType.CUDA:
                by_name[e.name] = by_name.get(e.name, 0.0) + e.device_time_total / 1e3
        total_ms = sum(by_name.values())
        psa_named = sum(v for k, v in by_name.items() if "psa::gpu" in k)
        method = "operator device time"
        if psa_named > 0 and sum(v for k, v in attn_kernels.items()
                                 if "psa::gpu" in k) / 1e3 < 0.5 * psa_named:
            # libpsa's kernels were not attributed to psa::attention: count them by name
            self_ms += psa_named
            method = "operator device time + kernels named psa::gpu::*"
        breakdown: Dict[str, float] = {}
        for k, v in by_name.items():
            c = _classify_kernel(k)
            breakdown[c] = breakdown.get(c, 0.0) + v
        top = sorted(by_name.items(), key=lambda kv: -kv[1])[:15]
        result.update({
            "method": method, "device_total_ms": total_ms, "self_attention_ms": self_ms,
            "cross_attention_ms": cross_ms,
            "attention_share": self_ms / total_ms if total_ms > 0 else None,
            "profiled_step_wall_ms": wall_ms,
            "breakdown_ms": {k: round(v, 3) for k, v in sorted(breakdown.items(),
                                                                key=lambda kv: -kv[1])},
            "top_kernels_ms": [[k[:120], round(v, 3)] for k, v in top],
            "attention_kernels_ms": [[k[:120], round(v / 1e3, 3)] for k, v in
                                     sorted(attn_kernels.items(), key=lambda kv: -kv[1])[:4]],
        })
    else:
        result.update({
            "method": "operator CPU time / step wall time (CPU)",
            "device_total_ms": wall_ms, "self_attention_ms": self_ms,
            "cross_attention_ms": cross_ms,
            "attention_share": self_ms / wall_ms if wall_ms > 0 else None,
            "profiled_step_wall_ms": wall_ms,
        })
    return result


# ---- configurations ----------------------------------------------------------------------
def default_configs(psa_model: str) -> List[str]:
    import psa
    topk = [p for p in psa.presets()[psa_model]
            if p != "psa_balanced" and getattr(psa.Config.load(psa_model, p)["mask_mode"], "word", "") == "topk"]
    return ["dense", "psa_balanced"] + topk + ["topk:0.15"]


def psa_settings(spec: str) -> Tuple[str, Dict[str, Any]]:
    """(preset, overrides) for a PSA configuration spec."""
    if spec.startswith("topk:"):
        d = float(spec.split(":", 1)[1])
        if not 0.0 < d <= 1.0:
            raise ValueError("%s: density must be in (0, 1]" % spec)
        return "psa_balanced", {"mask_mode": "topk", "mask_ratios.1": d, "mask_ratios.2": d,
                                "mask_ratios.4": d, "mask_ratios.8": d, "mask_ratios.0": 1.0,
                                "warmup_steps": 0}
    return spec, {}


def sdpa_context(name: str) -> Any:
    if name == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[name]
    return sdpa_kernel(backend)


# ---- one configuration -------------------------------------------------------------------
def run_config(torch: Any, args: argparse.Namespace, model: Any, x: Dict[str, Any],
               mode: str, cfg_style: str, spec: str, psa_model: str, timer: Timer,
               expected_calls: int) -> Dict[str, Any]:
    import psa
    import psa.diffusers as pd
    from torch._dynamo.utils import counters
    row: Dict[str, Any] = {"mode": mode, "cfg": cfg_style, "config": spec}
    pd.disable_psa(model)
    psa.clear_cache()
    if spec != "dense":
        preset, overrides = psa_settings(spec)
        pd.enable_psa(model, model=psa_model, preset=preset, step_source="manual", **overrides)
        warmup_steps = int(pd.stats(model)[0]["warmup_steps"])
        pd.set_step(model, warmup_steps)  # past the preset's warm-up: every forward sparse
        row.update(preset=preset, overrides=overrides, preset_warmup_steps=warmup_steps,
                   step_set_to=warmup_steps, psa_config_key=pd.stats(model)[0]["config"])
    if mode == "compile":
        torch._dynamo.reset()  # compile this configuration from scratch
        counters.clear()
        fn = model_compiled(torch, args, model)
    else:
        fn = model
    step = make_step(fn, x, cfg_style)
    with torch.no_grad(), sdpa_context(args.sdpa):
        t = time.perf_counter()
        step()
        timer.sync()
        row["first_step_s"] = round(time.perf_counter() - t, 3)
        log("  %s/%s/%s: first step %.1f s%s" % (mode, cfg_style, spec, row["first_step_s"],
                                                 " (includes compilation)"
                                                 if mode == "compile" else ""))
        for _ in range(max(args.warmup, 1) - 1):
            step()
        timer.sync()
        # one more untimed step with libpsa's statistics read after every forward
        with psa_forward_stats() as calls:
            step()
            timer.sync()
        if spec == "dense":
            row["density"] = 1.0
            if calls:
                raise RuntimeError("dense configuration ran %d libpsa forwards" % len(calls))
        else:
            if len(calls) != expected_calls:
                raise RuntimeError("%s: %d libpsa forwards in one step, expected %d"
                                   % (spec, len(calls), expected_calls))
            dense_calls = sum(1 for c in calls if c[0])
            method = pd.psa_torch.config_from_key(row["psa_config_key"])["type"]
            row["psa_method"] = getattr(method, "word", str(method))
            if dense_calls and row["psa_method"] != "dense":  # `baseline` is dense by design
                raise RuntimeError("%s: %d of %d libpsa forwards ran dense (warm-up): the "
                                   "timed step would not be sparse" % (spec, dense_calls,
                                                                       len(calls)))
            dens = [c[1] for c in calls]
            row.update(density=statistics.fmean(dens), density_min=min(dens),
                       density_max=max(dens), psa_forwards_per_step=len(calls),
                       psa_dense_forwards=dense_calls)
        if mode == "compile":
            row["graph_breaks"] = int(sum(counters["graph_break"].values()))
            row["compiled_graphs"] = int(counters["stats"]["unique_graphs"])
        if args.profile:
            from torch.profiler import ProfilerActivity, profile
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                             if args.device == "cuda" else [])
            with profile(activities=acts, record_shapes=True) as prof:
                t = time.perf_counter()
                step()
                timer.sync()
                wall = (time.perf_counter() - t) * 1e3
            row["profile"] = analyse_profile(prof, args.device, wall)
            del prof
        times = [timer.time_ms(step) for _ in range(args.steps)]
    row["step_ms_all"] = [round(t, 3) for t in times]
    row["step_ms"] = statistics.median(times)
    if mode == "eager" and spec != "dense":
        s = pd.stats(model)[0]
        row["psa_diffusers_stats"] = {k: s[k] for k in ("step", "dense", "dense_calls",
                                                        "sparse_calls", "forwards", "grid")}
    return row


def model_compiled(torch: Any, args: argparse.Namespace, model: Any) -> Any:
    kw = {} if args.compile_mode is None else {"mode": args.compile_mode}
    if args.compile_scope == "full":
        return torch.compile(model, **kw)
    if not getattr(model, "_psa_bench_regional", False):
        model.compile_repeated_blocks(**kw)  # diffusers' regional compilation (each block)
        model._psa_bench_regional = True
    return model


def outside_blocks_ms(torch: Any, args: argparse.Namespace, model: Any, x: Dict[str, Any],
                      cfg_style: str, timer: Timer) -> float:
    """Median step time with every transformer block removed (eager): patch embedding,
    condition embedder, RoPE, output head, guidance combine."""
    blocks = model.blocks
    model.blocks = torch.nn.ModuleList()
    try:
        step = make_step(model, x, cfg_style)
        with torch.no_grad():
            step()
            timer.sync()
            times = [timer.time_ms(step) for _ in range(max(3, args.steps))]
    finally:
        model.blocks = blocks
    return statistics.median(times)


# ---- output ------------------------------------------------------------------------------
def fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def markdown(record: Dict[str, Any]) -> str:
    env, setup = record["environment"], record["setup"]
    full, n = setup["layers_full"], setup["layers"]
    lines = []
    lines.append("### %s: one denoising step (CFG %s), %s" % (
        setup["label"], ", ".join(setup["cfg_styles"]), "all %d layers" % full if n == full
        else "%d of %d layers" % (n, full)))
    lines.append("")
    where = env.get("gpu") or env.get("cpu")
    lines.append("%s, %s, driver %s; torch %s (CUDA %s, cuDNN %s), diffusers %s, libpsa %s, "
                 "commit %s%s; %s, tokens %s, dense = SDPA (%s); %s warm-up + median of %d "
                 "steps" % (
                     env["date"], where, env.get("driver", "-"), env["torch"], env["cuda"],
                     env["cudnn"], env["diffusers"], env["libpsa_library"],
                     (env["git"]["commit"] or "unknown")[:12],
                     " (dirty tree)" if env["git"].get("dirty") else "", setup["dtype"],
                     "x".join(str(v) for v in setup["grid"]) + " = %d" % setup["tokens"],
                     setup["sdpa"], setup["warmup"], setup["steps"]))
    lines.append("")
    est = n != full
    head = ["mode", "CFG", "config", "density", "step ms", "vs dense", "self-attn ms",
            "attn share", "rest ms"]
    if est:
        head.append("est. %d-layer ms" % full)
    head.append("first step s")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for r in record["results"]:
        if "error" in r or "skipped" in r:
            cells = [r["mode"], r["cfg"], r["config"]] + ["-"] * (len(head) - 4) + [
                ("ERROR: " + r["error"][:80]) if "error" in r else "skipped: " + r["skipped"]]
            lines.append("| " + " | ".join(cells) + " |")
            continue
        p = r.get("profile") or {}
        attn = p.get("self_attention_ms")
        share = p.get("attention_share")
        rest = p.get("device_total_ms") - attn if attn is not None else None
        cells = [r["mode"], r["cfg"], r["config"], fmt(r.get("density"), ".3f"),
                 fmt(r["step_ms"], ".1f"),
                 fmt(r.get("speedup_vs_dense"), ".2f") + ("x" if r.get("speedup_vs_dense")
                                                          else ""),
                 fmt(attn, ".1f"), fmt(None if share is None else 100 * share, ".1f") +
                 ("%" if share is not None else ""), fmt(rest, ".1f")]
        if est:
            cells.append(fmt(r.get("est_full_depth_ms"), ".0f"))
        cells.append(fmt(r.get("first_step_s"), ".1f"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    notes = ["step ms: CUDA events around one whole step (both CFG passes + guidance combine), "
             "median" if env["device"] == "cuda" else "step ms: wall time (CPU), median",
             "self-attn ms / attn share: one profiled step (torch.profiler); device time of the "
             "self-attention operators (psa::attention or SDPA with equal query/key lengths) "
             "over all device time of the step; rest ms = device time outside self-attention "
             "(includes cross-attention)" if env["device"] == "cuda" else
             "self-attn ms / attn share: one profiled step, CPU time of the self-attention "
             "operators over the step's wall time",
             "density: mean over every libpsa forward of one step (libpsa statistics; a level-p "
             "block counts 1/p); every PSA forward of the timed steps is sparse (checked)"]
    sdpa_kernels = [r["profile"]["attention_kernels_ms"][0][0] for r in record["results"]
                    if r.get("config") == "dense" and (r.get("profile") or {}).get(
                        "attention_kernels_ms")]
    if sdpa_kernels:
        notes.append("dense self-attention kernel seen by the profiler: `%s`"
                     % sdpa_kernels[0][:100])
    if est:
        notes.append("est. %d-layer ms = outside + (step - outside) * %d / %d, outside = %s ms "
                     "(a step with no blocks, eager)" % (
                         full, full, n, ", ".join("%s %.1f" % (k, v) for k, v in
                                                  setup["outside_blocks_ms"].items())))
    if setup["compile"]:
        notes.append("compile: torch.compile(%s%s); first step s includes compilation" % (
            "regional: diffusers compile_repeated_blocks, each WanTransformerBlock"
            if setup["compile_scope"] == "blocks" else "whole transformer",
            ", mode=%s" % setup["compile_mode"] if setup["compile_mode"] else ""))
    lines += ["- " + s for s in notes]
    return "\n".join(lines)


def write_json(path: Optional[str], record: Dict[str, Any]) -> None:
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1, default=str)
    os.replace(tmp, path)


# ---- main --------------------------------------------------------------------------------
def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring for what is measured and how.")
    ap.add_argument("--model", choices=sorted(MODELS), default="1.3b")
    ap.add_argument("--tiny", action="store_true",
                    help="tiny model and latent (CPU smoke test; default device cpu)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None,
                    help="default: cuda (cpu with --tiny)")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    ap.add_argument("--layers", type=int, default=None,
                    help="build only N transformer blocks (default: all)")
    ap.add_argument("--configs", default=None,
                    help="comma-separated: dense, a preset of the model, topk:D "
                         "(default: dense,psa_balanced,<topk presets>,topk:0.15)")
    ap.add_argument("--cfg", default="batch",
                    help="CFG styles, comma-separated: batch (one call on a batch of 2), "
                         "two (two calls of batch 1, as WanPipeline); default batch")
    ap.add_argument("--compile", action="store_true", help="also run under torch.compile")
    ap.add_argument("--no-eager", dest="eager", action="store_false",
                    help="skip the eager runs (with --compile)")
    ap.add_argument("--compile-scope", choices=["blocks", "full"], default="blocks",
                    help="blocks: diffusers' regional compilation (compile_repeated_blocks, "
                         "default); full: torch.compile(transformer)")
    ap.add_argument("--compile-mode", default=None,
                    help="torch.compile mode (default: torch's default)")
    ap.add_argument("--sdpa", choices=["cudnn", "flash", "efficient", "math", "auto"],
                    default=None, help="SDPA backend of the dense baseline and of "
                    "cross-attention (default: cudnn on CUDA, auto on CPU)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps (>= 1; the last "
                    "reads libpsa's statistics)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps (median reported)")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="skip the profiled step (no attention share)")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="skip configurations predicted to end past this many seconds "
                         "from the start (0: no limit)")
    ap.add_argument("--json", default=None, metavar="FILE")
    ap.add_argument("--commit", default=None, help="git commit to record (default: git "
                    "rev-parse HEAD of this checkout when available)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--render", default=None, metavar="FILE",
                    help="print the Markdown table of a JSON record written by --json, exit")
    args = ap.parse_args(argv)
    if args.device is None:
        args.device = "cpu" if args.tiny else "cuda"
    if args.sdpa is None:
        args.sdpa = "cudnn" if args.device == "cuda" else "auto"
    if args.steps < 1 or args.warmup < 1:
        ap.error("--steps and --warmup must be >= 1")
    args.cfg_styles = [s.strip() for s in args.cfg.split(",") if s.strip()]
    if not args.cfg_styles or any(s not in ("batch", "two") for s in args.cfg_styles):
        ap.error("--cfg: expected batch, two or batch,two")
    if not args.eager and not args.compile:
        ap.error("--no-eager needs --compile")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.render:
        with open(args.render) as f:
            print(markdown(json.load(f)))
        return 0
    try:
        import torch
    except ImportError as e:
        print("diffusers_step_bench: torch is not installed (%s)" % e, file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("diffusers_step_bench: no CUDA GPU (torch.cuda.is_available() is False); use "
              "--tiny or --device cpu to run on the CPU", file=sys.stderr)
        return 2
    try:
        import diffusers  # noqa: F401  (checked here: a one-line message when missing)
        import psa
        import psa.diffusers  # noqa: F401
    except ImportError as e:
        print("diffusers_step_bench: %s (install diffusers and the psa package)" % e,
              file=sys.stderr)
        return 2
    if args.device == "cuda" and not psa.cuda_available():
        print("diffusers_step_bench: libpsa has no usable CUDA backend (built without CUDA?)",
              file=sys.stderr)
        return 2

    spec = MODELS[args.model]
    psa_model = spec["psa_model"]
    config: Dict[str, Any] = dict(TINY) if args.tiny else dict(spec["config"])
    latent = TINY_LATENT if args.tiny else spec["latent"]
    text = TINY_TEXT if args.tiny else spec["text"]
    full_layers = int(config["num_layers"])
    layers = full_layers if args.layers is None else args.layers
    if not 1 <= layers <= full_layers:
        print("diffusers_step_bench: --layers %d: expected 1..%d" % (layers, full_layers),
              file=sys.stderr)
        return 2
    config["num_layers"] = layers
    configs = ([c.strip() for c in args.configs.split(",") if c.strip()] if args.configs
               else default_configs(psa_model))
    if configs[0] != "dense":
        configs = ["dense"] + [c for c in configs if c != "dense"]  # the baseline comes first
    presets = psa.presets()[psa_model]
    for c in configs:
        if c != "dense" and not c.startswith("topk:") and c not in presets:
            print("diffusers_step_bench: config %r: not dense, topk:D or a preset of %s (%s)"
                  % (c, psa_model, ", ".join(presets)), file=sys.stderr)
            return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    patch = config["patch_size"]
    grid = (latent[1] // patch[0], latent[2] // patch[1], latent[3] // patch[2])
    modes = (["eager"] if args.eager else []) + (["compile"] if args.compile else [])
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)

    env = environment(torch, args.device, args.commit)
    log("%s on %s: %s" % (spec["label"] if not args.tiny else "tiny Wan", env.get("gpu") or
                          env.get("cpu"), ", ".join(configs)))
    t = time.perf_counter()
    model = build_model(torch, config, args.device, dtype, args.seed)
    timer = Timer(torch, args.device)
    timer.sync()
    n_params = sum(p.numel() for p in model.parameters())
    log("model built: %d layers, %.2f B parameters, %.1f s" % (layers, n_params / 1e9,
                                                               time.perf_counter() - t))
    x = make_inputs(torch, latent, text, args.device, dtype, args.seed + 1)

    setup = {
        "label": ("tiny Wan (CPU smoke test; %s presets)" % psa_model) if args.tiny
        else spec["label"], "model": args.model, "psa_model": psa_model, "tiny": args.tiny,
        "transformer_config": {k: list(v) if isinstance(v, tuple) else v
                               for k, v in config.items()},
        "layers": layers, "layers_full": full_layers, "parameters": n_params,
        "latent": [2 if "batch" in args.cfg_styles else 1] + list(latent),
        "text_tokens": list(text), "grid": list(grid), "tokens": grid[0] * grid[1] * grid[2],
        "dtype": args.dtype, "device": args.device, "sdpa": args.sdpa,
        "cfg_styles": args.cfg_styles, "compile": args.compile,
        "compile_scope": args.compile_scope, "compile_mode": args.compile_mode,
        "modes": modes, "configs": configs, "warmup": args.warmup, "steps": args.steps,
        "guidance_scale": GUIDANCE, "timestep": 500.0,
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
    }
    record: Dict[str, Any] = {"benchmark": "diffusers_step_bench", "environment": env,
                              "setup": setup, "results": []}

    outside: Dict[str, float] = {}
    for cfg_style in args.cfg_styles:
        outside[cfg_style] = outside_blocks_ms(torch, args, model, x, cfg_style, timer)
        log("outside the blocks (%s CFG): %.2f ms" % (cfg_style, outside[cfg_style]))
    setup["outside_blocks_ms"] = outside
    write_json(args.json, record)

    failures = 0
    measured: Dict[str, float] = {}     # config -> step ms of its first measurement
    compile_s: Optional[float] = None   # compilation time of the last compiled configuration
    for mode in modes:
        for cfg_style in args.cfg_styles:
            dense_ms: Optional[float] = None
            last_ms: Optional[float] = None
            calls = layers * (1 if cfg_style == "batch" else 2)
            for c in configs:
                base = {"mode": mode, "cfg": cfg_style, "config": c}
                ref_ms = measured.get(c, last_ms)
                if args.budget_s > 0 and ref_ms is not None:
                    n = args.warmup + args.steps + (1 if args.profile else 0) + 1
                    predicted = n * ref_ms / 1e3 + ((compile_s if compile_s is not None
                                                     else 60.0) if mode == "compile" else 0.0)
                    if time.time() - T0 + predicted > args.budget_s:
                        log("skip %s/%s/%s: about %.0f s more would pass --budget-s %.0f"
                            % (mode, cfg_style, c, predicted, args.budget_s))
                        record["results"].append(dict(base, skipped="budget"))
                        write_json(args.json, record)
                        continue
                try:
                    row = run_config(torch, args, model, x, mode, cfg_style, c, psa_model,
                                     timer, calls)
                except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                    failures += 1
                    msg = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0]
                                      if str(e).strip() else "")
                    log("FAILED %s/%s/%s: %s" % (mode, cfg_style, c, msg))
                    record["results"].append(dict(base, error=msg))
                    write_json(args.json, record)
                    if args.device == "cuda":
                        torch.cuda.empty_cache()
                    continue
                if c == "dense":
                    dense_ms = row["step_ms"]
                if dense_ms is not None:
                    row["speedup_vs_dense"] = dense_ms / row["step_ms"]
                out = outside[cfg_style]
                row["est_full_depth_ms"] = out + (row["step_ms"] - out) * full_layers / layers
                last_ms = row["step_ms"]
                measured.setdefault(c, row["step_ms"])
                if mode == "compile":
                    compile_s = max(0.0, row["first_step_s"] - row["step_ms"] / 1e3)
                record["results"].append(row)
                write_json(args.json, record)
                p = row.get("profile") or {}
                log("%s/%s/%s: %.1f ms%s, density %.3f, attention share %s" % (
                    mode, cfg_style, c, row["step_ms"],
                    " (%.2fx vs dense)" % row["speedup_vs_dense"]
                    if "speedup_vs_dense" in row else "", row["density"],
                    "%.1f%%" % (100 * p["attention_share"]) if p.get("attention_share")
                    is not None else "-"))
                if args.device == "cuda":
                    torch.cuda.empty_cache()
    import psa.diffusers as pd
    pd.disable_psa(model)
    if args.device == "cuda":
        record["environment"]["max_memory_allocated_gib"] = round(
            torch.cuda.max_memory_allocated() / 2**30, 2)
    record["environment"]["total_s"] = round(time.time() - T0, 1)
    write_json(args.json, record)
    print(markdown(record))
    log("done in %.0f s%s" % (time.time() - T0, ", %d configuration(s) failed" % failures
                              if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
