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

Tiled videos: given a vector environment of ``k`` rendering copies (:func:`video_env` with
``copies=k``), :func:`record_episodes` plays the episodes in rounds of ``k`` side by side,
each frame the copies' frames tiled into a near-square grid (:func:`tile_frames`; empty
cells black). A copy whose episode ended shows its last frame until the round ends.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
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
#: The most copies a tiled video shows at once (a 4 x 4 grid); more episodes play in rounds.
MAX_TILES = 16


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


def grid_shape(count: int) -> tuple[int, int]:
    """Rows and columns of the near-square grid that holds ``count`` tiles: ``ceil(sqrt(count))``
    columns and as many rows as they need (3 tiles: 2 x 2, one cell empty; 5 tiles: 2 x 3)."""
    if count < 1:
        raise ValueError(f"a grid holds at least one tile, got {count}")
    columns = math.ceil(math.sqrt(count))
    return math.ceil(count / columns), columns


def tile_frames(frames: Sequence[np.ndarray]) -> np.ndarray:
    """One image of ``frames`` (all of one shape, ``(height, width, channels)``) laid out row by
    row in the grid of :func:`grid_shape`, the cells left over black."""
    if not len(frames):
        raise ValueError("no frame to tile")
    shape = np.shape(frames[0])
    if len(shape) != 3 or any(np.shape(frame) != shape for frame in frames):
        raise RlxError(
            "the copies rendered frames of different or non-image shapes: "
            + ", ".join(str(np.shape(frame)) for frame in frames)
        )
    rows, columns = grid_shape(len(frames))
    height, width = shape[:2]
    grid = np.zeros((rows * height, columns * width, shape[2]), dtype=np.asarray(frames[0]).dtype)
    for index, frame in enumerate(frames):
        row, column = divmod(index, columns)
        grid[row * height : (row + 1) * height, column * width : (column + 1) * width] = frame
    return grid


def render_tiled(env: Any) -> np.ndarray:
    """Render every copy of the vector environment ``env`` (made with
    ``render_mode="rgb_array"``) and tile the frames into one (:func:`tile_frames`)."""
    frames = env.render()
    count = int(env.num_envs)
    if not isinstance(frames, (list, tuple, np.ndarray)) or len(frames) != count:
        raise RlxError(
            f"a vector environment of {count} copies rendered {type(frames).__name__}, not one "
            "frame per copy (make it with render_mode='rgb_array')"
        )
    return tile_frames([np.asarray(frame) for frame in frames])


def video_env(agent: Any, identity: Any = None, copies: int = 1) -> Any:
    """The evaluation environment of ``agent`` (:func:`rlx.api.evaluation_env`), rendering
    ``rgb_array`` frames; with ``copies`` above 1, a synchronous vector environment of that
    many, for tiled videos. Without a display, SDL (pygame) is told to draw off-screen."""
    if copies > 1:
        import gymnasium

        make = functools.partial(video_env, agent, identity)
        return gymnasium.vector.SyncVectorEnv([make] * copies)
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
    directory. ``env`` must render ``rgb_array`` frames (:func:`video_env`); a vector
    environment of such copies plays the episodes side by side, tiled into one frame (see
    the module's notes); ``metadata`` joins the JSON comment; ``max_episode_steps`` caps
    the episodes as :func:`rlx.evaluate` does; ``progress`` shows a bar of the episodes on a
    terminal. Returns where it wrote, the returns and the frame count.
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

    def checked(frame: Any, episode: int, step: int) -> np.ndarray:
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
        return np.array(frame[..., :3], dtype=np.uint8)  # a copy: GIFs keep them

    tiler = _Tiler(env, checked, writer.append) if _is_vector(env) else None
    try:
        result = evaluate(
            agent,
            env,
            episodes,
            seed=seed,
            max_episode_steps=max_episode_steps,
            on_step=(
                tiler.on_step
                if tiler is not None
                else lambda episode, step: writer.append(checked(env.render(), episode, step))
            ),
            progress=progress,
        )
        if tiler is not None:
            tiler.flush()
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
            **({"tiles": tiler.count} if tiler is not None else {}),
        }
        final = _final_path(path, suffix, result.mean_return, identity)
        frames = writer.frames
        writer.finish(final, json.dumps(comment))
    finally:
        writer.discard()
    height, width = shape[0][:2]
    if tiler is not None:
        rows, columns = grid_shape(tiler.count)
        height, width = height * rows, width * columns
    return Recording(final, result, frames, (int(width), int(height)), fps)


def _is_vector(env: Any) -> bool:
    import gymnasium

    return isinstance(env, gymnasium.vector.VectorEnv)


class _Tiler:
    """Tiled frames of a vector environment's copies, from :func:`rlx.evaluate`'s ``on_step``
    calls (one per copy still playing, after each step of all of them): the copies are
    rendered once a step, a copy not called keeps its last frame (its episode ended) or is
    black (it plays no episode this round), and each step's tiled frame is written when the
    next step's calls begin (and by :meth:`flush` at the end)."""

    def __init__(
        self,
        env: Any,
        checked: Callable[[Any, int, int], np.ndarray],
        write: Callable[[np.ndarray], None],
    ) -> None:
        self.env, self.checked, self.write = env, checked, write
        self.count = int(env.num_envs)
        self.tiles: list[np.ndarray | None] = [None] * self.count
        self.rendered: list[Any] = []
        self.key: tuple[int, int] | None = None
        self.pending = False

    def on_step(self, episode: int, step: int) -> None:
        """Take copy ``episode % count``'s frame of this step (its round: ``episode // count``)."""
        round_, copy = divmod(episode, self.count)
        if (round_, step) != self.key:
            self.flush()
            if self.key is None or self.key[0] != round_:
                self.tiles = [None] * self.count
            self.key = (round_, step)
            self.rendered = list(self.env.render() or ())
            if len(self.rendered) != self.count:
                raise RlxError(
                    f"a vector environment of {self.count} copies rendered "
                    f"{len(self.rendered)} frames: make it with render_mode='rgb_array'"
                )
        self.tiles[copy] = self.checked(self.rendered[copy], episode, step)
        self.pending = True

    def flush(self) -> None:
        """Write the tiled frame of the step taken so far, if any."""
        if not self.pending:
            return
        shown = next(tile for tile in self.tiles if tile is not None)
        self.write(tile_frames([t if t is not None else np.zeros_like(shown) for t in self.tiles]))
        self.pending = False


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
        from rlx.files import temporary_beside

        self.partial = temporary_beside(folder / "rlx-video", suffix=".mp4")
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
        from rlx.files import put_in_place, temporary_beside

        output = temporary_beside(path, suffix=".mp4")  # ffmpeg would write through a link
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(),
            *("-y", "-v", "error", "-i", str(self.partial), "-map", "0", "-c", "copy"),
            *("-metadata", f"comment={comment}", "-movflags", "+faststart", "-f", "mp4"),
            str(output),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            output.unlink(missing_ok=True)
            raise RlxError(f"ffmpeg could not write {path}: {done.stderr.strip()}")
        put_in_place(output, path)

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
        from rlx.files import write_bytes_atomic

        try:
            data = iio.imwrite(
                "<bytes>",
                self.images,
                is_batch=True,
                plugin="pillow",
                extension=".gif",
                duration=1000.0 / self.fps,
                loop=0,
                comment=comment.encode(),
            )
            write_bytes_atomic(path, data)
        except OSError as exc:
            raise RlxError(f"could not write {path}: {exc}") from exc

    def discard(self) -> None:
        self.images = []
