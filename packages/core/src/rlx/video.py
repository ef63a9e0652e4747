"""Videos of greedy evaluation episodes: ``rlx eval --video`` and the trainer's ``video_every``.

Frames come from an environment made with ``render_mode="rgb_array"`` by the same function
that builds the evaluation environment (:func:`rlx.api.evaluation_env`, so a run's recorded
wrappers apply), and the episodes are played by :func:`rlx.evaluation.evaluate` on the
evaluation seeds: a video shows exactly the episodes an evaluation scores, and recording one
never moves the agent's training RNGs.

An episode of ``L`` steps gives ``L + 1`` frames: the first observation, then one per step.
MP4 (``.mp4``, H.264 through the ffmpeg binary that imageio-ffmpeg ships) is streamed to
disk; GIF (``.gif``, through imageio's Pillow plugin) keeps the frames in memory until the
end, and Pillow merges identical consecutive frames into one longer frame. Both play at the
environment's ``metadata["render_fps"]`` (30 when it has none).

Where the return goes:

- the file's metadata, always: a JSON ``comment`` (the MP4 ``comment`` tag, the GIF comment
  block) with the agent, environment, seeds, every episode's return and length, and the mean
  return;
- the file's name, when the path is a pattern or a directory: ``{return}`` in the name is
  replaced by the mean return (``22``, ``-3.5``), and a directory gets
  ``<agent>-<env>-return-<R>.mp4`` (``.gif`` without ffmpeg).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.errors import ConfigError, RlxError
from rlx.evaluation import EvalResult, evaluate

#: The file types a video can be written as.
SUFFIXES = (".mp4", ".gif")
#: What installs the writers.
EXTRA = 'pip install "rlx-core[video]"'
#: The placeholder of a file name pattern.
RETURN_FIELD = "{return}"
#: Frames per second when the environment does not say (``metadata["render_fps"]``).
DEFAULT_FPS = 30


@dataclass(frozen=True)
class Recording:
    """A written video: where, the evaluation it shows, and its frames."""

    path: Path
    result: EvalResult
    frames: int
    #: Width and height of a frame in pixels.
    size: tuple[int, int]
    fps: float

    @property
    def returns(self) -> list[float]:
        """The returns of the recorded episodes."""
        return list(self.result.returns)


def default_suffix() -> str:
    """``.mp4`` when imageio-ffmpeg is installed, else ``.gif``."""
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return ".gif"
    return ".mp4"


def check_writer(suffix: str) -> None:
    """Raise a clear :class:`RlxError` unless a ``suffix`` video can be written here."""
    if suffix not in SUFFIXES:
        raise ConfigError(
            f"cannot write a {suffix or 'suffix-less'} video: give a .mp4 or .gif file (its "
            f"name may hold {RETURN_FIELD}, replaced by the mean return) or a directory"
        )
    modules = ["imageio", "imageio_ffmpeg"] if suffix == ".mp4" else ["imageio", "PIL"]
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            raise RlxError(
                f"writing {suffix} videos needs {module.replace('_', '-')}, which is not "
                f"installed: {EXTRA}"
            ) from None


def target_suffix(path: str | Path) -> str:
    """The file type ``path`` will be written as (checked: :func:`check_writer`)."""
    path = Path(path)
    suffix = default_suffix() if path.is_dir() else path.suffix.lower()
    check_writer(suffix)
    return suffix


def check_target(path: str | Path) -> str:
    """The file type ``path`` will be written as, after checking, writing nothing, that a
    video can be written there: the writers (:func:`check_writer`) and the place (an
    existing folder or one that can be made, writable). Returns the suffix."""
    path = Path(path)
    suffix = target_suffix(path)
    reason = _unwritable(path if path.is_dir() else path.parent)
    if reason is None and path.exists() and not path.is_dir() and not os.access(path, os.W_OK):
        reason = f"{path} is not writable"
    if reason is not None:
        raise ConfigError(f"cannot write the video {path}: {reason}")
    return suffix


def _unwritable(folder: Path) -> str | None:
    """Why no file can be written in ``folder`` (made with its parents if missing), or None.

    The nearest existing folder is asked with an unnamed temporary file, which leaves
    nothing behind, because ``os.access`` answers yes to root even where no file can be
    made (``/proc``)."""
    import tempfile

    for existing in [folder, *folder.parents]:
        if existing.exists():
            break
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"{existing} is not writable ({exc.strerror or exc})"
    return None


def video_env(agent: Any, identity: Any = None) -> Any:
    """The evaluation environment of ``agent`` (:func:`rlx.api.evaluation_env`), rendering
    ``rgb_array`` frames; without a display, SDL (pygame) is told to draw off-screen."""
    from rlx.api import evaluation_env

    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = evaluation_env(agent, identity, render_mode="rgb_array")
    if getattr(env, "render_mode", None) != "rgb_array":
        name = getattr(getattr(env, "spec", None), "id", None) or type(env.unwrapped).__name__
        env.close()
        raise RlxError(f"environment {name} cannot be made with render_mode='rgb_array'")
    return env


def format_return(value: float) -> str:
    """A return as it appears in a file name: at most two decimals, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def record_episodes(
    agent: Any,
    env: Any,
    path: str | Path,
    episodes: int = 1,
    seed: int = 0,
    *,
    metadata: Mapping[str, Any] | None = None,
    max_episode_steps: int | None = None,
    progress: bool = False,
) -> Recording:
    """Play ``episodes`` greedy evaluation episodes (seeds from ``seed`` as
    :func:`rlx.evaluate` draws them) on ``env`` and write them, one after the other, into one
    video at ``path``: a ``.mp4`` or ``.gif`` file, a name with ``{return}`` in it, or a
    directory. ``env`` must render ``rgb_array`` frames (:func:`video_env`); ``metadata``
    joins the JSON comment; ``max_episode_steps`` caps the episodes as :func:`rlx.evaluate`
    does; ``progress`` shows a bar of the episodes on a terminal. Returns
    where it wrote, the returns and the frame count.
    """
    from rlx.api import identity_of

    path = Path(path)
    suffix = check_target(path)
    identity = identity_of(agent)
    folder = path if path.is_dir() else path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write the video {path}: {exc.strerror or exc}") from None
    fps = float((getattr(env, "metadata", None) or {}).get("render_fps") or DEFAULT_FPS)
    writer = _Mp4Writer(folder, fps) if suffix == ".mp4" else _GifWriter(fps)
    env_name = identity.env
    shape: list[tuple[int, ...]] = []

    def on_step(episode: int, step: int) -> None:
        frame = env.render()
        if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] not in (3, 4):
            raise RlxError(
                f"environment {env_name} rendered {type(frame).__name__} in rgb_array mode, "
                "not an image (height, width, 3)"
            )
        if shape and frame.shape != shape[0]:
            raise RlxError(
                f"environment {env_name} changed its frame size from {shape[0]} to "
                f"{frame.shape} (episode {episode}, step {step})"
            )
        shape[:] = [frame.shape]
        writer.append(np.array(frame[..., :3], dtype=np.uint8))  # a copy: GIFs keep them

    try:
        result = evaluate(
            agent,
            env,
            episodes,
            seed=seed,
            max_episode_steps=max_episode_steps,
            on_step=on_step,
            progress=progress,
        )
        comment = {
            "agent": identity.agent,
            "env": identity.env,
            "seed": identity.seed,
            "evaluation_seed": seed,
            **dict(metadata or {}),
            "episodes": result.episodes,
            "returns": list(result.returns),
            "lengths": list(result.lengths),
            "mean_return": result.mean_return,
            "frames": writer.frames,
            "fps": fps,
        }
        final = _final_path(path, suffix, result.mean_return, identity)
        frames = writer.frames
        writer.finish(final, json.dumps(comment))
    finally:
        writer.discard()
    height, width = shape[0][:2]
    return Recording(final, result, frames, (int(width), int(height)), fps)


