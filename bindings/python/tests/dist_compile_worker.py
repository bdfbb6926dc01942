# bindings/python/tests/dist_compile_worker.py -- one rank of test_distributed_compile.py:
# joins a gloo process group (file:// rendezvous), runs a small attention module whose
# self-attention goes through psa.distributed.SequenceParallel (Ulysses, ring, USP) eagerly
# and under torch.compile(fullgraph=True), and a tiny diffusers Wan transformer with
# enable_sequence_parallel eagerly and compiled; records the compiled-vs-eager and
# parallel-vs-single-process differences and the graph breaks Dynamo counted; writes
# {case: result} as JSON to <outdir>/rank<r>.json.
# Usage: python dist_compile_worker.py RANK WORLD INIT_FILE OUTDIR
"""Worker process of the psa.distributed torch.compile tests (not a test module)."""

import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import psa
import psa.distributed as psd

GRID = (2, 8, 16)  # 256 tokens: 2 query blocks of 128 per ring shard at ring degree 2
HEADS, HEAD_DIM, WIDTH = 4, 32, 64

# name: (world, SequenceParallel arguments, backend)
CASES = {
    "ulysses2_aot_eager": (2, dict(ulysses_degree=2), "aot_eager"),
    "ulysses2_inductor": (2, dict(ulysses_degree=2), "inductor"),
    "ring2_aot_eager": (2, dict(ring_degree=2), "aot_eager"),
    "ring2_p2p_dense_aot_eager": (2, dict(ring_degree=2, ring_impl="p2p",
                                          preset="baseline"), "aot_eager"),
    "wan_ulysses2_transformer_aot_eager": (2, dict(ulysses_degree=2), "aot_eager"),
    "usp2x2_aot_eager": (4, dict(ulysses_degree=2, ring_degree=2), "aot_eager"),
}


class Attention(torch.nn.Module):
    """Projections, SequenceParallel self-attention of this rank's tokens, output."""

    def __init__(self, sp):
        super().__init__()
        self.sp = sp
        self.qkv = torch.nn.Linear(WIDTH, 3 * HEADS * HEAD_DIM)
        self.out = torch.nn.Linear(HEADS * HEAD_DIM, WIDTH)

    def forward(self, x):
        B, n, _ = x.shape
        q, k, v = self.qkv(x).view(B, n, 3, HEADS, HEAD_DIM).unbind(2)
        o = self.sp.attention(q, k, v)  # "blhd"
        return self.sp.gather(self.out(o.reshape(B, n, HEADS * HEAD_DIM)), dim=1)


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def graph_breaks():
    from torch._dynamo.utils import counters

    return int(sum(counters["graph_break"].values()))


def run_module(parallel, backend):
    preset = parallel.pop("preset", "psa_topk")
    torch.manual_seed(5)
    x = torch.randn(1, GRID[0] * GRID[1] * GRID[2], WIDTH)
    sp = psd.SequenceParallel(grid=GRID, model="Wan2.1_1.3b", preset=preset, timeout=30,
                              **parallel)
    module = Attention(sp).eval()
    with torch.no_grad():
        # the single-process forward of the same module
        q, k, v = module.qkv(x).view(1, -1, 3, HEADS, HEAD_DIM).unbind(2)
        o = psa.attention(q.contiguous(), k.contiguous(), v.contiguous(), grid=GRID,
                          model="Wan2.1_1.3b", preset=preset, layout="blhd")
        ref = module.out(torch.as_tensor(o).reshape(1, -1, HEADS * HEAD_DIM))
        local = sp.shard(x, dim=1)
        eager = module(local)
        torch._dynamo.reset()
        before = graph_breaks()
        compiled = torch.compile(module, backend=backend, fullgraph=True)
        outs = [compiled(local) for _ in range(2)]
        breaks = graph_breaks() - before
        # the traced graph: the parallel attention and the gather are one node each
        targets = []

        def record(gm, example_inputs):
            targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
            return gm.forward

        torch._dynamo.reset()
        torch.compile(module, backend=record, fullgraph=True)(local)
    return {"compiled_vs_eager": max(rel_l2(c, eager) for c in outs),
            "eager_vs_one_process": rel_l2(eager, ref),
            "compiled_vs_one_process": max(rel_l2(c, ref) for c in outs),
            "graph_breaks": breaks, "graph_ops": sorted(set(t for t in targets
                                                             if "psa" in t))}


def run_transformer(parallel, backend):
    import psa.diffusers as psa_diffusers
    from diffusers import WanTransformer3DModel

    torch.manual_seed(1234)
    model = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=4,
                                  attention_head_dim=32, in_channels=4, out_channels=4,
                                  text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2,
                                  rope_max_seq_len=64).eval()
    g = torch.Generator().manual_seed(99)
    kw = dict(hidden_states=torch.randn(1, 4, 4, 32, 32, generator=g),
              timestep=torch.full((1,), 700.0),
              encoder_hidden_states=torch.randn(1, 8, 32, generator=g), return_dict=False)
    args = dict(model="Wan2.1_1.3b", preset="psa_topk", warmup_steps=0, step_source="manual")
    with torch.no_grad():
        psa_diffusers.enable_psa(model, **args)
        ref = model(**kw)[0]
        psa_diffusers.disable_psa(model)
        psd.enable_sequence_parallel(model, timeout=30, **args, **parallel)
        eager = model(**kw)[0]  # builds the grid's SequenceParallel (collective) eagerly
        torch._dynamo.reset()
        before = graph_breaks()
        compiled = torch.compile(model, backend=backend, fullgraph=True)
        outs = [compiled(**kw)[0] for _ in range(2)]
        breaks = graph_breaks() - before
        psa_diffusers.disable_psa(model)
    return {"compiled_vs_eager": max(rel_l2(c, eager) for c in outs),
            "eager_vs_one_process": rel_l2(eager, ref),
            "compiled_vs_one_process": max(rel_l2(c, ref) for c in outs),
            "graph_breaks": breaks}


def main():
    rank, world, init_file, outdir = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                      sys.argv[4])
    only = set(sys.argv[5].split(",")) if len(sys.argv) > 5 else None
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    results = {}
    for name, (w, parallel, backend) in CASES.items():
        if w != world or (only is not None and name not in only):
            continue
        t0 = time.time()
        try:
            if "transformer" in name:
                result = run_transformer(dict(parallel), backend)
            else:
                result = run_module(dict(parallel), backend)
        except Exception as e:  # recorded; the test reports it
            result = {"error": "%s: %s" % (type(e).__name__, e),
                      "traceback": traceback.format_exc()}
        result["seconds"] = time.time() - t0
        results[name] = result
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
