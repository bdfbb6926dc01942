# bindings/python/tests/test_mask.py -- ctx.level_map(), ctx.token_order() and psa.plot_mask:
# the NumPy arrays agree with the forward's statistics and the Gilbert order, and the PNG
# files, decoded here independently (chunk parsing, CRC, zlib), have the expected size and
# the documented colours at known cells. CPU backend.
import struct
import zlib

import numpy as np
import pytest

import psa
from conftest import video_qkv

COLOURS = {1: (200, 30, 30), 2: (240, 140, 40), 4: (240, 220, 60), 8: (110, 170, 230),
           0: (225, 225, 225)}


def decode_png(path):
    """(width, height, pixels [h, w, 3] uint8) of an 8-bit RGB PNG, checking every CRC."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, width = 8, b"", None
    while at < len(data):
        (n,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + n]
        (crc,) = struct.unpack(">I", data[at + 8 + n:at + 12 + n])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, colour, interlace) == (8, 2, 0)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        at += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + 3 * width)
    assert (raw[:, 0] == 0).all()  # libpsa writes filter type 0 (None)
    return width, height, raw[:, 1:].reshape(height, width, 3)


def run_forward(ctx, grid=(2, 16, 16), heads=2):
    q, k, v = video_qkv(grid=grid, heads=heads)
    ctx.set_video_grid(*grid)
    ctx.set_step(100)
    ctx.forward(q, k, v)


def test_level_map_and_token_order(sparse_config):
    with psa.Context(sparse_config, backend="cpu") as ctx:
        run_forward(ctx)
        levels = ctx.level_map()
        assert levels.dtype == np.int8 and levels.shape == (1, 2, 4, 4)
        assert set(np.unique(levels)) <= {0, 1, 2, 4, 8}
        stats = ctx.stats()
        assert stats.level_fraction[1] == pytest.approx(np.mean(levels == 1))
        assert stats.level_fraction[0] == pytest.approx(np.mean(levels == 0))
        order = ctx.token_order()
        assert isinstance(order, psa.TokenOrder)
        assert order.order.dtype == np.int64 and sorted(order.order) == list(range(512))
        assert order.text_begin == order.text_end  # no text: an empty span
        assert (ctx.token_order("queries").order == order.order).all()
        with pytest.raises(ValueError):
            ctx.token_order("values")


def test_level_map_before_any_forward_raises(sparse_config):
    with psa.Context(sparse_config, backend="cpu") as ctx:
        with pytest.raises(psa.Error) as e:
            ctx.level_map()
        assert e.value.status == psa.Status.ERR_INVALID_STATE


def test_plot_mask_of_an_array_decodes_to_the_documented_colours(tmp_path):
    levels = np.array([[[1, 2, 4], [8, 0, 1]]], np.int8)  # 1 head, 2 x 3 blocks
    path = psa.plot_mask(levels, tmp_path / "m.png", cell=10)
    width, height, px = decode_png(path)
    assert (width, height) == (386, 76)
    # The panel: the first row from the top that holds level-1 red after the legend line.
    red = np.all(px == COLOURS[1], axis=2)
    ys, xs = np.nonzero(red[30:])
    y0, x0 = 30 + ys.min(), xs.min()
    for i in range(2):
        for j in range(3):
            cell = px[y0 + 10 * i:y0 + 10 * i + 10, x0 + 10 * j:x0 + 10 * j + 10]
            assert (cell == COLOURS[int(levels[0, i, j])]).all(), (i, j)
    # Each level colour: its cells plus one 7x7 legend swatch.
    for level, colour in COLOURS.items():
        count = int(np.all(px == colour, axis=2).sum())
        assert count == 100 * int((levels == level).sum()) + 49, level


def test_plot_mask_of_a_context_matches_the_array_picture(sparse_config, tmp_path):
    with psa.Context(sparse_config, backend="cpu") as ctx:
        run_forward(ctx)
        a = psa.plot_mask(ctx, tmp_path / "ctx.png")
        b = psa.plot_mask(ctx.level_map(), tmp_path / "map.png")
        assert open(a, "rb").read() == open(b, "rb").read()
        video = psa.plot_mask(ctx, tmp_path / "video.png", view="video", head=1,
                              query_position=(1, 8, 8), cell=4)
        width, height, px = decode_png(video)
        assert width > 2 * 16 * 4 and height > 16 * 4
        with pytest.raises(psa.Error):
            psa.plot_mask(ctx, tmp_path / "bad.png", view="video", query_position=(5, 0, 0))
        with pytest.raises(ValueError):
            psa.plot_mask(ctx.level_map(), tmp_path / "bad.png", view="video")
