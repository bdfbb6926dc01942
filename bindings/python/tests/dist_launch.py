# bindings/python/tests/dist_launch.py -- starts a torch.distributed worker script on `world`
# ranks (one subprocess per rank, gloo, file:// rendezvous in a fresh directory) and collects
# what each rank wrote: the worker takes argv rank, world, rendezvous file, output directory
# and writes rank<r>.json = {case: result}. Used by the test_distributed*.py
# and test_xdit.py files; gloo_available() is their skip condition.
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def gloo_available(*modules):
    """True when torch.distributed with gloo and every module of `modules` import (the
    multi-process tests skip otherwise)."""
    try:
        import importlib

        import torch.distributed as dist

        for name in modules:
            importlib.import_module(name)
        return dist.is_available() and dist.is_gloo_available()
    except Exception:
        return False


def run_ranks(script, world, prefix, timeout=240, args=()):
    """{case: [result of rank 0, rank 1, ...], "_seconds": wall time of the run}; `args`:
    further command-line arguments of the worker."""
    outdir = tempfile.mkdtemp(prefix=prefix)
    try:
        return _run_in(outdir, script, world, timeout, args)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def _run_in(outdir, script, world, timeout, args):
    init_file = os.path.join(outdir, "rendezvous")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, script), str(r), str(world),
                               init_file, outdir] + list(args), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(world)]
    logs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            logs.append(out.decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    elapsed = time.time() - t0
    results = {}
    for r in range(world):
        path = os.path.join(outdir, "rank%d.json" % r)
        assert os.path.exists(path), "rank %d wrote no results:\n%s" % (r, "\n".join(logs))
        with open(path) as f:
            for name, res in json.load(f).items():
                results.setdefault(name, []).append(res)
    results["_seconds"] = elapsed
    return results
