# bindings/python/tests/test_context.py -- psa.Context lifetime (context manager, close) and
# state: backend, video grid, warm-up steps.
import pytest

import psa


def test_context_manager_closes(sparse_config):
    with psa.Context(sparse_config, backend="cpu") as ctx:
        assert ctx.backend == "cpu"
        assert ctx.config["block_size.n"] == 128
    with pytest.raises(psa.Error) as info:
        ctx.set_step(0)
    assert info.value.status == psa.Status.ERR_INVALID_STATE
    ctx.close()  # idempotent


def test_context_copies_the_config(sparse_config):
    ctx = psa.Context(sparse_config, backend="cpu")
    sparse_config["warmup_steps"] = 0
    assert ctx.config["warmup_steps"] == 15
    ctx.close()


def test_context_from_model_name():
    with psa.Context("Wan2.1_1.3b", backend="cpu") as ctx:
        assert ctx.config["type"] == psa.Method.PSA


def test_warmup_steps_count_forwards(sparse_config):
    with psa.Context(sparse_config, backend="cpu") as ctx:
        assert ctx.next_step() == (0, True)
        ctx.set_step(15)
        assert ctx.next_step() == (15, False)
        ctx.set_step(-1)
        assert ctx.next_step() == (0, True)


def test_cuda_backend_fails_cleanly_without_gpu(sparse_config):
    try:
        ctx = psa.Context(sparse_config, backend="cuda")
    except psa.Error as err:
        assert err.status in (psa.Status.ERR_BACKEND_UNAVAILABLE, psa.Status.ERR_NO_DEVICE)
        assert err.message
    else:  # a GPU machine: the context is real
        assert ctx.backend == "cuda"
        ctx.close()


def test_bad_video_grid_names_the_argument(sparse_config):
    with psa.Context(sparse_config, backend="cpu") as ctx:
        with pytest.raises(psa.Error) as info:
            ctx.set_video_grid(0, 16, 16)
        assert info.value.status in (psa.Status.ERR_INVALID_ARGUMENT, psa.Status.ERR_INVALID_SHAPE)
        assert "0,16,16" in info.value.message
        with pytest.raises(ValueError):
            ctx.set_video_grid(2, 16, 16, text_position="middle")
