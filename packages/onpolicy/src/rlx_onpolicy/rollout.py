"""The rollout buffer and generalised advantage estimation.

Schulman, Moritz, Levine, Jordan & Abbeel (2016), "High-Dimensional Continuous Control Using
Generalized Advantage Estimation", ICLR::

    delta_t = r_t + gamma * V(s_{t+1}) * (1 - terminated_t) - V(s_t)
    A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}

``terminated`` (the task ended: the next state is worth nothing) and ``truncated`` (a time
limit cut the episode: the next state is worth ``V(s_{t+1})``) are kept apart. Both end the
advantage recursion; only ``terminated`` drops the bootstrap.

The buffer follows gymnasium's default ``NEXT_STEP`` autoreset: the step that ends an
episode returns the episode's final observation, and the next call to ``step`` resets that
environment instead of acting (reward 0). So the value the agent computes at step ``t + 1``
is exactly ``V`` of the final observation, the bootstrap a truncated step ``t`` needs, and
the reset step itself is no transition: it is stored with ``valid = False`` and left out of
every loss.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from rlx.memory import check_allocation


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and value targets (``advantages + values``) for arrays shaped ``(T, n_envs)``.

    ``next_values[t]`` is the value of the observation that step ``t`` returned: the final
    observation when the episode ended there. ``lam=1`` gives Monte Carlo returns minus the
    baseline, ``lam=0`` one-step TD errors.
    """
    not_terminated = 1.0 - terminated.astype(np.float32)
    not_done = 1.0 - (terminated | truncated).astype(np.float32)
    deltas = rewards + gamma * next_values * not_terminated - values
    decay = gamma * lam * not_done
    advantages = np.zeros_like(deltas, dtype=np.float32)
    running = np.zeros(deltas.shape[1:], dtype=np.float32)
    for t in range(len(deltas) - 1, -1, -1):
        running = deltas[t] + decay[t] * running
        advantages[t] = running
    return advantages, advantages + values


