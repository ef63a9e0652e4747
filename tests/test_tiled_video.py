"""Tiled rendering of a vector environment's copies, and tiled videos (``--video-tiles``,
``rlx eval --video-tiled``)."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlx
from rlx.errors import RlxError
from rlx.evaluation import evaluate
from rlx.trainer import Trainer
from rlx.video import _Tiler, grid_shape, render_tiled, tile_frames, video_env

pytest.importorskip("pygame", reason="CartPole renders with pygame (rlx-core[video])")

#: CartPole-v1 renders 600 x 400 pixels.
WIDTH, HEIGHT = 600, 400


class PoleAngle:
    """A deterministic policy for batches or one observation: push towards the pole's lean."""

    def act(self, observation, deterministic=True):
        return (np.asarray(observation)[..., 2] > 0).astype(np.int64)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiled") / "run"
    agent = rlx.make("random", "CartPole-v1", seed=5)
    settings = {"progress": False, "verbose": False, "plot": False, "tensorboard": False}
    Trainer(agent, steps=200, eval_episodes=2, run_dir=path, **settings).fit()
    return path


@pytest.mark.parametrize(
    "count, shape", [(1, (1, 1)), (2, (1, 2)), (3, (2, 2)), (4, (2, 2)), (5, (2, 3)), (10, (3, 4))]
)
def test_the_grid_is_near_square(count, shape):
    assert grid_shape(count) == shape


def test_tiles_go_row_by_row_and_the_cells_left_over_are_black():
    frames = [np.full((2, 3, 3), value, np.uint8) for value in (10, 20, 30)]
    grid = tile_frames(frames)
    assert grid.shape == (4, 6, 3)
    assert (grid[:2, :3] == 10).all() and (grid[:2, 3:] == 20).all()
    assert (grid[2:, :3] == 30).all() and (grid[2:, 3:] == 0).all()
    with pytest.raises(RlxError, match="different or non-image shapes"):
        tile_frames([frames[0], np.zeros((3, 3, 3), np.uint8)])


def test_four_cartpole_copies_render_into_a_two_by_two_grid_of_their_own_frames():
    envs = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync", render_mode="rgb_array")
    try:
        envs.reset(seed=[1, 2, 3, 4])
        for _ in range(5):
            envs.step(np.array([0, 1, 0, 1]))
        grid = render_tiled(envs)
        assert grid.shape == (2 * HEIGHT, 2 * WIDTH, 3)
        tiles = [
            grid[row * HEIGHT : (row + 1) * HEIGHT, column * WIDTH : (column + 1) * WIDTH]
            for row in range(2)
            for column in range(2)
        ]
        for tile, copy in zip(tiles, envs.envs, strict=True):
            assert np.array_equal(tile, copy.render())
        assert not np.array_equal(tiles[0], tiles[1])  # the copies are in different states
    finally:
        envs.close()


def test_a_tiled_recording_shows_each_episode_as_played_alone_and_frozen_once_over():
    agent = rlx.make("random", "CartPole-v1", seed=0)
    alone, lengths = [], []
    single = video_env(agent)
    for episode in range(3):  # each episode on its own, every frame
        frames: list[np.ndarray] = []
        result = evaluate(
            PoleAngle(),
            single,
            episode + 1,
            seed=7,
            on_step=lambda e, s, frames=frames, n=episode: (
                frames.append(single.render()) if e == n else None
            ),
        )
        alone.append(frames)
        lengths.append(result.lengths[-1])
    single.close()
    assert len(set(lengths)) > 1  # the episodes end at different steps

    envs = video_env(agent, copies=3)
    tiled: list[np.ndarray] = []
    tiler = _Tiler(envs, lambda frame, episode, step: np.asarray(frame), tiled.append)
    result = evaluate(PoleAngle(), envs, 3, seed=7, on_step=tiler.on_step)
    tiler.flush()
    envs.close()
    assert list(result.lengths) == lengths
    assert len(tiled) == max(lengths) + 1
    for step, frame in enumerate(tiled):
        assert frame.shape == (2 * HEIGHT, 2 * WIDTH, 3)
        for copy in range(3):
            row, column = divmod(copy, 2)
            tile = frame[row * HEIGHT : (row + 1) * HEIGHT, column * WIDTH : (column + 1) * WIDTH]
            assert np.array_equal(tile, alone[copy][min(step, lengths[copy])]), (step, copy)
        assert not frame[HEIGHT:, WIDTH:].any()  # the fourth cell: no copy, black


def test_eval_video_tiled_plays_the_episodes_side_by_side(rlx_cli, run_dir, tmp_path):
    pytest.importorskip("imageio_ffmpeg", reason="MP4 needs rlx-core[video]")
    import imageio.v2 as imageio

    video = tmp_path / "tiled.mp4"
    code, out, err = rlx_cli(
        "eval", str(run_dir), "--episodes", "3", "--video", str(video), "--video-tiled", "--json"
    )
    assert code == 0, err
    lengths = json.loads(out)["lengths"]
    reader = imageio.get_reader(video, format="FFMPEG")
    try:
        shapes = {frame.shape for frame in reader}
        assert shapes == {(2 * HEIGHT, 2 * WIDTH, 3)}
        assert reader.count_frames() == max(lengths) + 1  # one round: the longest episode
    finally:
        reader.close()


def test_video_tiles_during_training(tmp_path):
    agent = rlx.make("random", "CartPole-v1", seed=1)
    settings = {"progress": False, "verbose": False, "plot": False, "tensorboard": False}
    Trainer(
        agent, steps=300, video_every=300, video_tiles=2, run_dir=tmp_path / "run", **settings
    ).fit()
    (video,) = (tmp_path / "run" / "videos").iterdir()
    import imageio.v3 as iio

    assert iio.imread(video, index=0).shape[:2] == (HEIGHT, 2 * WIDTH)


@pytest.mark.parametrize("value", ["0", "17"])
def test_a_bad_number_of_tiles_is_one_error(rlx_cli, tmp_path, value):
    code, _, err = rlx_cli(
        "run", "random", "--env", "CartPole-v1", "--out", str(tmp_path / "run"),
        "--video-every", "100", "--video-tiles", value,
    )  # fmt: skip
    assert code == 2 and "video_tiles" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_video_tiled_needs_a_video(rlx_cli, run_dir):
    code, _, err = rlx_cli("eval", str(run_dir), "--video-tiled")
    assert code == 2 and "--video-tiled applies to --video" in err
