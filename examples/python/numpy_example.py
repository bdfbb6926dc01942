# examples/python/numpy_example.py -- PSA from Python on NumPy arrays (CPU backend): load a
# preset, run a sparse forward on a small video-like input, compare with a dense forward
# (a second context with the method set to dense). Run from the repository:
#   PYTHONPATH=build/bindings/python python3 examples/python/numpy_example.py
# (or after `pip install ./bindings/python`, without PYTHONPATH).
import sys
import time

import psa
from video_input import rel_l2, video_qkv

GRID = (4, 16, 16)


def run(config, q, k, v):
    with psa.Context(config, backend="cpu") as ctx:
        ctx.set_video_grid(*GRID)
        ctx.set_step(config["warmup_steps"])  # the first step after warm-up: sparse
        start = time.perf_counter()
        out = ctx.forward(q, k, v)
        return out, ctx.stats(), (time.perf_counter() - start) * 1e3


def main():
    print("psa %s (library %s); presets of Wan2.1_1.3b: %s"
          % (psa.__version__, psa.library_version(), ", ".join(psa.presets()["Wan2.1_1.3b"])))
    q, k, v = video_qkv(2, *GRID, 64)
    config = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    sparse, stats, sparse_ms = run(config, q, k, v)
    dense_config = config.copy()
    dense_config["type"] = psa.Method.DENSE
    dense, dense_stats, dense_ms = run(dense_config, q, k, v)
    error = rel_l2(sparse, dense)
    print("Wan2.1_1.3b/psa_balanced on %s (grid %dx%dx%d), CPU backend" % ((q.shape,) + GRID))
    print("density %.4f (levels %s)" % (stats.density, " ".join(
        "%s:%.3f" % ("skip" if level == 0 else level, f) for level, f in stats.level_fraction.items())))
    print("rel-L2 vs dense %.4e; time sparse %.1f ms, dense %.1f ms" % (error, sparse_ms, dense_ms))
    try:
        psa.Config.load("Wan2.1_1.3b", "no_such_preset")
    except psa.Error as err:
        print("expected error: %s" % err)
    return 0 if 0 < stats.density < 1 and dense_stats.ran_dense and error < 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