class RolloutBuffer:
    """``n_steps`` steps of ``n_envs`` environments, kept per environment (axes ``(T, N)``);
    a longer rollout doubles the steps it holds (:meth:`grow`).

    The sampler writes NumPy arrays (:meth:`add`); the learner reads torch tensors. On the
    CPU the tensors share the arrays' memory, so nothing is copied; on a GPU the arrays are
    copied over once per rollout, in :meth:`finish`. :meth:`finish` also computes advantages
    and returns; :meth:`minibatches` then yields shuffled minibatches of valid transitions.
    """

    FIELDS = ("observations", "actions", "log_probs", "values", "advantages", "returns")

    @staticmethod
    def nbytes_for(n_steps: int, n_envs: int, observation_bytes: int, action_bytes: int) -> int:
        """Bytes of the arrays of a buffer of ``n_steps`` steps of ``n_envs`` environments
        whose observations and actions take ``observation_bytes`` and ``action_bytes`` each:
        what :meth:`__init__` allocates, as a Python integer, before it allocates it."""
        per_step = observation_bytes + action_bytes + 5 * 4 + 3  # 5 float32 and 3 bool fields
        return int(n_steps) * int(n_envs) * per_step

    def __init__(
        self,
        n_steps: int,
        n_envs: int,
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
        device: torch.device,
        mask_width: int = 0,
    ) -> None:
        self.n_steps, self.n_envs, self.device = n_steps, n_envs, device
        shape = (n_steps, n_envs)
        self.arrays = {
            "observations": np.zeros((*shape, *observation_shape), observation_dtype),
            "actions": np.zeros((*shape, *action_shape), action_dtype),
            "log_probs": np.zeros(shape, np.float32),
            "values": np.zeros(shape, np.float32),
            "advantages": np.zeros(shape, np.float32),
            "returns": np.zeros(shape, np.float32),
        }
        if mask_width:
            # The valid actions of each step (action_masks), which the update masks with too.
            self.arrays["action_masks"] = np.ones((*shape, mask_width), bool)
        for name, array in self.arrays.items():
            tensor = torch.from_numpy(array)
            setattr(self, name, tensor if device.type == "cpu" else tensor.to(device))
        self.rewards = np.zeros(shape, np.float32)
        self.terminated = np.zeros(shape, bool)
        self.truncated = np.zeros(shape, bool)
        self.valid = np.ones(shape, bool)
        self.pos = 0

    def add(self, **transition: np.ndarray) -> None:
        """Store one step of every environment (NumPy arrays with leading axis ``n_envs``); a
        full buffer first doubles its steps (:meth:`grow`)."""
        if self.pos == self.n_steps:
            self.grow()
        t, arrays = self.pos, self.arrays
        arrays["observations"][t] = transition["observations"]
        arrays["actions"][t] = transition["actions"]
        arrays["log_probs"][t] = transition["log_probs"]
        arrays["values"][t] = transition["values"]
        if "action_masks" in arrays:
            arrays["action_masks"][t] = transition["action_masks"]
        self.rewards[t] = transition["rewards"]
        self.terminated[t] = transition["terminated"]
        self.truncated[t] = transition["truncated"]
        self.valid[t] = transition["valid"]
        self.pos += 1

    def grow(self) -> None:
        """Double the steps the buffer holds, keeping what it holds: a rollout that lasts until
        enough episodes end (``min_episodes``) has no length known in advance. The memory is
        checked first (:func:`rlx.memory.check_allocation`); the buffer keeps its new size."""
        capacity = 2 * self.n_steps
        observation, action = self.arrays["observations"], self.arrays["actions"]
        nbytes = self.nbytes_for(
            capacity,
            self.n_envs,
            observation[0, 0].nbytes,
            action[0, 0].nbytes,
        )
        check_allocation(
            f"a rollout of {capacity:,} steps of {self.n_envs:,} environments (until "
            "min_episodes episodes end)",
            nbytes,
            "lower min_episodes, or give the environment a time limit",
        )

        def grown(array: np.ndarray) -> np.ndarray:
            bigger = np.zeros((capacity, *array.shape[1:]), array.dtype)
            bigger[: self.n_steps] = array
            return bigger

        self.arrays = {name: grown(array) for name, array in self.arrays.items()}
        for name, array in self.arrays.items():
            tensor = torch.from_numpy(array)
            setattr(self, name, tensor if self.device.type == "cpu" else tensor.to(self.device))
        self.rewards, self.terminated = grown(self.rewards), grown(self.terminated)
        self.truncated, self.valid = grown(self.truncated), grown(self.valid)
        self.n_steps = capacity

    def __len__(self) -> int:
        return int(self.valid[: self.pos].sum())

    def finish(self, last_values: np.ndarray, gamma: float, lam: float) -> None:
        """Advantages and returns of the steps stored; ``last_values`` is V of the observations
        after the last step."""
        arrays, n = self.arrays, self.pos
        values = arrays["values"][:n]
        next_values = np.concatenate([values[1:], last_values[None]], 0)
        arrays["advantages"][:n], arrays["returns"][:n] = gae(
            self.rewards[:n],
            values,
            next_values,
            self.terminated[:n],
            self.truncated[:n],
            gamma,
            lam,
        )
        if self.device.type != "cpu":
            for name, array in arrays.items():
                getattr(self, name)[:n].copy_(torch.from_numpy(array[:n]))

    def reset(self) -> None:
        """Write the next rollout from the first step again (the arrays are overwritten, not
        cleared)."""
        self.pos = 0

    def flat(self) -> dict[str, torch.Tensor]:
        """Every valid transition stored (:data:`FIELDS`, and ``action_masks`` when kept), the
        ``(T, N)`` axes flattened into one."""
        n = self.pos
        index = torch.from_numpy(np.flatnonzero(self.valid[:n].reshape(-1))).to(self.device)
        return {
            name: getattr(self, name)[:n].flatten(0, 1).index_select(0, index)
            for name in self.arrays
        }

    @staticmethod
    def minibatches(
        data: dict[str, torch.Tensor], batch_size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, torch.Tensor]]:
        """One pass over ``data`` (from :meth:`flat`) in random order, ``batch_size`` at a time.

        A minibatch that covers all the data is the data itself: the order of the samples
        does not change a mean.
        """
        n = len(data["values"])
        if batch_size >= n:
            yield data
            return
        order = torch.from_numpy(rng.permutation(n)).to(data["values"].device)
        for start in range(0, n, batch_size):
            index = order[start : start + batch_size]
            yield {name: tensor.index_select(0, index) for name, tensor in data.items()}
