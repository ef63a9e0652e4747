"""``rlx eval --video`` and ``rlx run --video-every``: frames, sizes, returns, errors."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rlx
from rlx.checkpoint import load_checkpoint
from rlx.errors import ConfigError
from rlx.testing import same_state
from rlx.trainer import Trainer
from rlx.video import format_return

#: CartPole-v1 renders 600 x 400 pixels at 50 frames per second.
WIDTH, HEIGHT, FPS = 600, 400, 50
EXTRA = 'pip install "rlx-core[video]"'
TIMING_COLUMNS = {"time/elapsed_s", "time/steps_per_second"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A short run of the random agent on CartPole-v1."""
    path = tmp_path_factory.mktemp("video") / "run"
    agent = rlx.make("random", "CartPole-v1", seed=5)
    Trainer(
        agent,
        steps=200,
        eval_episodes=2,
        run_dir=path,
        progress=False,
        verbose=False,
        plot=False,
        tensorboard=False,
    ).fit()
    return path


def mp4_comment(path: Path) -> dict:
    """The JSON comment of an MP4, read back with the ffmpeg that imageio-ffmpeg ships."""
    import imageio_ffmpeg

    done = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "ffmetadata", "-"],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stdout.splitlines():
        if line.startswith("comment="):
            return json.loads(re.sub(r"\\(.)", r"\1", line.removeprefix("comment=")))
    raise AssertionError(f"no comment in {path}: {done.stdout}")


def mp4_frames(path: Path) -> tuple[int, tuple[int, ...], float]:
    """Frame count, frame shape and frames per second of an MP4, decoded by imageio."""
    import imageio.v2 as imageio

    reader = imageio.get_reader(path, format="FFMPEG")
    try:
        shapes = {frame.shape for frame in reader}
        assert len(shapes) == 1, shapes
        return reader.count_frames(), shapes.pop(), reader.get_meta_data()["fps"]
    finally:
        reader.close()


