# bindings/python/tests/test_sp_benchmarks.py -- the two-GPU benchmark scripts of BENCHMARKS.md
# ("Sequence parallelism on two GPUs") run on CPUs: torchrun, 2 processes, gloo, small sizes.
# Each script checks its own results (rows against one process, level counts summed over the
# ranks) and exits 1 when a check fails.
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BENCH = os.path.join(ROOT, "benchmarks")


def _have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


needs_torch = pytest.mark.skipif(not _have("torch") or not os.path.isdir(BENCH),
                                 reason="needs torch and the source tree's benchmarks/")


def _torchrun(script, args, tmp_path):
    out = tmp_path / "result.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", os.path.join(BENCH, script), "--device", "cpu", "--json", str(out)] + args
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(out.read_text()), run.stdout


@needs_torch
def test_sp_bench_on_two_cpu_ranks(tmp_path):
    record, table = _torchrun("sp_bench.py", ["--shapes", "tiny-text", "--iters", "1",
                                              "--warmup", "1", "--chunks", "1,2"], tmp_path)
    rows = record["rows"]
    modes = {(r["method"], r["mode"]) for r in rows}
    assert ("psa", "ulysses 2, 2 chunks") in modes and ("psa", "ring 2, p2p") in modes
    assert ("psa", "ring 2, allgather") in modes
    assert ("dense", "ulysses 2") in modes and ("dense", "ring 2") in modes
    for r in rows:
        if r["mode"] != "1 GPU":
            assert r["rel_l2_vs_one_gpu"] <= 1e-5, r
        if r["method"] == "psa":
            assert r["levels_equal"], r
            assert 0.0 < r["density"] < 1.0, r  # a sparse map, not all level 1
    assert "checks: PASS" in table


@needs_torch
@pytest.mark.skipif(not _have("diffusers"), reason="needs diffusers")
def test_sp_step_bench_on_two_cpu_ranks(tmp_path):
    record, _ = _torchrun("sp_step_bench.py", ["--tiny", "--modes", "ulysses,ring",
                                               "--steps", "1"], tmp_path)
    rows = {(r["config"], r["mode"]): r for r in record["rows"]}
    assert set(rows) >= {("dense", "1 GPU"), ("topk:0.15", "1 GPU"),
                         ("topk:0.15", "ulysses 2"), ("topk:0.15", "ring 2")}
    for key in (("topk:0.15", "ulysses 2"), ("topk:0.15", "ring 2")):
        assert rows[key]["rel_l2_vs_one_gpu"] <= 1e-5, rows[key]
