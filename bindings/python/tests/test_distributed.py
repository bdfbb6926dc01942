# bindings/python/tests/test_distributed.py -- psa.distributed on the CPU with gloo: 2 and 4
# processes (dist_worker.py, one subprocess per rank, file:// rendezvous) run Ulysses, ring,
# 2x2 USP, CFG (batch offset), PSA presets with and without Gilbert, CogVideoX text tokens and
# GQA in fp32; every rank's gathered output must equal the single-process psa.attention
# (<= 1e-5 relative L2), and bad input must fail on every rank without a hang. Skips per test
# without torch (torch.distributed with gloo).
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dist_launch import gloo_available, run_ranks  # noqa: E402


needs_torch = pytest.mark.skipif(not gloo_available(), reason="needs torch with gloo")
_RESULTS = {}


def _launch(world):
    """Runs dist_worker.py on `world` ranks once per test run; {case: [result per rank]}."""
    if world in _RESULTS:
        return _RESULTS[world]
    results = run_ranks("dist_worker.py", world, "psa_dist_")
    _RESULTS[world] = results
    return results


def _cases(world):
    import dist_worker

    return [n for n, (w, _, _) in dist_worker.CASES.items()
            if w == world and n not in dist_worker.EXPECTED_ERRORS]


def _errors(world):
    import dist_worker

    return [n for n, (w, _, _) in dist_worker.CASES.items()
            if w == world and n in dist_worker.EXPECTED_ERRORS]


def _check_equal(world, name):
    per_rank = _launch(world)[name]
    assert len(per_rank) == world
    for r, res in enumerate(per_rank):
        assert "error" not in res, "rank %d: %s\n%s" % (r, res["error"], res.get("traceback"))
        assert res["rel_l2"] <= 1e-5, "rank %d: rel L2 %g" % (r, res["rel_l2"])
        assert res.get("rel_l2_local", 0.0) <= 1e-5


def _check_error(world, name):
    import dist_worker

    per_rank = _launch(world)[name]
    assert len(per_rank) == world
    for r, res in enumerate(per_rank):
        assert "error" in res, "rank %d did not fail: %r" % (r, res)
        assert res["seconds"] < 30, "rank %d took %g s to fail" % (r, res["seconds"])
    # the rank whose input is wrong names the problem; the others say a rank rejected it
    assert any(dist_worker.EXPECTED_ERRORS[name] in res["error"] for res in per_rank), per_rank


@needs_torch
@pytest.mark.parametrize("name", _cases(2) if gloo_available() else [])
def test_two_ranks_equal_single_process(name):
    _check_equal(2, name)


@needs_torch
@pytest.mark.parametrize("name", _errors(2) if gloo_available() else [])
def test_two_ranks_bad_input_fails_everywhere(name):
    _check_error(2, name)


@needs_torch
@pytest.mark.parametrize("name", _cases(4) if gloo_available() else [])
def test_four_ranks_equal_single_process(name):
    _check_equal(4, name)


@needs_torch
def test_ulysses_is_bit_exact():
    """Ulysses, Gilbert order permuted outside libpsa: the same floats as one process."""
    for name in ("ulysses2_wan_gilbert", "ulysses2_chunks2_gqa", "ulysses2_chunks2_batch2_text",
                 "ulysses2_batch2_uneven_gqa"):
        for res in _launch(2)[name]:
            assert res["exact"], (name, res)


@needs_torch
def test_ring_allgather_is_bit_exact():
    """The all-gather ring, asked for and by default (ring_impl "auto" up to 4 ring ranks)."""
    for res in (_launch(2)["ring2_wan_allgather"] + _launch(4)["usp2x2_wan_allgather"] +
                _launch(2)["ring2_cogvideo_text_auto"]):
        assert res["ring_impl"] == "allgather", res
        assert res["exact"], res


@needs_torch
def test_psa_ring_p2p_has_the_single_process_levels():
    """The PSA p2p ring passes K/V shards: every rank's level map is its rows
    of the single-process map, and the level fractions over all ranks are identical."""
    names = {2: ["ring2_wan_gilbert", "ring2_wan_no_gilbert", "ring2_wan_uneven",
                 "ring2_cogvideo_text", "ring2_gqa", "ring2_wan_p2p_gqa"],
             4: ["usp2x2_wan_gilbert", "ring4_wan_gilbert", "usp2x2_cogvideo_text_gqa",
                 "ring4_no_gilbert_p2p", "ring4_cogvideo_text_gqa"]}
    for world, cases in names.items():
        for name in cases:
            for r, res in enumerate(_launch(world)[name]):
                assert "error" not in res, (name, r, res)
                assert res["ring_impl"] == "p2p", (name, res)
                assert res["levels_equal"], (name, r, res)
                assert res["fractions_equal"], (name, r, res)
                assert res["rel_l2"] <= 1e-5, (name, r, res)


@needs_torch
def test_no_process_group_is_a_clear_error():
    import psa.distributed as psd

    with pytest.raises(psd.SequenceParallelError, match="init_process_group"):
        psd.SequenceParallel(grid=(4, 8, 32), ulysses_degree=2)


@needs_torch
def test_shard_bounds_hold_whole_query_blocks():
    import psa.distributed as psd

    b = psd.shard_bounds(900, 1, 2, 128)  # 8 blocks: 4 + 4 (last shorter)
    assert b == [(0, 512), (512, 900)]
    b = psd.shard_bounds(1024, 2, 2, 128)
    assert b == [(0, 256), (256, 512), (512, 768), (768, 1024)]
    with pytest.raises(psd.SequenceParallelError, match="ring_degree = 4"):
        psd.shard_bounds(200, 1, 4, 128)


@needs_torch
@pytest.mark.parametrize("lengths", [[3, 3, 3, 2], [3, 3, 3, 0], [2, 2, 1, 0], [4]])
def test_ulysses_pieces_read_in_place_or_copied(lengths):
    """What an all_to_all delivers, [U, cap, B, h, D] with piece i in its first lengths[i]
    positions, read as the [B, sum(lengths), h, D] sequence: a view of the buffer when the
    pieces lie end to end (every piece but the last full), else a copy; the same values."""
    import torch
    import psa.distributed as psd

    U, cap, B, h, D = len(lengths), max(lengths), 2, 3, 4
    buf = torch.randn(U, cap, B, h, D)
    seq = psd._pieces_as_sequence(buf, lengths)
    expect = torch.cat([buf[i, :n].permute(1, 0, 2, 3) for i, n in enumerate(lengths)], dim=1)
    assert seq.shape == (B, sum(lengths), h, D)
    assert torch.equal(seq, expect)
    flat = all(n == cap for n in lengths[:-1])
    assert (seq.data_ptr() == buf.data_ptr()) == flat
    send = psd._heads_buffer(seq, lengths, U)
    view = psd._sequence_view(send, lengths)
    assert send.shape == (U, cap, B, h, D)
    if flat:  # the output written through the view lands where _heads_to_seq sends it from
        view.copy_(expect)
        assert torch.equal(psd._pieces_as_sequence(send, lengths), expect)
    else:
        assert view is None


@needs_torch
def test_ulysses_head_chunks_divide_query_and_kv_heads():
    import psa.distributed as psd

    assert psd._head_chunks(2, 20, 20) == 2   # Wan2.1-14B on 2 ranks
    assert psd._head_chunks(4, 6, 3) == 3     # GQA: bounded by the K/V heads
    assert psd._head_chunks(2, 4, 1) == 1     # one K/V head per rank: no chunks
    assert psd._head_chunks(2, 3, 3) == 1     # odd head count
    assert psd._head_chunks(1, 24, 24) == 1
