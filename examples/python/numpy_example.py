# examples/python/numpy_example.py -- PSA from Python on NumPy arrays (CPU backend): the
# one-call psa.attention on a small video-like input next to a dense call, the vendor-style
# psa.sparse_attention, then the context API for the statistics of one forward.
# Run from the repository root (examples/README.md):
#   python3 -m venv .venv && .venv/bin/pip install .
#   .venv/bin/python examples/python/numpy_example.py
import sys
import time

import psa
from video_input import rel_l2, video_qkv

GRID = (4, 16, 16)  # latent frames x rows x columns: 1024 tokens


def main() -> int:
    print("psa %s (library %s); presets of Wan2.1_1.3b: %s"
          % (psa.__version__, psa.library_version(), ", ".join(psa.presets()["Wan2.1_1.3b"])))
    q, k, v = video_qkv(2, *GRID, 64)  # [B, H, L, D] float32

    # One call: Wan2.1-1.3B's psa_balanced preset, tokens rearranged over the grid.
    start = time.perf_counter()
    out = psa.attention(q, k, v, model="Wan2.1_1.3b", preset="psa_balanced", grid=GRID)
    sparse_ms = (time.perf_counter() - start) * 1e3
    dense = psa.attention(q, k, v, config={"type": "dense"})
    error = rel_l2(out, dense)
    print("psa.attention  Wan2.1_1.3b/psa_balanced on %s (grid %dx%dx%d): rel-L2 vs dense "
          "%.3e, %.1f ms" % ((q.shape,) + GRID + (error, sparse_ms)))

    # The vendor call (MindIE-SD names): RainFusion2.0 keeping half of the key blocks.
    rf = psa.sparse_attention(q, k, v, head_num=q.shape[1], input_layout="BNSD",
                              sparse_type="rf_v2", sparsity=0.5, latent_shape_q=GRID)
    print("psa.sparse_attention  rf_v2 at sparsity 0.5: rel-L2 vs dense %.3e"
          % rel_l2(rf, dense))

    # The context API: the same forward, with its statistics.
    config = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    with psa.Context(config, backend="cpu") as ctx:
        ctx.set_video_grid(*GRID)
        ctx.set_step(int(config["warmup_steps"]))  # the first step after warm-up: sparse
        same = ctx.forward(q, k, v)
        stats = ctx.stats()
    print("context API  density %.4f (levels %s), same output: %s" % (stats.density, " ".join(
        "%s:%.3f" % ("skip" if level == 0 else level, f)
        for level, f in stats.level_fraction.items()), bool((same == out).all())))
    try:
        psa.Config.load("Wan2.1_1.3b", "no_such_preset")
    except psa.Error as err:
        print("expected error: %s" % err)
    ok = 0 < stats.density < 1 and error < 0.5 and bool((same == out).all())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
