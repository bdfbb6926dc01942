# bindings/python/tests/dist_worker.py -- one rank of test_distributed.py: joins a gloo
# process group (file:// rendezvous), runs every case of its world size through
# psa.distributed and compares the gathered output with the single-process psa.attention
# computed on the same rank; writes {case: result} as JSON to <outdir>/rank<r>.json.
# Usage: python dist_worker.py RANK WORLD INIT_FILE OUTDIR
"""Worker process of the psa.distributed tests (not a test module)."""

import json
import os
import sys
import time
import traceback
import zlib

import numpy as np
import torch
import torch.distributed as dist

import psa
import psa.distributed as psd
from conftest import video_heads

# name: (world, kwargs of SequenceParallel, tensor spec, expected error substring or None)
# spec: (B, H, Hkv, D, grid, text_length)
WAN = dict(model="Wan2.1_1.3b")
COG = dict(model="CogVideo_5b")
NO_GILBERT = dict(model="Wan2.1_1.3b", config={"use_rearrange": False})
CASES = {
    # two ranks
    "ulysses2_wan_gilbert": (2, dict(WAN, ulysses_degree=2), (1, 4, 4, 64, (4, 8, 32), 0)),
    "ring2_wan_gilbert": (2, dict(WAN, ring_degree=2, ring_impl="p2p"),
                          (1, 4, 4, 64, (4, 8, 32), 0)),
    "ring2_wan_no_gilbert": (2, dict(NO_GILBERT, ring_degree=2, ring_impl="p2p"),
                             (1, 2, 2, 64, (4, 8, 32), 0)),
    "ring2_wan_uneven": (2, dict(WAN, ring_degree=2, ring_impl="p2p"),
                         (1, 2, 2, 64, (3, 10, 30), 0)),
    "ulysses2_cogvideo_text": (2, dict(COG, ulysses_degree=2),
                               (1, 2, 2, 64, (4, 8, 24), 40)),
    "ring2_cogvideo_text": (2, dict(COG, ring_degree=2, ring_impl="p2p"),
                            (1, 2, 2, 64, (4, 8, 24), 40)),
    "ulysses2_gqa": (2, dict(WAN, ulysses_degree=2), (1, 4, 2, 64, (4, 8, 32), 0)),
    # batch 2 (the exchanged pieces are strided views), 651 tokens: pieces of 326 and 325
    "ulysses2_batch2_uneven_gqa": (2, dict(WAN, ulysses_degree=2),
                                   (2, 4, 2, 64, (3, 7, 31), 0)),
    # heads exchanged and computed in chunks (2 query + 1 K/V head per chunk and rank)
    "ulysses2_chunks2_gqa": (2, dict(WAN, ulysses_degree=2, ulysses_chunks=2),
                             (1, 8, 4, 64, (4, 8, 32), 0)),
    "ulysses2_chunks2_batch2_text": (2, dict(COG, ulysses_degree=2, ulysses_chunks=2),
                                     (2, 4, 4, 64, (3, 7, 24), 40)),
    "ring2_gqa": (2, dict(WAN, ring_degree=2, ring_impl="p2p"), (1, 4, 2, 64, (4, 8, 32), 0)),
    "ulysses2_natural_order": (2, dict(WAN, ulysses_degree=2, permute=False),
                               (1, 4, 4, 64, (4, 8, 32), 0)),
    "ring2_cogvideo_text_auto": (2, dict(COG, ring_degree=2), (1, 2, 2, 64, (4, 8, 24), 40)),
    "ring2_wan_allgather": (2, dict(WAN, ring_degree=2, ring_impl="allgather"),
                            (1, 4, 4, 64, (4, 8, 32), 0)),
    "ring2_wan_p2p_gqa": (2, dict(WAN, ring_degree=2, ring_impl="p2p"),
                          (1, 4, 2, 64, (3, 10, 30), 0)),
    "ring2_dense_p2p": (2, dict(model="Wan2.1_1.3b", config={"type": "dense"}, ring_degree=2,
                                ring_impl="p2p"), (1, 2, 2, 64, (3, 10, 30), 0)),
    "cfg2_batch_offset": (2, None, (2, 4, 4, 64, (4, 8, 32), 0)),
    "ulysses2_own_device_index": (2, dict(WAN, ulysses_degree=2), (1, 4, 4, 64, (4, 8, 32), 0)),
    "bad_heads": (2, dict(WAN, ulysses_degree=2), (1, 3, 3, 64, (4, 8, 32), 0)),
    "bad_ring_blocks": (2, dict(WAN, ring_degree=2), (1, 2, 2, 64, (1, 4, 16), 0)),
    "bad_disagree": (2, dict(WAN, ulysses_degree=2), (1, 4, 4, 64, (4, 8, 32), 0)),
    "bad_chunks": (2, dict(WAN, ulysses_degree=2, ulysses_chunks=0), (1, 4, 4, 64, (4, 8, 32), 0)),
    # four ranks
    "usp2x2_wan_gilbert": (4, dict(WAN, ulysses_degree=2, ring_degree=2, ring_impl="p2p"),
                           (1, 4, 4, 64, (4, 8, 32), 0)),
    "usp2x2_wan_allgather": (4, dict(WAN, ulysses_degree=2, ring_degree=2,
                                     ring_impl="allgather"), (1, 4, 4, 64, (4, 8, 32), 0)),
    "ring4_no_gilbert_p2p": (4, dict(NO_GILBERT, ring_degree=4, ring_impl="p2p"),
                             (1, 2, 2, 64, (4, 8, 32), 0)),
    "ring4_cogvideo_text_gqa": (4, dict(COG, ring_degree=4, ring_impl="p2p"),
                                (1, 4, 2, 64, (4, 8, 24), 40)),
    "ring4_wan_gilbert": (4, dict(WAN, ring_degree=4, ring_impl="p2p"),
                          (1, 2, 2, 64, (4, 8, 32), 0)),
    "ulysses4_cogvideo_gqa": (4, dict(COG, ulysses_degree=4), (1, 8, 4, 64, (4, 8, 24), 40)),
    "usp2x2_cogvideo_text_gqa": (4, dict(COG, ulysses_degree=2, ring_degree=2, ring_impl="p2p"),
                                 (1, 4, 2, 64, (4, 8, 24), 40)),
}
EXPECTED_ERRORS = {
    "bad_heads": "not divisible by ulysses_degree",
    "bad_ring_blocks": "ring_degree = 2",
    "bad_disagree": "disagree",
    "bad_chunks": "ulysses_chunks = 0: expected an int >= 1",
}


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def run_case(name, rank, world):
    _, kwargs, (B, H, Hkv, D, grid, text) = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    q, k, v = (torch.from_numpy(video_heads(rng, B, h, grid, text, D)).transpose(1, 2)
               for h in (H, Hkv, Hkv))
    if name == "cfg2_batch_offset":  # CFG parallelism: rank r holds batch item r
        ref = psa.attention(q, k, v, model="Wan2.1_1.3b", grid=grid, layout="blhd")
        mine = psa.attention(q[rank:rank + 1], k[rank:rank + 1], v[rank:rank + 1],
                             model="Wan2.1_1.3b", grid=grid, layout="blhd",
                             batch_offset=rank)
        return {"rel_l2": rel_l2(mine, ref[rank:rank + 1]),
                "exact": bool(torch.equal(mine, ref[rank:rank + 1]))}
    if name == "ulysses2_own_device_index":
        # Each rank of an NCCL group computes on its own GPU (cuda:0, cuda:1): the agreement
        # check must compare what the ranks share (shapes, dtype, device type), not the index
        # of the rank's device. (Emulated with per-rank CPU device indices under gloo.)
        sp = psd.SequenceParallel(grid=grid, timeout=20, **kwargs)
        key = (B, H, D, Hkv, str(q.dtype), "cpu", None, 0, torch.device("cpu", rank))
        sp._check(key, None)  # raises SequenceParallelError when the ranks disagree
        return {"rel_l2": 0.0, "exact": True}
    model_kwargs = {key: kwargs[key] for key in ("model", "preset", "config") if key in kwargs}
    text_kwargs = dict(text_length=text) if text else {}
    ref = psa.attention(q, k, v, grid=grid, layout="blhd", **text_kwargs, **model_kwargs)
    if name == "bad_disagree" and rank == 1:  # rank 1 believes in another grid
        grid = (8, 4, 32)
    sp = psd.SequenceParallel(grid=grid, timeout=20, **text_kwargs, **kwargs)
    ql, kl, vl = (sp.shard(x, dim=1) for x in (q, k, v))
    out_local = sp.attention(ql, kl, vl)
    # This rank's rows of the reference, in the shard order.
    ref_local = sp.shard(ref, dim=1)
    out = sp.gather(out_local, dim=1)
    result = {"rel_l2": rel_l2(out, ref), "rel_l2_local": rel_l2(out_local, ref_local)
              if out_local.numel() else 0.0, "exact": bool(torch.equal(out, ref)),
              "ring_impl": sp.ring_impl}
    if sp.last_levels is not None:  # the PSA p2p ring: this rank's rows of the level map
        result.update(compare_levels(sp, q, k, v, grid, text))
    return result