def test_eval_video_mp4_has_every_frame_the_size_and_the_return(rlx_cli, run_dir, tmp_path):
    code, out, err = rlx_cli("eval", str(run_dir), "--episodes", "3", "--json")
    assert code == 0, err
    plain = json.loads(out)

    pattern = tmp_path / "cartpole-{return}.mp4"
    code, out, err = rlx_cli(
        "eval", str(run_dir), "--episodes", "3", "--video", str(pattern), "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    # Recording plays the same evaluation episodes.
    assert result["returns"] == plain["returns"] and result["lengths"] == plain["lengths"]
    path = Path(result["video"])
    assert path == tmp_path / f"cartpole-{format_return(result['mean_return'])}.mp4"
    assert path.is_file() and [p.name for p in tmp_path.iterdir()] == [path.name]  # no leftovers

    frames, shape, fps = mp4_frames(path)
    assert frames == sum(result["lengths"]) + 3  # the first observation of each episode, too
    assert shape == (HEIGHT, WIDTH, 3) and fps == FPS
    comment = mp4_comment(path)
    assert comment["returns"] == result["returns"] and comment["lengths"] == result["lengths"]
    assert comment["mean_return"] == result["mean_return"] and comment["frames"] == frames
    assert (comment["agent"], comment["env"], comment["episodes"]) == ("random", "CartPole-v1", 3)


def test_eval_video_gif_keeps_the_duration_size_and_return(rlx_cli, run_dir, tmp_path):
    from PIL import Image

    path = tmp_path / "cartpole.gif"
    code, out, err = rlx_cli(
        "eval", str(run_dir), "--episodes", "2", "--video", str(path), "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["video"] == str(path)
    expected = sum(result["lengths"]) + 2
    with Image.open(path) as gif:
        assert gif.size == (WIDTH, HEIGHT)
        comment = json.loads(gif.info["comment"])
        durations = []
        for index in range(gif.n_frames):
            gif.seek(index)
            durations.append(gif.info["duration"])
    # Pillow merges identical consecutive frames into one longer frame: the time adds up.
    assert len(durations) <= expected and sum(durations) == expected * 1000 // FPS
    assert comment["returns"] == result["returns"] and comment["frames"] == expected


def test_eval_video_into_a_directory_names_the_return(rlx_cli, run_dir, tmp_path):
    code, out, err = rlx_cli("eval", str(run_dir), "--episodes", "1", "--video", str(tmp_path))
    assert code == 0, err
    [path] = tmp_path.iterdir()
    match = re.fullmatch(r"random-CartPole-v1-return-(.+)\.mp4", path.name)
    assert match, path.name
    comment = mp4_comment(path)
    assert match[1] == format_return(comment["returns"][0])
    assert f"video: {path} ({comment['frames']} frames, {WIDTH}x{HEIGHT}, {FPS} fps)" in out
    assert mp4_frames(path)[0] == comment["lengths"][0] + 1


def test_eval_video_refuses_other_suffixes(rlx_cli, run_dir, tmp_path):
    code, _, err = rlx_cli("eval", str(run_dir), "--video", str(tmp_path / "cartpole.avi"))
    assert code == 2
    assert "error: cannot write a .avi video: give a .mp4 or .gif file" in err
    assert list(tmp_path.iterdir()) == []


def test_missing_imageio_is_one_error_naming_the_extra(rlx_cli, run_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio", None)
    code, _, err = rlx_cli("eval", str(run_dir), "--video", str(tmp_path / "cartpole.mp4"))
    assert code == 2 and EXTRA in err and "imageio" in err
    assert "Traceback" not in err

    out = tmp_path / "run"
    code, _, err = rlx_cli(
        *("run", "random", "--env", "CartPole-v1", "--steps", "100", "--video-every", "50"),
        *("--out", str(out), "--no-progress"),
    )
    assert code == 2 and EXTRA in err
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_missing_ffmpeg_refuses_mp4_and_video_every_falls_back_to_gif(
    rlx_cli, run_dir, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    code, _, err = rlx_cli("eval", str(run_dir), "--video", str(tmp_path / "cartpole.mp4"))
    assert code == 2 and "imageio-ffmpeg" in err and EXTRA in err

    agent = rlx.make("random", "CartPole-v1", seed=1)
    Trainer(
        agent, steps=60, video_every=30, eval_episodes=0, run_dir=tmp_path / "run", progress=False
    ).fit()
    names = sorted(p.name for p in (tmp_path / "run" / "videos").iterdir())
    assert names and all(re.fullmatch(r"step-\d+-return-[\d.]+\.gif", n) for n in names), names


def test_video_every_needs_a_run_directory():
    agent = rlx.make("random", "CartPole-v1", seed=0)
    with pytest.raises(ConfigError, match="run directory"):
        Trainer(agent, steps=100, video_every=50, progress=False).fit()


def _rows(run: Path) -> list[dict[str, str]]:
    with open(run / "metrics.csv", newline="") as f:
        return [
            {k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in csv.DictReader(f)
        ]


def test_video_every_records_episodes_and_leaves_training_unchanged(rlx_cli, tmp_path):
    every = 200
    common = ("run", "a2c", "--env", "CartPole-v1", "--steps", "600", "--seed", "2")
    common += ("--eval-every", "200", "--eval-episodes", "2", "--no-progress")
    code, _, err = rlx_cli(*common, "--out", str(tmp_path / "plain"))
    assert code == 0, err
    code, _, err = rlx_cli(*common, "--video-every", str(every), "--out", str(tmp_path / "video"))
    assert code == 0, err

    plain, video = (load_checkpoint(tmp_path / name / "final") for name in ("plain", "video"))
    assert same_state(plain.policy, video.policy) and same_state(plain.resume, video.resume)
    assert _rows(tmp_path / "plain") == _rows(tmp_path / "video")
    assert not (tmp_path / "plain" / "videos").exists()
    config = json.loads((tmp_path / "video" / "config.json").read_text())
    assert config["trainer"]["video_every"] == every

    env_steps = plain.document["trainer"]["env_steps"]
    files = sorted((tmp_path / "video" / "videos").iterdir(), key=lambda p: len(p.name))
    steps = []
    for path in files:
        match = re.fullmatch(r"step-(\d+)-return-(.+)\.mp4", path.name)
        assert match, path.name
        comment = mp4_comment(path)
        steps.append(int(match[1]))
        assert comment["env_steps"] == int(match[1]) and comment["episodes"] == 1
        assert match[2] == format_return(comment["returns"][0])
        frames, shape, _ = mp4_frames(path)
        assert frames == comment["lengths"][0] + 1 and shape == (HEIGHT, WIDTH, 3)
        assert f"video return {comment['returns'][0]:9.3f} | {path}" in err
    steps.sort()
    # One video each time the run passes a multiple of --video-every.
    assert [step // every for step in steps] == list(range(1, env_steps // every + 1))
