"""Recurrent PPO: PPO-Clip with an LSTM or GRU policy and critic, trained on whole sequences.

PPO (Schulman et al. 2017, arXiv:1707.06347) with a recurrent policy, as in the partially
observable experiments of Pleines, Pallasch, Zimmer & Preuss (2023), "Memory Gym", and
sb3-contrib's ``RecurrentPPO``: the policy's memory is the recurrent cell's state, so the
rollout and the update must feed the cell the steps of each episode in their order.

Rollout (:meth:`RecurrentPPO.collect`)::

    for t = 0 .. n_steps - 1, every environment i at once
        h_i <- 0 where an episode starts at t (its first observation)
        store h_i (the state the cell reads at t) and the start flag
        a_t, log pi(a_t), V(s_t), h_i <- policy(o_t, h_i)
    GAE(lambda) on the rollout, as PPO has it

Update (:meth:`RecurrentPPO.update`): each environment's rollout is cut into windows of
``sequence_length`` steps (truncated backpropagation through time; the whole rollout by
default), and each window into sequences at the episode starts inside it. A sequence runs
from the state stored at its first step: zeros at an episode start, the state the rollout
carried otherwise. Minibatches are ``batch_size / sequence_length`` windows drawn at random
(so a minibatch never cuts a sequence), their sequences padded to the longest one and run
through the cell in one call; the padding and the reset steps of autoreset are masked out
of the losses. The losses are PPO's (:meth:`rlx_onpolicy.ppo.PPO.train_epoch`): the
clipped surrogate, the value loss (clipped with ``clip_range_vf``), the entropy bonus, the
KL early stop, advantages standardised per minibatch.

Exact resume: the cell states of the environments (and which of them start an episode
next) are part of the resume state, next to the environments' snapshot. Evaluation keeps a
state of its own, across the steps of an episode: :func:`rlx.evaluate` calls
:meth:`RecurrentPPO.begin_episodes` at each reset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from rlx.config import hyperparameter
from rlx.errors import ConfigError, NotBatchable
from rlx.protocols import AgentState
from rlx_onpolicy.ppo import PPO, PPOConfig
from rlx_onpolicy.recurrent_policy import CELLS, build_recurrent_actor_critic
from rlx_onpolicy.sampler import exploration_log_std


@dataclass
class RecurrentPPOConfig(PPOConfig):
    """Hyperparameters of recurrent PPO (defaults: sb3-contrib's ``RecurrentPPO``, with
    ``hidden_sizes`` the MLPs after the recurrent cell)."""

    n_steps: int = hyperparameter(128, "steps per environment per rollout", low=1)
    batch_size: int = hyperparameter(
        256,
        "minibatch size in steps: batch_size / sequence_length whole windows of one "
        "environment's steps (a multiple of sequence_length, so that no sequence is cut)",
        low=1,
    )
    cell: str = hyperparameter(
        "lstm", "the recurrent cell of the policy and critic", choices=tuple(CELLS)
    )
    recurrent_size: int = hyperparameter(
        256, "units of the recurrent cell (sb3-contrib's lstm_hidden_size)", low=1
    )
    recurrent_layers: int = hyperparameter(
        1, "stacked layers of the recurrent cell (sb3-contrib's n_lstm_layers)", low=1
    )
    recurrent_critic: str = hyperparameter(
        "separate",
        "the critic's memory: separate (a recurrent cell of its own, sb3-contrib's "
        "enable_critic_lstm), shared (the actor's cell, no value gradient into it: shared_lstm) "
        "or none (a linear layer on the encoder's features)",
        choices=("separate", "shared", "none"),
    )
    sequence_length: int | None = hyperparameter(
        None,
        "the longest sequence trained on, in steps (truncated backpropagation through time): "
        "each environment's rollout is cut into windows of this many steps, and at episode "
        "starts (None: n_steps, whole rollouts)",
        low=1,
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (64, 64), "hidden layers of the actor's and the critic's MLPs after the recurrent cell"
    )

    def window(self) -> int:
        """The steps of one window: ``sequence_length``, or the whole rollout."""
        return self.n_steps if self.sequence_length is None else self.sequence_length

    def __post_init__(self) -> None:
        super().__post_init__()
        refused = {
            "min_episodes": "rollouts of a fixed n_steps",
            "critic_epochs": "the critic trained with the policy, on the same sequences",
            "critic_policy": "its critic built after the recurrent cell (recurrent_critic)",
        }
        for name, what in refused.items():
            if getattr(self, name) is not None:
                raise ConfigError(
                    f"{name}={getattr(self, name)} does not apply to recurrent-ppo, which "
                    f"trains {what}: drop {name}"
                )
        if getattr(self, "action_masks", False):
            raise ConfigError(
                "action_masks is not supported by recurrent-ppo yet: use maskable-ppo, or drop "
                "action_masks"
            )
        if self.policy == "combined" or self.encoders:
            raise ConfigError(
                "recurrent-ppo encodes Box observations (mlp), images (cnn) or with the "
                "user's module ('package.module:factory'); the combined policy and "
                "encoders of Dict observations do not apply to it: drop them"
            )
        window = self.window()
        if window > self.n_steps:
            raise ConfigError(
                f"sequence_length={self.sequence_length} is longer than a rollout, n_steps="
                f"{self.n_steps}: lower sequence_length to at most n_steps, or drop it"
            )
        if self.batch_size % window:
            below = max(window, self.batch_size // window * window)
            raise ConfigError(
                f"batch_size={self.batch_size} is not a whole number of windows of "
                f"{window} steps (sequence_length, or n_steps when unset): a minibatch would "
                f"cut a sequence. Use a multiple of {window}, such as batch_size={below}, or "
                "set sequence_length to a divisor of batch_size"
            )


@dataclass
class Sequences:
    """A rollout's sequences: ``positions`` ``(S, L)`` index the flat data of valid steps
    (``-1`` pads), ``lengths`` ``(S,)``, ``states`` ``(S,)`` index the stored cell states
    (``t * n_envs + i`` of the first step), ``windows`` ``(S,)`` the window of each."""

    positions: np.ndarray
    lengths: np.ndarray
    states: np.ndarray
    windows: np.ndarray
    n_windows: int


def rollout_sequences(
    valid: np.ndarray, starts: np.ndarray, window: int, data_positions: np.ndarray | None = None
) -> Sequences:
    """Cut a rollout of ``(T, N)`` steps into sequences: at every ``window`` steps and at the
    episode starts (``starts``), the invalid reset steps of autoreset left out (each is the
    last step of its episode, so leaving it out never splits a sequence). A sequence's steps
    are given as positions in the flat data of valid steps (``data_positions`` ``(T, N)``;
    by default the order of :meth:`rlx_onpolicy.rollout.RolloutBuffer.flat`)."""
    T, N = valid.shape
    if data_positions is None:
        data_positions = (np.cumsum(valid.reshape(-1)) - 1).reshape(T, N)
    time = np.arange(T)[:, None]
    begins = (time % window == 0) | starts
    # Environment after environment, each in time order.
    begins_e, valid_e = begins.T.reshape(-1), valid.T.reshape(-1)
    positions_e = data_positions.T.reshape(-1)
    sequence = np.cumsum(begins_e) - 1
    first = np.flatnonzero(begins_e)
    offset = np.arange(T * N) - first[sequence]
    counts = np.bincount(sequence[valid_e], minlength=len(first))
    keep = counts > 0
    renumber = np.cumsum(keep) - 1
    n_sequences = int(keep.sum())
    lengths = counts[keep]
    positions = np.full((n_sequences, max(int(lengths.max(initial=0)), 1)), -1, np.int64)
    rows = renumber[sequence[valid_e]]
    positions[rows, offset[valid_e]] = positions_e[valid_e]
    env, t0 = np.divmod(first[keep], T)
    windows_per_env = -(-T // window)
    return Sequences(
        positions=positions,
        lengths=lengths,
        states=t0 * N + env,
        windows=env * windows_per_env + t0 // window,
        n_windows=N * windows_per_env,
    )


class RecurrentPPO(PPO):
    """PPO-Clip with a recurrent policy (``cell``: LSTM or GRU) on vector environments.

    Logged metrics: PPO's.
    """

    Config = RecurrentPPOConfig
    batched_update: ClassVar[bool] = False

    def __init__(self, env: Any, config: Any, seed: int) -> None:
        super().__init__(env, config, seed)
        c = config
        #: The cell state of each environment, after the last step it took.
        self.state = self.policy.initial_state(c.n_envs, self.device)
        #: Which environments start an episode at their next observation.
        self.starts = np.ones(c.n_envs, bool)
        #: The cell state each step of the rollout read, and whether it started an episode.
        self.rollout_states = torch.zeros(
            c.n_steps, c.n_envs, self.policy.state_size, device=self.device
        )
        self.rollout_starts = np.zeros((c.n_steps, c.n_envs), bool)
        #: The cell state of :meth:`act` (evaluation), None until it acts in new episodes.
        self.acting_state: torch.Tensor | None = None
        self.sequences: Sequences | None = None

    def new_policy(self) -> Any:
        """The :class:`~rlx_onpolicy.recurrent_policy.RecurrentActorCritic` of the settings,
        its weights drawn under a seed from ``self.rng``, its parameters flattened."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.rng.integers(2**62)))
            policy = build_recurrent_actor_critic(
                self.input_space, self.env.action_space, self.distribution, self.config
            )
        policy.to(self.device).flatten_parameters()
        return policy

    @classmethod
    def seed_batch(cls, agents: Any) -> Any:
        """Refused, because it would not be faster. Most of an update is torch's fused LSTM
        kernel, run per seed whatever the batching. A batched version was built and measured
        (4 seeds, the zoo's CartPoleNoVel settings): 0.48 s an iteration, against 0.46 s for
        the 4 seeds one after another. A version with the K cells as batched products, one
        step at a time, took 0.54 s."""
        raise NotBatchable(
            "recurrent-ppo's update is mostly torch's fused LSTM kernel, which runs seed by "
            "seed in a batch too (measured no faster); its seeds run one after another"
        )

    # -- the rollout ----------------------------------------------------------------------------

    @torch.no_grad()
    def collect(self) -> tuple[list[float], list[int], int]:
        """Fill the buffer with ``n_steps`` steps of every environment, the cell state carried
        per environment and zeroed at each episode start, the state each step read stored."""
        sampler, policy, device = self.sampler, self.policy, self.device
        runner = sampler.runner
        log_std = exploration_log_std(policy.log_std, self.config)
        sampler.begin()
        while not sampler.done():
            t = sampler.buffer.pos
            inputs = sampler.observe()
            starts = torch.from_numpy(self.starts).to(device)
            state = self.state * (~starts).to(self.state.dtype)[:, None]
            self.rollout_states[t] = state
            self.rollout_starts[t] = self.starts
            params, values, self.state = policy.step(
                torch.as_tensor(inputs, device=device), state, starts
            )
            actions, log_probs = self.distribution.sample(params, log_std, self.generator)
            # A reset step of autoreset comes next where an episode ended: the observation
            # after it is the first of a new episode.
            resetting = runner.autoreset.copy()
            sampler.record(
                inputs, actions.cpu().numpy(), log_probs.cpu().numpy(), values.cpu().numpy()
            )
            self.starts = resetting
        inputs = torch.as_tensor(sampler.observe(update=False), device=device)
        starts = torch.from_numpy(self.starts).to(device)
        _, last_values, _ = policy.step(inputs, self.state, starts)
        return sampler.finish(last_values.cpu().numpy())

    # -- the update ---------------------------------------------------------------------------

    def update(self) -> dict[str, Any]:
        """PPO's epochs on the rollout's sequences (:func:`rollout_sequences`)."""
        n = self.buffer.pos
        self.sequences = rollout_sequences(
            self.buffer.valid[:n], self.rollout_starts[:n], self.config.window()
        )
        return super().update()

    def minibatches(self, data: dict[str, Any]) -> Any:
        """Minibatches of ``batch_size / window`` random windows: the observations of their
        sequences padded ``(S, L, *obs_shape)`` with the cell states they start from, and
        every other field of the steps they hold, in the order :meth:`forward_minibatch`
        returns them."""
        sequences = self.sequences
        assert sequences is not None
        per_batch = self.config.batch_size // self.config.window()
        order = self.rng.permutation(sequences.n_windows)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order)) // per_batch
        batch_of = rank[sequences.windows]
        states = self.rollout_states[: self.buffer.pos].flatten(0, 1)
        device = data["values"].device
        for number in range(-(-sequences.n_windows // per_batch)):
            rows = np.flatnonzero(batch_of == number)
            if not len(rows):
                continue
            length = int(sequences.lengths[rows].max())
            positions = sequences.positions[rows, :length]
            mask = positions >= 0
            padded = torch.from_numpy(np.where(mask, positions, 0)).to(device)
            steps = torch.from_numpy(positions[mask]).to(device)
            batch = {
                name: tensor.index_select(0, steps)
                for name, tensor in data.items()
                if name != "observations"
            }
            batch["observations"] = data["observations"][padded]
            batch["sequence_mask"] = torch.from_numpy(mask).to(device)
            batch["states"] = states.index_select(
                0, torch.from_numpy(sequences.states[rows]).to(device)
            )
            yield batch

    def forward_minibatch(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The parameters and values of a minibatch's steps: its sequences run through the
        cell from their stored states, the padding dropped."""
        params, values, _ = self.policy(batch["observations"], batch["states"])
        mask = batch["sequence_mask"]
        return params[mask], values[mask]

    # -- acting ---------------------------------------------------------------------------------

    def acting_params(self, inputs: torch.Tensor) -> torch.Tensor:
        """The distribution's parameters for a batch of observations, the cell state of
        evaluation carried from the last call (zeros in new episodes, or when the batch's size
        changed)."""
        state = self.acting_state
        if state is None or state.shape[0] != inputs.shape[0]:
            state = self.policy.initial_state(inputs.shape[0], self.device)
        params, _, self.acting_state = self.policy(inputs[:, None], state)
        return params[:, 0]

    def begin_episodes(self) -> None:
        """Forget the cell state of :meth:`act`: the next observations start new episodes
        (:func:`rlx.evaluate` calls it at every reset)."""
        self.acting_state = None

    # -- checkpoints ----------------------------------------------------------------------------

    def resume_state(self) -> AgentState:
        """PPO's resume state and the environments' cell states and episode starts."""
        state = super().resume_state()
        state.arrays["sampler/cell_state"] = self.state.cpu().numpy().copy()
        state.arrays["sampler/episode_starts"] = self.starts.copy()
        return state

    def load_resume_state(self, state: AgentState) -> None:
        """Restore :meth:`resume_state`; environments that restart their episodes on loading
        (asynchronous ones) start them with zero cell states."""
        super().load_resume_state(state)
        self.state = torch.as_tensor(state.arrays["sampler/cell_state"], device=self.device)
        self.state = self.state.clone()
        self.starts = state.arrays["sampler/episode_starts"].copy()
        if state.meta["sampler"]["envs"] is None:
            self.starts[:] = True