def compare_levels(sp, q, k, v, grid, text):
    """This rank's level map against the single-process map of the same heads and query
    blocks, and the level fractions summed over the ranks against the single process's."""
    with psa.Context(sp.config, backend="cpu") as ctx:
        position = ("first" if sp.text_first else "last") if text else "none"
        ctx.set_video_grid(grid[0], grid[1], grid[2], text, position)
        ctx.set_step(int(sp.config["warmup_steps"]))
        ctx.forward(q, k, v, layout="blhd")
        whole = ctx.level_map()
    U = sp.ulysses_degree
    heads = q.shape[2] // U
    h0 = sp.ulysses_index * heads
    qb0 = sp.bounds()[sp.ring_index * U][0] // sp.block_m
    mine = sp.last_levels.numpy()
    ref = whole[:, h0:h0 + heads, qb0:qb0 + mine.shape[2]]
    counts = torch.tensor([int((mine == lv).sum()) for lv in (1, 2, 4, 8, 0)],
                          dtype=torch.int64)
    # Each ulysses index holds other heads, each ring index other query blocks: the sum
    # over all ranks covers the whole map once.
    dist.all_reduce(counts)
    ref_counts = [int((whole == lv).sum()) for lv in (1, 2, 4, 8, 0)]
    return {"levels_equal": bool(ref.shape == mine.shape and (ref == mine).all()),
            "fractions_equal": counts.tolist() == ref_counts}


def main():
    rank, world, init_file, outdir = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                      sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    results = {}
    for name, (w, _, _) in CASES.items():
        if w != world:
            continue
        t0 = time.time()
        try:
            result = run_case(name, rank, world)
        except Exception as e:  # recorded; the test decides whether it was expected
            result = {"error": "%s: %s" % (type(e).__name__, e)}
            if name not in EXPECTED_ERRORS:
                result["traceback"] = traceback.format_exc()
        result["seconds"] = time.time() - t0
        results[name] = result
        dist.barrier()
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