def _final_path(path: Path, suffix: str, mean_return: float, identity: Any) -> Path:
    if path.is_dir():
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{identity.agent}-{identity.env}")
        path = path / f"{name}-return-{RETURN_FIELD}{suffix}"
    return path.with_name(path.name.replace(RETURN_FIELD, format_return(mean_return)))


class _Mp4Writer:
    """Streams frames to a hidden file beside the video, then copies the stream into the
    video with the comment (ffmpeg takes its metadata when it starts, before the returns are
    known)."""

    def __init__(self, folder: Path, fps: float) -> None:
        import tempfile

        descriptor, name = tempfile.mkstemp(prefix=".rlx-video-", suffix=".mp4", dir=folder)
        os.close(descriptor)
        self.partial = Path(name)
        self.fps = fps
        self.frames = 0
        self._writer: Any = None

    def append(self, frame: np.ndarray) -> None:
        if self._writer is None:
            import imageio.v2 as imageio

            # macro_block_size=2: keep the frame size (H.264 wants even sides only).
            self._writer = imageio.get_writer(
                self.partial,
                format="FFMPEG",
                mode="I",
                fps=self.fps,
                macro_block_size=2,
                ffmpeg_log_level="error",
            )
        self._writer.append_data(frame)
        self.frames += 1

    def finish(self, path: Path, comment: str) -> None:
        import imageio_ffmpeg

        if self._writer is None:
            raise RlxError("no frame was rendered, so no video was written")
        self._writer.close()
        self._writer = None
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(),
            *("-y", "-v", "error", "-i", str(self.partial), "-map", "0", "-c", "copy"),
            *("-metadata", f"comment={comment}", "-movflags", "+faststart", "-f", "mp4"),
            str(path),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RlxError(f"ffmpeg could not write {path}: {done.stderr.strip()}")

    def discard(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # the error being reported matters more
                pass
        self.partial.unlink(missing_ok=True)


class _GifWriter:
    """Keeps the frames, and writes them at the end with Pillow (which needs them all)."""

    def __init__(self, fps: float) -> None:
        self.fps = fps
        self.images: list[np.ndarray] = []

    @property
    def frames(self) -> int:
        return len(self.images)

    def append(self, frame: np.ndarray) -> None:
        self.images.append(frame)

    def finish(self, path: Path, comment: str) -> None:
        import imageio.v3 as iio

        if not self.images:
            raise RlxError("no frame was rendered, so no video was written")
        try:
            iio.imwrite(
                path,
                self.images,
                is_batch=True,
                plugin="pillow",
                extension=".gif",
                duration=1000.0 / self.fps,
                loop=0,
                comment=comment.encode(),
            )
        except OSError as exc:
            raise RlxError(f"could not write {path}: {exc}") from exc

    def discard(self) -> None:
        self.images = []
