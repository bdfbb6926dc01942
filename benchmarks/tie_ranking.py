#!/usr/bin/env python3
"""Error vs dense attention of the two rank rules for tied key blocks, at equal density.

A row's top key blocks score exactly 1 (each holds some sampled row's best key), so they tie.
libpsa ranks such ties by tie mass (src/importance/importance_spec.h); the reference's rule,
key index, is still selectable with PSA_EXPERIMENTAL_TIE_RULE=index. Both rules give every
level the same count (the cumulative mass is equal within a tie), so the densities match and
the error difference is the ranking's alone.

Runs `psa run --json` (video-like synthetic inputs, dense comparison built in) once per rule,
grid, block_n, mask mode and seed, and prints a Markdown table. Shapes:
  img32 (1x32x32), img64 (1x64x64), clip32 (4x32x32), clip64 (4x64x64): d128, 2 heads;
  cogvideox (13x30x45 + 226 text, d64, 48 heads), wan13 (21x30x52, d128, 12 heads),
  wan14 (21x45x80, d128, 40 heads); --heads overrides the head count (CPU: use few).

CPU (small grids, ~10 minutes on 2 cores):
  python3 benchmarks/tie_ranking.py --psa build-cpu/cli/psa --backend cpu \
      --shapes img32,img64,clip32 --seeds 3
GPU (standard shapes with 8 heads each; estimated 3-4 minutes on an H100, most of it the CLI
generating inputs and the dense reference in each process):
  python3 benchmarks/tie_ranking.py --psa build/cli/psa --backend cuda \
      --shapes cogvideox,wan13,wan14 --heads 8 --seeds 3
--inputs heads uses the Python tests' independent q/k fields instead (less local attention).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SHAPES = {
    "img32": ((1, 32, 32), 0, 128, 2),
    "img64": ((1, 64, 64), 0, 128, 2),
    "clip32": ((4, 32, 32), 0, 128, 2),
    "clip64": ((4, 64, 64), 0, 128, 2),
    "cogvideox": ((13, 30, 45), 226, 64, 48),
    "wan13": ((21, 30, 52), 0, 128, 12),
    "wan14": ((21, 45, 80), 0, 128, 40),
}
RATIOS = {"topk": (0.1, 0.15, 0.15, 0.35, 1.0), "thresholdbound": (0.4, 0.5, 0.6, 0.8, 1.0)}


def preset_yaml(block_ns, modes):
    lines = ["Bench:", f"  default_attention: {modes[0]}_{block_ns[0]}",
             "  video_scale: {width_divisor: 8, height_divisor: 8, depth_divisor: 4}", "  text_length: 0",
             "  attention_configs:"]
    for bn in block_ns:
        for mode in modes:
            r = RATIOS[mode]
            lines += [f"    {mode}_{bn}:", "      type: psa", "      use_rearrange: true", "      use_sim_mask: false",
                      f"      block_size: {{m: 128, n: {bn}, tile_n: 32}}", "      mask_ratios:",
                      f"        1: [0.0, {r[0]}]", f"        2: [{r[0]}, {r[1]}]", f"        4: [{r[1]}, {r[2]}]",
                      f"        8: [{r[2]}, {r[3]}]", f"        0: [{r[3]}, {r[4]}]", f"      mask_mode: {mode}",
                      "      attn_impl: new_mask_type", "      warmup_steps: 0", "      rearrange_method: Gilbert"]
    return "\n".join(lines) + "\n"


def heads_inputs(args, shape, seed, folder):
    """q, k: independent smooth random fields over the grid plus noise (the Python tests'
    conftest.video_heads), text rows first; v: Gaussian. Written as .npy (bf16 bits on cuda)."""
    import numpy as np

    grid, text, d, heads = SHAPES[shape]
    heads = args.heads or heads
    rng = np.random.default_rng(1000 + seed)
    t, hh, w = grid
    zz, yy, xx = np.meshgrid(np.arange(t), np.arange(hh), np.arange(w), indexing="ij")
    pos = np.stack([zz.ravel() / 2.0, yy.ravel() / 3.0, xx.ravel() / 3.0], 1)

    def field():
        f = rng.standard_normal((1, heads, 3, d))
        phase = rng.uniform(0, 6.3, (1, heads, 1, d))
        x = 3.0 * np.cos(np.einsum("nc,bhcd->bhnd", pos, f) + phase)
        x += 0.3 * rng.standard_normal(x.shape)
        return np.concatenate([rng.standard_normal((1, heads, text, d)), x], 2).astype(np.float32)

    files = []
    for name, x in (("q", field()), ("k", field()), ("v", rng.standard_normal((1, heads, pos.shape[0] + text, d)))):
        x = np.ascontiguousarray(x, np.float32)
        if args.backend == "cuda":  # bf16 bits, rounded to nearest even
            u = x.view(np.uint32)
            x = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        path = os.path.join(folder, f"{shape}_{seed}_{name}.npy")
        np.save(path, x)
        files.append(path)
    return files


def run(args, cfg, shape, bn, mode, seed, rule, files=None):
    grid, text, d, heads = SHAPES[shape]
    cmd = [args.psa, "run", "--config", cfg, "--model", "Bench", "--preset", f"{mode}_{bn}",
           "--grid", ",".join(map(str, grid)), "--backend", args.backend, "--json", "--quiet"]
    if files:
        cmd += ["--q", files[0], "--k", files[1], "--v", files[2]]
        if args.backend == "cuda":
            cmd += ["--dtype", "bf16"]
    else:
        cmd += ["--heads", str(args.heads or heads), "--head-dim", str(d), "--seed", str(seed)]
    if text:
        cmd += ["--text-length", str(text)]
    env = dict(os.environ)
    env.pop("PSA_EXPERIMENTAL_TIE_RULE", None)
    if rule == "index":
        env["PSA_EXPERIMENTAL_TIE_RULE"] = "index"
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rep = json.loads(out)
    return rep["rel_l2"], rep["density"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--psa", required=True, help="the psa CLI binary")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--shapes", default="img32,img64,clip32")
    ap.add_argument("--block-n", default="32,64,128")
    ap.add_argument("--modes", default="topk,thresholdbound")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--heads", type=int, default=0, help="override the shapes' head counts")
    ap.add_argument("--inputs", default="synthetic", choices=["synthetic", "heads"],
                    help="synthetic: the CLI's video-like inputs (q and k read one smooth field); "
                         "heads: independent smooth q and k fields (conftest.video_heads; needs NumPy)")
    args = ap.parse_args()
    block_ns = [int(b) for b in args.block_n.split(",")]
    modes = args.modes.split(",")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(preset_yaml(block_ns, modes))
        cfg = f.name
    print("| shape | tokens | block_n | mode | key blocks | density | err, key index (old) | err, tie mass (new) "
          "| new / old | seeds better / worse |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    folder = tempfile.mkdtemp()
    try:
        for shape in args.shapes.split(","):
            grid, text, _, _ = SHAPES[shape]
            tokens = grid[0] * grid[1] * grid[2] + text
            for bn in block_ns:
                for mode in modes:
                    old, new = [], []
                    for seed in range(args.seeds):
                        files = None
                        if args.inputs == "heads":
                            files = heads_inputs(args, shape, seed, folder)
                        eo, do = run(args, cfg, shape, bn, mode, seed, "index", files)
                        en, dn = run(args, cfg, shape, bn, mode, seed, "mass", files)
                        if abs(do - dn) > 1e-9:
                            print(f"warning: densities differ ({do} vs {dn})", file=sys.stderr)
                        old.append(eo)
                        new.append(en)
                    mo, mn = statistics.mean(old), statistics.mean(new)
                    better = sum(n < o for o, n in zip(old, new))
                    worse = sum(n > o for o, n in zip(old, new))
                    print(f"| {shape} | {tokens} | {bn} | {mode} | {-(-tokens // bn)} | {do:.3f} | {mo:.4f} | {mn:.4f} "
                          f"| {mn / mo:.3f} | {better} / {worse} |", flush=True)
    finally:
        os.unlink(cfg)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
