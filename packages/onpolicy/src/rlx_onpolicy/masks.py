"""Invalid-action masking for the categorical policies (``action_masks``; ``maskable-ppo``).

Huang & Ontañón (2022), "A Closer Look at Invalid Action Masking in Policy Gradient
Algorithms", FLAIRS: replacing the logits of the invalid actions by a large negative number
before the softmax gives a policy that never picks them, whose gradient is the gradient of
that masked policy. The same masked logits serve sampling (an invalid action gets
probability 0), the log-probabilities of the update, the entropy (a term of an invalid action
is 0, so it is the entropy over the valid actions) and the greedy action.

A mask holds one flag per action (``True``: valid), for a MultiDiscrete space the flags of
its components one after the other (``sum(nvec)`` of them): the flat layout of the logits,
and sb3-contrib's convention. The environment gives it by an ``action_masks()`` method
(reached through wrappers, and ``call("action_masks")`` on a vector environment), or else in
the info of every reset and step under ``"action_mask"`` (PettingZoo's convention);
:func:`rlx.evaluation.action_masks` reads both, for training and evaluation alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.errors import ConfigError, SpaceError
from rlx.evaluation import action_masks as env_action_masks

#: The logit an invalid action gets: exp of it underflows to 0 in float32, and it stays finite
#: so that ``0 * logit`` in the entropy is 0, not NaN.
MASKED_LOGIT = -1e8


def apply_masks(params: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
    """The logits ``params`` with those of the invalid actions (``masks`` False) replaced by
    :data:`MASKED_LOGIT`; ``params`` as they are when ``masks`` is None."""
    if masks is None:
        return params
    return torch.where(masks, params, params.new_tensor(MASKED_LOGIT))


def apply_masks_numpy(params: np.ndarray, masks: np.ndarray | None) -> np.ndarray:
    """:func:`apply_masks` in NumPy, for the sampler's NumPy forward pass."""
    if masks is None:
        return params
    return np.where(masks, params, np.float32(MASKED_LOGIT)).astype(params.dtype, copy=False)


def checked_masks(masks: Any, rows: int, nvec: list[int]) -> np.ndarray:
    """``masks`` as a bool array ``(rows, sum(nvec))``, or one :class:`~rlx.errors.SpaceError`
    when it has another number of flags or leaves a row (or a MultiDiscrete component of one)
    with no valid action."""
    width = int(sum(nvec))
    array = np.asarray(masks)
    if array.size != rows * width:
        order = "the components one after the other, " if len(nvec) > 1 else ""
        raise SpaceError(
            f"action masks of shape {array.shape} do not fit {rows} observation(s) of an "
            f"action space with {width} actions: give one flag per action (True: valid), "
            f"{order}shape ({width},) per observation"
        )
    array = array.reshape(rows, width).astype(bool, copy=False)
    for start, n in zip(np.cumsum([0, *nvec[:-1]]), nvec, strict=True):
        empty = ~array[:, start : start + n].any(-1)
        if empty.any():
            part = (
                f" in component {nvec.index(n)} ({start}..{start + n - 1})" if len(nvec) > 1 else ""
            )
            raise SpaceError(
                f"an action mask leaves no valid action{part} (observation {int(np.argmax(empty))} "
                "of the batch): every state needs at least one action marked True"
            )
    return array


def mask_widths(distribution: Any) -> list[int]:
    """The actions of each categorical component of ``distribution`` (Discrete: one), or one
    :class:`~rlx.errors.ConfigError` for a Gaussian (Box actions have nothing to mask)."""
    if getattr(distribution, "has_log_std", False):
        raise ConfigError(
            "action_masks masks discrete actions (Discrete, MultiDiscrete); Box actions have "
            "none to mask: drop action_masks"
        )
    return list(getattr(distribution, "nvec", [distribution.param_dim]))


def vector_masks(envs: Any, nvec: list[int], infos: Any, ignored: np.ndarray) -> np.ndarray:
    """The masks of the copies of the vector environment ``envs`` now, ``(n_envs, sum(nvec))``,
    checked (:func:`checked_masks`): from their ``action_masks()`` method, else from ``infos``
    (the latest reset's or step's, :func:`rlx.evaluation.action_masks`); every action valid for
    the ``ignored`` copies, whose next action the environment ignores (NEXT_STEP autoreset).
    One :class:`~rlx.errors.ConfigError` when the environment gives masks neither way."""
    found = env_action_masks(envs, infos, ignored)
    if found is None and ignored.all():  # a final info without masks: no action counts
        found = np.ones((len(ignored), int(sum(nvec))), bool)
    if found is None:
        raise ConfigError(
            "action_masks=true needs the environment's valid actions, and this environment "
            "gives none: add an action_masks() method returning one bool per action "
            "(sb3-contrib's convention, reachable through its wrappers), or return them in the "
            'info of every reset and step as info["action_mask"] (PettingZoo\'s convention); '
            "or drop action_masks"
        )
    return checked_masks(found, int(envs.num_envs), nvec)
