"""Exploration noise of the deterministic actors (DDPG and TD3), chosen by name or a user's class.

``action_noise`` names a built-in of :data:`ACTION_NOISES` (``gaussian``, the default, as the
on-policy agents' ``action_noise``, or ``ornstein-uhlenbeck``; ``normal``, DDPG's former name
of ``gaussian`` and the zoo's, still reads as it) or a user's class by import path
(``"package.module:Class"``; through :func:`rlx.make` the class itself, recorded by its
import path). A saved run naming a class imports code, so it loads only when trusted
(``trust_code=True``, ``--trust-code``). The agents explore with ``clip(mu(s) + noise, -1,
1)``: noise is in the actor's ``[-1, 1]`` scale, the buffer's, whatever the action bounds.

A noise class implements :class:`ActionNoise`:

- ``Class(action_shape=(d,), n_envs=n, rng=generator)``: keyword arguments, the shape of one
  action, the number of environment copies and the agent's :class:`numpy.random.Generator`
  (draw from it, and a run is reproducible and resumes exactly; it is saved with the agent);
- ``noise()``: the noise of one step of every copy, an array ``(n_envs, d)``, called once per
  exploring step;
- ``noise.reset(starting)``: called before each draw with a boolean array ``(n_envs,)``, True
  for the copies whose new episode starts with this step (all False most steps);
- optionally ``noise.state()`` returning a ``dict`` of NumPy arrays and
  ``noise.load_state(arrays)`` taking it back: what a stateful noise needs for an exact
  resume (saved in the resume state under ``action_noise.<key>``; loading runs no code of
  the file's).

Building the agent checks the interface and raises one :class:`~rlx.errors.ConfigError`
naming what is wrong; a draw of another shape is one too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from rlx.config import hyperparameter, load_setting
from rlx.errors import ConfigError, did_you_mean
from rlx.protocols import AgentState
from rlx_offpolicy.base import ActorCriticConfig, OffPolicyAgent


class ActionNoise(Protocol):
    """What a noise class of ``action_noise`` implements (see the module's docstring)."""

    def __call__(self) -> np.ndarray:
        """The noise of one step, ``(n_envs, *action_shape)``, in the ``[-1, 1]`` scale."""
        ...

    def reset(self, starting: np.ndarray) -> None:
        """Start the processes of the copies where ``starting`` ``(n_envs,)`` is True anew."""
        ...


class GaussianNoise:
    """Independent Gaussian noise ``N(0, std^2)`` at every step (TD3's, and
    Stable-Baselines3's default use of DDPG); stateless, so a reset does nothing."""

    def __init__(
        self, action_shape: tuple[int, ...], n_envs: int, rng: np.random.Generator, std: float
    ) -> None:
        self.shape = (n_envs, *action_shape)
        self.rng = rng
        self.std = std

    def __call__(self) -> np.ndarray:
        """``std * eps``, ``eps ~ N(0, I)`` (float64)."""
        return self.std * self.rng.standard_normal(self.shape)

    def reset(self, starting: np.ndarray) -> None:
        """Nothing to reset."""


class OrnsteinUhlenbeckNoise:
    """The DDPG paper's temporally correlated noise (Uhlenbeck & Ornstein 1930), one process
    per environment copy: ``x <- x - theta x dt + sigma sqrt(dt) eps``, restarted at zero with
    each episode; its value is part of the resume state."""

    def __init__(
        self,
        action_shape: tuple[int, ...],
        n_envs: int,
        rng: np.random.Generator,
        theta: float,
        sigma: float,
        dt: float,
    ) -> None:
        self.rng = rng
        self.theta, self.sigma, self.dt = theta, sigma, dt
        #: The processes' current values, ``(n_envs, *action_shape)``.
        self.value = np.zeros((n_envs, *action_shape))

    def __call__(self) -> np.ndarray:
        """One step of every process; its new value."""
        eps = self.rng.standard_normal(self.value.shape)
        self.value += -self.theta * self.value * self.dt + self.sigma * math.sqrt(self.dt) * eps
        return self.value

    def reset(self, starting: np.ndarray) -> None:
        """A new process for each episode: the starting copies' values back to zero."""
        self.value[starting] = 0.0

    def state(self) -> dict[str, np.ndarray]:
        """The processes' values."""
        return {"value": self.value.copy()}

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        """Take back :meth:`state`'s values."""
        self.value = np.array(arrays["value"], np.float64)


#: The built-in noises by name: a class, and the settings its parameters come from.
ACTION_NOISES: dict[str, tuple[type, dict[str, str]]] = {
    "gaussian": (GaussianNoise, {"std": "action_noise_std"}),
    "ornstein-uhlenbeck": (
        OrnsteinUhlenbeckNoise,
        {"theta": "ou_theta", "sigma": "ou_sigma", "dt": "ou_dt"},
    ),
}


#: Former names of built-in noises, still read (saved runs, configs): name -> built-in's name.
NOISE_ALIASES = {"normal": "gaussian"}


def check_action_noise(name: str) -> None:
    """Refuse an ``action_noise`` that is neither a name of :data:`ACTION_NOISES` nor a
    ``"package.module:Class"`` target, without importing anything."""
    module, sep, attribute = name.partition(":")
    if sep and module and attribute:
        return
    if name not in ACTION_NOISES and name not in NOISE_ALIASES:
        raise ConfigError(
            f"action_noise must be one of {', '.join(ACTION_NOISES)} or 'package.module:Class', "
            f"got {name!r}." + did_you_mean(name, ACTION_NOISES)
        )


def make_action_noise(
    config: Any, action_shape: tuple[int, ...], n_envs: int, rng: np.random.Generator
) -> ActionNoise:
    """The noise ``config.action_noise`` names, built for ``n_envs`` copies drawing from
    ``rng``: a built-in with its settings, or a user's class (imported here) checked against
    :class:`ActionNoise`."""
    name = config.action_noise
    check_action_noise(name)
    name = NOISE_ALIASES.get(name, name)
    if name in ACTION_NOISES:
        builtin, settings = ACTION_NOISES[name]
        parameters = {key: getattr(config, setting) for key, setting in settings.items()}
        return builtin(action_shape, n_envs, rng, **parameters)
    cls = load_setting(name, "action_noise")
    if not isinstance(cls, type):
        raise ConfigError(f"action_noise {name!r} is not a class")
    try:
        noise = cls(action_shape=action_shape, n_envs=n_envs, rng=rng)
    except TypeError as exc:
        raise ConfigError(
            f"action_noise {name!r} must be built as Class(action_shape=..., n_envs=..., "
            f"rng=...): {exc}"
        ) from exc
    missing = [
        what
        for what, present in [
            ("__call__() returning the noise", callable(noise)),
            ("reset(starting)", callable(getattr(noise, "reset", None))),
        ]
        if not present
    ]
    stateful = [callable(getattr(noise, method, None)) for method in ("state", "load_state")]
    if any(stateful) and not all(stateful):
        missing.append("both state() and load_state(arrays), or neither")
    if missing:
        raise ConfigError(
            f"action_noise {name!r} lacks {' and '.join(missing)}; see rlx_offpolicy.noise "
            "for what a noise class implements"
        )
    return noise


@dataclass
class NoisyActorConfig(ActorCriticConfig):
    """What the deterministic actors (DDPG, TD3) add: their exploration noise."""

    action_noise: str = hyperparameter(
        "gaussian",
        "exploration noise: gaussian (independent, action_noise_std), ornstein-uhlenbeck "
        "(the DDPG paper's; ou_theta, ou_sigma, ou_dt) or 'package.module:Class' (built with "
        "action_shape, n_envs and rng; called for (n_envs, *action_shape) noise each step; "
        "reset(starting) before each draw; see rlx_offpolicy.noise)",
        imports_code=True,
    )
    action_noise_std: float = hyperparameter(
        0.1,
        "sigma of the gaussian exploration noise, in the [-1, 1] action scale",
        low=0,
        search=(0.05, 0.5),
    )
    ou_theta: float = hyperparameter(0.15, "Ornstein-Uhlenbeck mean reversion theta", low=0)
    ou_sigma: float = hyperparameter(
        0.2, "Ornstein-Uhlenbeck sigma, in the [-1, 1] action scale", low=0
    )
    ou_dt: float = hyperparameter(1e-2, "Ornstein-Uhlenbeck time step dt", low=0, low_open=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_action_noise(self.action_noise)


class NoisyActorAgent(OffPolicyAgent):
    """An off-policy agent exploring with a deterministic actor plus :attr:`noise`:
    ``clip(greedy(s) + noise, -1, 1)``. Its subclass's :meth:`build` calls
    :meth:`build_noise`."""

    #: Where the noise's state lies in the resume state's arrays.
    NOISE_PREFIX: ClassVar[str] = "action_noise."

    def build_noise(self) -> None:
        """Make :attr:`noise` from the config (a :class:`~rlx.errors.ConfigError` when a
        user's class does not fit)."""
        #: The exploration noise, one process per environment copy.
        self.noise = make_action_noise(self.config, self.action_shape, self.config.n_envs, self.rng)

    def explore(self, observations: np.ndarray) -> np.ndarray:
        """``clip(greedy(s) + noise, -1, 1)``; the copies at an episode's start reset theirs."""
        actions = self.greedy(observations)
        self.noise.reset(self.runner.episode_lengths == 0)
        noise = np.asarray(self.noise())
        if noise.shape != actions.shape:
            raise ConfigError(
                f"action_noise {self.config.action_noise!r} returned noise of shape "
                f"{noise.shape}; it must be (n_envs, *action_shape) = {actions.shape}"
            )
        return np.clip(actions + noise, -1.0, 1.0).astype(np.float32)

    def resume_state(self) -> AgentState:
        """The base's, and the noise's state when it has one (so that a resume is exact)."""
        state = super().resume_state()
        if hasattr(self.noise, "state"):
            for key, value in self.noise.state().items():
                state.arrays[self.NOISE_PREFIX + key] = np.asarray(value)
        return state

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what every off-policy agent saves, and the noise's state."""
        super().load_resume_state(state)
        if hasattr(self.noise, "load_state"):
            prefix = self.NOISE_PREFIX
            arrays = {k[len(prefix) :]: v for k, v in state.arrays.items() if k.startswith(prefix)}
            if not arrays and "ou_noise" in state.arrays:
                # DDPG's Ornstein-Uhlenbeck values, as resume states saved them before.
                arrays = {"value": state.arrays["ou_noise"]}
            self.noise.load_state(arrays)
