# bindings/python/tests/dist_robust_worker.py -- one rank of test_distributed_robust.py:
# joins a gloo process group (file:// rendezvous, a 30 s collective timeout so that nothing
# waits long), runs each case, in which one rank (or every rank) passes bad input to
# psa.distributed.SequenceParallel, and records per case what the rank raised and how long
# it took (or, for the good cases, the difference to the single-process psa.attention);
# writes {case: result} as JSON to <outdir>/rank<r>.json.
# Usage: python dist_robust_worker.py RANK WORLD INIT_FILE OUTDIR
"""Worker process of the psa.distributed robustness tests (not a test module)."""

import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import psa
import psa.distributed as psd

GRID = (2, 8, 16)  # 256 tokens: 128 per rank
WAN = dict(model="Wan2.1_1.3b")


def qkv(seed=0, length=256, heads=2):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, length, heads, 32, generator=g) for _ in range(3))


def sp_ulysses(**kwargs):
    return psd.SequenceParallel(grid=GRID, ulysses_degree=2, timeout=10, **WAN, **kwargs)


def local(sp, *xs):
    return [sp.shard(x, dim=1) for x in xs]


# Each case returns a dict (a good case: its numbers) or raises (recorded as the error).
def case_v_dtype_one_rank(rank):
    sp = sp_ulysses()
    q, k, v = local(sp, *qkv())
    sp.attention(q, k, v.half() if rank == 1 else v)  # gloo aborted the process (SIGABRT)


def case_v_meta_one_rank(rank):
    sp = sp_ulysses()
    q, k, v = local(sp, *qkv())
    sp.attention(q, k, v.to("meta") if rank == 1 else v)


def case_v_shape_after_good_call(rank):
    sp = sp_ulysses(agree="always")
    q, k, v = local(sp, *qkv())
    sp.attention(q, k, v)  # agree="always": the same shapes again do not skip the agreement
    sp.attention(q, k, v[..., :1, :] if rank == 1 else v)


def case_agree_first_checks_each_signature_once(rank):
    # The default: one agreement per input signature, none in the steady state.
    calls = []
    real = psd._gather_agreement

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    psd._gather_agreement = counted
    try:
        sp = sp_ulysses()
        q, k, v = local(sp, *qkv())
        outs = [sp.attention(q, k, v) for _ in range(3)]
        after_three = len(calls)
        sp.attention(q.half(), k.half(), v.half())  # a new signature on every rank
        sp.gather(outs[0], dim=1)
        sp.gather(outs[1], dim=1)
        return {"after_three": after_three, "total": len(calls),
                "same": all(torch.equal(o, outs[0]) for o in outs)}
    finally:
        psd._gather_agreement = real


def case_k_length_one_rank(rank):
    sp = psd.SequenceParallel(ulysses_degree=2, timeout=10, **WAN)  # no grid
    q, k, v = (x[:, :128] for x in qkv())
    sp.attention(q, k[:, :100] if rank == 1 else k, v[:, :100] if rank == 1 else v)


def case_gather_short_piece(rank):
    sp = sp_ulysses()
    (x,) = local(sp, qkv()[0])
    sp.gather(x[:, :100] if rank == 1 else x, dim=1)  # was zero-filled


def case_gather_other_dims_differ(rank):
    sp = sp_ulysses()
    (x,) = local(sp, qkv()[0])
    sp.gather(x[..., :16] if rank == 1 else x, dim=1)


def case_gather_bad_dim_one_rank(rank):
    sp = sp_ulysses()
    (x,) = local(sp, qkv()[0])
    sp.gather(x, dim=7 if rank == 1 else 1)


def case_compiled_gather_short_piece(rank):
    sp = sp_ulysses()
    (x,) = local(sp, qkv()[0])
    x = x[:, :100] if rank == 1 else x
    torch._dynamo.reset()
    torch.compile(lambda t: sp.gather(t * 2, dim=1), fullgraph=True, backend="eager")(x)


def case_q_3d(rank):
    sp = sp_ulysses()
    q, k, v = local(sp, *qkv())
    sp.attention(q[0], k[0], v[0])


def case_head_offset_str(rank):
    sp = sp_ulysses()
    q, k, v = local(sp, *qkv())
    sp.attention(q, k, v, head_offset="1" if rank == 1 else 0)


def case_step_negative(rank):
    sp = sp_ulysses()
    q, k, v = local(sp, *qkv())
    sp.attention(q, k, v, step=-1)


def case_arguments(rank):
    """Bad arguments of the constructor and of shard: raised on every rank alike, before
    any collective; each a ValueError or TypeError naming the argument and its value."""
    bad = [dict(grid=GRID, text_length="16"), dict(grid=(2, 8, 15), text_length=16.7),
           dict(grid=GRID, text_length=True), dict(grid=GRID, timeout=-1),
           dict(grid=GRID, timeout=float("nan")), dict(grid=GRID, timeout=float("inf")),
           dict(grid=GRID, timeout=True), dict(grid=GRID, timeout="10"),
           dict(grid=GRID, group="abc"), dict(grid=5), dict(grid=(2, 8, 16.5)),
           dict(grid=GRID, text_first="no"), dict(grid=GRID, permute="yes"),
           dict(grid=GRID, ring_impl=3)]
    found = {}
    for kwargs in bad:
        try:
            psd.SequenceParallel(ulysses_degree=2, **WAN, **kwargs)
            found[repr(kwargs)] = "no error"
        except Exception as e:
            found[repr(kwargs)] = "%s: %s" % ("/".join(c.__name__ for c in type(e).__mro__),
                                              e)
    sp = sp_ulysses()
    x = qkv()[0]
    for dim in (7, -5, 1.0, "1"):
        try:
            sp.shard(x, dim=dim)
            found["shard dim %r" % (dim,)] = "no error"
        except Exception as e:
            found["shard dim %r" % (dim,)] = "%s: %s" % (
                "/".join(c.__name__ for c in type(e).__mro__), e)
    assert torch.equal(sp.shard(x, dim=-3), sp.shard(x, dim=1))
    return {"found": found}


def case_no_grid_ulysses_and_ring(rank):
    """Without a grid the local lengths come from the agreement (uneven on purpose for
    Ulysses: 130 + 126); the result is the single-process one."""
    q, k, v = qkv(seed=3)
    ref = psa.attention(q, k, v, layout="blhd", **WAN)
    sp = psd.SequenceParallel(ulysses_degree=2, timeout=10, **WAN)
    a, b = [(0, 130), (130, 256)][rank]
    out = sp.gather(sp.attention(q[:, a:b], k[:, a:b], v[:, a:b]), dim=1)
    sp_ring = psd.SequenceParallel(ring_degree=2, timeout=10, **WAN)
    a, b = [(0, 128), (128, 256)][rank]
    out_ring = sp_ring.gather(sp_ring.attention(q[:, a:b], k[:, a:b], v[:, a:b]), dim=1)
    return {"rel_l2": float((out - ref).norm() / ref.norm()),
            "rel_l2_ring": float((out_ring - ref).norm() / ref.norm())}


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    rank, world, init_file, outdir = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                      sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=30))
    results = {}
    for name, fn in CASES.items():
        t0 = time.time()
        try:
            result = fn(rank) or {}
        except Exception as e:  # recorded; the test decides whether it was expected
            result = {"error": "%s: %s" % (type(e).__name__, e),
                      "classes": [c.__name__ for c in type(e).__mro__],
                      "traceback": traceback.format_exc()}
        result["seconds"] = time.time() - t0
        results[name] = result
        with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
            json.dump(results, f)  # what is done so far, should a later case kill us
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
