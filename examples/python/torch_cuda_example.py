# examples/python/torch_cuda_example.py -- psa.attention on PyTorch CUDA tensors (PyTorch's
# current stream, memory from its caching allocator) against
# torch.nn.functional.scaled_dot_product_attention: prints density, rel-L2 and times.
# Needs a libpsa built with its CUDA backend (pip install . on a machine with nvcc) and a GPU:
#   .venv/bin/python examples/python/torch_cuda_example.py
# Options: --model --preset --frames --height --width (pixels, through the preset's
# video_scale) --heads --head-dim --dtype bf16|f16 --iters --layout bhld|blhd.
# Exits 77 when PyTorch, a GPU or the CUDA backend is missing (ctest reports it skipped).
import argparse
import math
import sys

SKIP = 77


def video_qkv(torch, args, t, h, w, layout):
    """Video-like q, k, v on the GPU: per head and channel a unit-variance plane wave over the
    (t, h, w) grid, shared by q and k (plus noise), another wave for v. [B, H, L, D] values,
    stored as `layout`."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    dev, heads, dim = "cuda", args.heads, args.head_dim
    pos = torch.stack(torch.meshgrid(torch.arange(t, device=dev) / t, torch.arange(h, device=dev) / h,
                                     torch.arange(w, device=dev) / w, indexing="ij"), -1).reshape(-1, 3)

    def wave():  # [heads, L, dim]
        freq = (torch.rand(heads, 3, dim, generator=gen, device=dev) * 3 - 1.5) * 2 * math.pi
        phase = torch.rand(heads, 1, dim, generator=gen, device=dev) * 2 * math.pi
        return torch.cos(torch.einsum("lc,hcd->hld", pos, freq) + phase)

    qk, vv = wave() * math.sqrt(2.0), wave()
    noise = lambda: 0.1 * torch.randn(qk.shape, generator=gen, device=dev)  # noqa: E731
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    q, k, v = ((x + n).unsqueeze(0).to(dtype) for x, n in ((qk, noise()), (qk, noise()), (vv, 0)))
    if layout == "blhd":  # [B, L, H, D] storage; SDPA gets the [B, H, L, D] views below
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    return q, k, v


def time_ms(torch, fn, iters):
    fn()  # warm-up (plans the shape, allocates the workspace)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iters


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="Wan2.1_1.3b")
    parser.add_argument("--preset", default=None, help="default: the model's default_attention")
    parser.add_argument("--frames", type=int, default=81)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=832)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--layout", choices=["bhld", "blhd"], default="bhld")
    args = parser.parse_args()

    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return SKIP
    if not torch.cuda.is_available():
        print("SKIP: torch.cuda.is_available() is False")
        return SKIP
    import psa

    if not psa.cuda_available():
        print("SKIP: libpsa has no usable CUDA backend (built without nvcc, or no device)")
        return SKIP
    config = psa.Config.load(args.model, args.preset)
    depth, rows, cols = (config["video_scale.depth_divisor"], config["video_scale.height_divisor"],
                         config["video_scale.width_divisor"])
    t, h, w = -(-args.frames // depth), -(-args.height // rows), -(-args.width // cols)
    q, k, v = video_qkv(torch, args, t, h, w, args.layout)
    bhld = (lambda x: x.transpose(1, 2)) if args.layout == "blhd" else (lambda x: x)
    print("psa %s on %s; %s/%s, grid %dx%dx%d = %d tokens, %d heads x %d, %s, layout %s"
          % (psa.library_version(), torch.cuda.get_device_name(), args.model,
             args.preset or psa.Config.default_preset(args.model), t, h, w, t * h * w,
             args.heads, args.head_dim, args.dtype, args.layout))

    with torch.inference_mode():
        # One call on torch tensors: current stream, memory from torch's caching allocator;
        # the context and plan are cached, so the timed calls plan and allocate nothing new.
        def sparse():
            return psa.attention(q, k, v, model=args.model, preset=args.preset,
                                 grid=(t, h, w), layout=args.layout)

        def dense():
            return psa.attention(q, k, v, model=args.model, preset=args.preset,
                                 config={"type": "dense"}, layout=args.layout)

        def sdpa():
            return torch.nn.functional.scaled_dot_product_attention(bhld(q), bhld(k), bhld(v))

        psa_ms, dense_ms, sdpa_ms = (time_ms(torch, fn, args.iters) for fn in (sparse, dense, sdpa))
        out, dense_out, reference = sparse(), dense(), sdpa()
    # The same forward through the context API, for its statistics.
    with psa.Context(config, backend="cuda") as ctx:
        ctx.set_video_grid(t, h, w)
        ctx.set_step(int(config["warmup_steps"]))
        same = ctx.forward(q, k, v, layout=args.layout)
        stats = ctx.stats()
    err_sparse = rel_l2(bhld(out), reference)
    err_dense = rel_l2(bhld(dense_out), reference)
    print("density   %.4f (levels %s; %d x %d blocks per head)" % (stats.density, " ".join(
        "%s:%.3f" % ("skip" if lv == 0 else lv, f) for lv, f in stats.level_fraction.items()),
        stats.query_blocks, stats.key_blocks))
    print("rel-L2    PSA vs SDPA %.4e   PSA dense vs SDPA %.4e   one call == context: %s"
          % (err_sparse, err_dense, bool(torch.equal(same, out))))
    print("time      PSA %.3f ms   PSA dense %.3f ms   SDPA %.3f ms   (SDPA / PSA %.2fx)"
          % (psa_ms, dense_ms, sdpa_ms, sdpa_ms / psa_ms))
    ok = (math.isfinite(err_sparse) and err_dense < 2e-2 and err_sparse < 0.5
          and 0 < stats.density <= 1 and torch.equal(same, out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
