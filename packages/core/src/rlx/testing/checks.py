"""The agent and environment contracts, as functions that raise AssertionError with a reason."""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rlx.protocols import Agent, AgentState, Iteration

#: How far a batched seed's floats may part from its single run's (:func:`check_seed_batch`,
#: :func:`check_close_states`): ``|single - batched| <= tolerance * max(1, |single|)``,
#: absolute below 1 and relative beyond. The order of operations, hence the rounding, depends
#: on the CPU (crossq's test parted by 1.1e-5 against the former 1e-5 on two machines).
#: Measured by benchmarks/seed_batch_rounding.py (results/seed_batch_rounding.md) on the 35
#: seed-batch test cases that compared within 1e-5, 8 groups of seeds each (the test's own,
#: then fresh ones), x86_64, torch 2.13: 277 of the 280 groups part by at most 7.3e-6 (the
#: tests' own seeds by at most 2.3e-6), and the tolerance is 10 times 7.3e-6, rounded up.
#: Three single groups part further: 2.6e-5 and 3.3e-5, and 1.3e-4 for PPO with the zoo's
#: CartPole settings, seeds 3 to 5, where one sample's ratio fell on the other side of the
#: clip (its clip_fraction differs 65 times beyond check_seed_batch's tolerance for metrics,
#: so no tolerance on the state would pass that group). Ten times those would exceed what
#: training changes in many arrays (each case's least-changed array moves by 5e-5 to 8e-3 in
#: all; the few below 1e-4 are beyond this tolerance's reach already).
SEED_BATCH_TOLERANCE = 1e-4


def same_state(a: AgentState, b: AgentState) -> bool:
    """Whether two agent states hold identical arrays and identical JSON metadata."""
    if a.arrays.keys() != b.arrays.keys():
        return False
    if any(
        not np.array_equal(a.arrays[k], b.arrays[k], equal_nan=_floating(a.arrays[k]))
        for k in a.arrays
    ):
        return False
    return json.dumps(a.meta, sort_keys=True) == json.dumps(b.meta, sort_keys=True)


def state_difference(a: AgentState, b: AgentState, label: str = "state") -> str | None:
    """Where two agent states first differ, in words, or None when :func:`same_state` holds.

    Names the array key (``state.arrays['buffer/observations']``) with its shapes, dtypes or
    first differing index and values, or the path into the JSON metadata
    (``state.meta['rng']['state']``), so that a failed resume check says what was lost.
    """
    only_a, only_b = (
        sorted(a.arrays.keys() - b.arrays.keys()),
        sorted(b.arrays.keys() - a.arrays.keys()),
    )
    if only_a or only_b:
        return (
            f"{label}.arrays keys differ: {only_a} only in the first, {only_b} only in the second"
        )
    for key, x in a.arrays.items():
        difference = _array_difference(x, b.arrays[key])
        if difference is not None:
            return f"{label}.arrays[{key!r}] {difference}"
    return _meta_difference(_as_json(a.meta), _as_json(b.meta), f"{label}.meta")


def _array_difference(x: np.ndarray, y: np.ndarray) -> str | None:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return f"has shape {x.shape} in the first state, {y.shape} in the second"
    if x.dtype != y.dtype:
        return f"has dtype {x.dtype} in the first state, {y.dtype} in the second"
    equal = np.asarray(x == y)
    if _floating(x):
        equal = equal | (np.isnan(x) & np.isnan(y))
    if equal.all():
        return None
    index = tuple(int(i) for i in np.argwhere(~equal)[0])
    where = f"at index {index}" if index else "(a scalar)"
    return (
        f"(shape {x.shape}, {x.dtype}) first differs {where}: {x[index]!r} != {y[index]!r}; "
        f"{int((~equal).sum())} of {x.size} elements differ"
    )


def _as_json(meta: Any) -> Any:
    """Metadata as it is stored (tuples become lists), as :func:`same_state` compares it."""
    return json.loads(json.dumps(meta, sort_keys=True))


def _meta_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return (
                f"{path} keys differ: {sorted(a.keys() - b.keys())} only in the first, "
                f"{sorted(b.keys() - a.keys())} only in the second"
            )
        for key in a:
            difference = _meta_difference(a[key], b[key], f"{path}[{key!r}]")
            if difference is not None:
                return difference
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} has {len(a)} items in the first state, {len(b)} in the second"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            difference = _meta_difference(x, y, f"{path}[{index}]")
            if difference is not None:
                return difference
        return None
    return None if a == b else f"{path} differs: {a!r} != {b!r}"


def _agent_difference(a: Any, b: Any) -> str | None:
    """Where the policy and resume states of two agents (or ``(policy, resume)`` pairs) first
    differ: ``resume_state().arrays['...']`` and so on, or None."""
    first = a if isinstance(a, tuple) else (a.policy_state(), a.resume_state())
    second = b if isinstance(b, tuple) else (b.policy_state(), b.resume_state())
    for label, x, y in zip(("policy_state()", "resume_state()"), first, second, strict=True):
        difference = state_difference(x, y, label)
        if difference is not None:
            return difference
    return None


def _floating(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating)


def check_agent(
    name: str,
    env: str,
    seed: int = 0,
    iterations: int = 3,
    **config: Any,
) -> None:
    """Check that agent ``name`` keeps the contract the generic trainer relies on, on ``env``.

    - its ``Config`` is a dataclass whose every field says what it means;
    - it satisfies :class:`rlx.protocols.Agent` and ``step()`` returns a sane :class:`Iteration`;
    - ``act`` returns actions inside the action space and does not disturb training; a batch
      of observations gives the batch of their actions, and an observation of a wrong shape
      is one :class:`~rlx.errors.SpaceError` (or ConfigError);
    - ``save`` writes a checkpoint that :func:`rlx.load` rebuilds into an agent that acts the
      same;
    - ``policy_state`` and ``resume_state`` survive a checkpoint round trip (safetensors +
      JSON); the policy alone reproduces the agent's greedy actions; training resumed from
      both continues exactly like an uninterrupted run;
    - the same seed gives the same run.
    """
    from rlx.api import agent_spec, copy_env, load, make
    from rlx.checkpoint import load_checkpoint, save_checkpoint
    from rlx.evaluation import evaluate

    spec = agent_spec(name)
    agent_cls = spec.load()
    config_cls = getattr(agent_cls, "Config", None)
    assert config_cls is not None and dataclasses.is_dataclass(config_cls), (
        f"{name}: the agent class needs a dataclass attribute `Config` of hyperparameters"
    )
    for f in dataclasses.fields(config_cls):
        assert f.metadata.get("help"), (
            f"{name}: hyperparameter {f.name!r} has no help text; "
            "declare it with rlx.hyperparameter()"
        )

    agent = make(name, env, seed=seed, **config)
    missing = [member for member in _AGENT_MEMBERS if not hasattr(agent, member)]
    assert isinstance(agent, Agent), (
        f"{name}: {type(agent).__name__} does not satisfy rlx.protocols.Agent (missing: "
        f"{', '.join(missing)}; save comes with rlx.agents.Saveable)"
    )

    for _ in range(iterations):
        _check_iteration(name, agent.step())

    observation, _ = copy_env(agent.env).reset(seed=seed)
    for deterministic in (True, False):
        _begin_episodes(agent)
        action = agent.act(observation, deterministic=deterministic)
        assert agent.env.action_space.contains(_as_space_value(action, agent.env.action_space)), (
            f"{name}: act() returned {action!r}, outside the action space {agent.env.action_space}"
        )

    _check_batches(name, agent, _observations(agent.env, seed))

    policy, resume = agent.policy_state(), agent.resume_state()
    _check_state(name, policy, "policy_state")
    _check_state(name, resume, "resume_state")
    with tempfile.TemporaryDirectory() as tmp:
        save_checkpoint(Path(tmp) / "checkpoint", policy, resume)
        loaded = load_checkpoint(Path(tmp) / "checkpoint")
    assert loaded.resume is not None
    assert same_state(policy, loaded.policy) and same_state(resume, loaded.resume), (
        f"{name}: the agent's state changed through a checkpoint round trip"
    )

    # The policy alone must reproduce the agent's greedy actions (best/ holds nothing else).
    observations = _observations(agent.env, seed)
    expected = _greedy_actions(agent, observations)
    acting = make(name, env, seed=seed + 1, **config)
    acting.load_policy_state(loaded.policy)
    actions = _greedy_actions(acting, observations)
    assert all(np.array_equal(a, b) for a, b in zip(expected, actions, strict=True)), (
        f"{name}: an agent given only policy_state() acts differently from the agent it came "
        f"from ({_action_difference(expected, actions)}; does acting need something that is "
        "only in resume_state()?)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        saved = agent.save(Path(tmp) / "saved")
        reloaded = load(saved, trust_code=True)  # the author's own code: trusted
    actions = _greedy_actions(reloaded, observations)
    assert all(np.array_equal(a, b) for a, b in zip(expected, actions, strict=True)), (
        f"{name}: the agent that rlx.load rebuilt from agent.save() acts differently "
        f"({_action_difference(expected, actions)})"
    )

    # The uninterrupted run also evaluates in between: evaluation must not touch training.
    evaluate(agent, copy_env(agent.env), episodes=2, seed=seed)
    for _ in range(iterations):
        agent.step()
    uninterrupted = whole_state(agent)

    resumed = make(name, env, seed=seed, **config)
    resumed.load_policy_state(loaded.policy)
    resumed.load_resume_state(loaded.resume)
    not_restored = _agent_difference((loaded.policy, loaded.resume), resumed)
    for _ in range(iterations):
        resumed.step()
    if not same_state(uninterrupted, whole_state(resumed)):
        where = _agent_difference(agent, resumed)
        hint = (
            f" Right after loading the checkpoint, the resumed agent already differed: "
            f"{not_restored} (the saved state first, the loaded agent's second), so "
            "load_policy_state() or load_resume_state() does not restore it."
            if not_restored
            else ""
        )
        raise AssertionError(
            f"{name}: training resumed from a checkpoint diverged from the uninterrupted run "
            f"within {iterations} iterations: {where} (the uninterrupted run first, the resumed "
            f"one second).{hint} Is every RNG, the environment's included, in resume_state()? "
            "Does act() or evaluation draw from the training RNG?"
        )

    twin = make(name, env, seed=seed, **config)
    for _ in range(2 * iterations):
        twin.step()
    assert same_state(uninterrupted, whole_state(twin)), (
        f"{name}: two runs with seed {seed} differ: {_agent_difference(agent, twin)}"
    )


_AGENT_MEMBERS = (
    "Config",
    "config",
    "env",
    "seed",
    "step",
    "act",
    "save",
    "policy_state",
    "load_policy_state",
    "resume_state",
    "load_resume_state",
)


def _check_batches(name: str, agent: Any, observations: list[Any]) -> None:
    """A batch of observations gives the batch of their actions (each as ``act`` gives it
    alone, the random number streams reseeded alike); a wrong shape is one clear error."""
    from gymnasium import spaces
    from gymnasium.vector.utils import concatenate, create_empty_array

    from rlx.errors import ConfigError, SpaceError
    from rlx.protocols import SeedsEvaluation

    space = agent.env.observation_space
    empty: Any = create_empty_array(space, len(observations))
    batch = concatenate(space, observations, empty)
    if isinstance(agent, SeedsEvaluation):
        agent.seed_evaluation(0)
    _begin_episodes(agent)
    actions = agent.act(batch, deterministic=True)
    if isinstance(agent, SeedsEvaluation):
        agent.seed_evaluation(0)
    singles = []
    for observation in observations:  # each the first of an episode, as in the batch
        _begin_episodes(agent)
        singles.append(agent.act(observation, deterministic=True))
    action_space = agent.env.action_space
    for index, single in enumerate(singles):
        row = _row(actions, index)
        assert action_space.contains(_as_space_value(row, action_space)), (
            f"{name}: act() on a batch of {len(observations)} observations returned {actions!r}, "
            f"whose row {index} is outside the action space {action_space} (a batch of n "
            "observations gives n actions, leading axis n)"
        )
        same = (
            np.allclose(row, single, rtol=1e-5, atol=1e-6)
            if _floating(np.asarray(single))
            else np.array_equal(row, single)
        )
        assert same, (
            f"{name}: act() on a batch gave {row!r} for observation {index}, act() on it alone "
            f"{single!r}"
        )
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        wrong = np.zeros((*(space.shape or ()), 2, 2), dtype=space.dtype)
        try:
            agent.act(wrong)
        except (SpaceError, ConfigError):
            pass
        else:
            raise AssertionError(
                f"{name}: act() took an observation of shape {wrong.shape} for the observation "
                f"space {space} without an error (use rlx.spaces.observation_batch)"
            )


def _begin_episodes(agent: Any) -> None:
    """Tell an agent that carries state across an episode's steps
    (:class:`~rlx.protocols.ActsInEpisodes`) that its next observation starts an episode, as
    :func:`rlx.evaluate` does at each reset."""
    from rlx.protocols import ActsInEpisodes

    if isinstance(agent, ActsInEpisodes):
        agent.begin_episodes()


def _action_difference(expected: list[Any], actions: list[Any]) -> str:
    """The first observation whose two actions differ, in words."""
    for index, (a, b) in enumerate(zip(expected, actions, strict=True)):
        if not np.array_equal(a, b):
            return f"observation {index} of {len(expected)}: {a!r} first, {b!r} second"
    return "no single action differs"


def _row(actions: Any, index: int) -> Any:
    if isinstance(actions, dict):
        return {key: _row(value, index) for key, value in actions.items()}
    if isinstance(actions, tuple):
        return tuple(_row(value, index) for value in actions)
    return actions[index]


def whole_state(agent: Any) -> AgentState:
    """An agent's policy and resume parts in one state (arrays prefixed ``policy/`` and
    ``resume/``), to compare two agents with :func:`same_state`."""
    parts = {"policy": agent.policy_state(), "resume": agent.resume_state()}
    return AgentState(
        arrays={f"{p}/{k}": v for p, state in parts.items() for k, v in state.arrays.items()},
        meta={p: state.meta for p, state in parts.items()},
    )


def transfer_state(source: Any, target: Any) -> None:
    """Load ``source``'s policy and resume state into ``target`` (without a checkpoint)."""
    target.load_policy_state(source.policy_state())
    target.load_resume_state(source.resume_state())


def _greedy_actions(agent: Any, observations: list[Any]) -> list[Any]:
    """``act(deterministic=True)`` on each observation, an agent that acts at random
    reseeded before each (so two agents with the same policy give the same actions)."""
    from rlx.protocols import SeedsEvaluation

    actions = []
    for index, observation in enumerate(observations):
        if isinstance(agent, SeedsEvaluation):
            agent.seed_evaluation(index)
        _begin_episodes(agent)
        actions.append(agent.act(observation, deterministic=True))
    return actions


def _observations(env: Any, seed: int, count: int = 5) -> list[Any]:
    """A few observations of a fresh copy of ``env`` under random actions."""
    from rlx.api import copy_env

    probe = copy_env(env)
    probe.action_space.seed(seed)
    observation, _ = probe.reset(seed=seed)
    observations = [observation]
    while len(observations) < count:
        observation, _, terminated, truncated, _ = probe.step(probe.action_space.sample())
        if terminated or truncated:
            observation, _ = probe.reset()
        observations.append(observation)
    return observations


def _check_iteration(name: str, iteration: Any) -> None:
    assert isinstance(iteration, Iteration), f"{name}: step() must return rlx.protocols.Iteration"
    assert isinstance(iteration.env_steps, (int, np.integer)) and iteration.env_steps >= 0, (
        f"{name}: Iteration.env_steps must be a non-negative int, got {iteration.env_steps!r}"
    )
    assert len(iteration.episode_returns) == len(iteration.episode_lengths), (
        f"{name}: Iteration.episode_returns and episode_lengths differ in length"
    )
    for key, value in iteration.metrics.items():
        assert isinstance(value, (int, float, np.number)) and math.isfinite(float(value)), (
            f"{name}: metric {key!r} must be a finite number, got {value!r}"
        )


def _check_state(name: str, state: Any, method: str) -> None:
    assert isinstance(state, AgentState), f"{name}: {method}() must return rlx.protocols.AgentState"
    for key, value in state.arrays.items():
        assert isinstance(value, np.ndarray) and value.dtype != object, (
            f"{name}: state array {key!r} must be a numeric numpy array"
        )
    try:
        json.dumps(state.meta)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{name}: {method}().meta is not JSON-serialisable: {exc}") from exc


def _as_space_value(action: Any, space: Any) -> Any:
    if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        return np.int64(action)
    return action


def check_env(env: Any, seed: int = 0, steps: int = 200) -> None:
    """Check a gymnasium environment: gymnasium's own checker, then seeded determinism.

    Two copies reset with the same seed and driven by the same actions must produce the
    same observations, rewards and flags, and every observation must lie in the space.
    """
    import gymnasium
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    gymnasium_check_env(env.unwrapped, skip_render_check=True)
    twin = gymnasium.make(env.spec) if env.spec is not None else None
    actions = env.action_space
    actions.seed(seed)
    trace = []
    observation, _ = env.reset(seed=seed)
    for _ in range(steps):
        assert env.observation_space.contains(observation), (
            f"observation {observation!r} is outside {env.observation_space}"
        )
        action = actions.sample()
        observation, reward, terminated, truncated, _ = env.step(action)
        assert isinstance(reward, (int, float, np.number)), (
            f"reward must be a number, got {reward!r}"
        )
        trace.append((action, observation, float(reward), terminated, truncated))
        if terminated or truncated:
            observation, _ = env.reset()
            trace.append(("reset", observation, 0.0, False, False))
    if twin is None:
        return
    observation, _ = twin.reset(seed=seed)
    for action, expected, reward, terminated, truncated in trace:
        if isinstance(action, str):
            observation, _ = twin.reset()
        else:
            observation, reward2, terminated2, truncated2, _ = twin.step(action)
            assert (reward2, terminated2, truncated2) == (reward, terminated, truncated), (
                "the same seed and actions gave different rewards or episode ends"
            )
        assert np.array_equal(np.asarray(observation), np.asarray(expected)), (
            "the same seed and actions gave different observations"
        )


def check_seed_batch(
    agent: str,
    env: str,
    seeds: tuple[int, ...] = (0, 1, 2),
    iterations: int = 5,
    tolerance: float = SEED_BATCH_TOLERANCE,
    **hyperparameters: Any,
) -> None:
    """Check that ``agent``'s seed batch (:class:`rlx.protocols.BatchesSeeds`) trains each
    seed as its single run: ``seeds`` made with ``hyperparameters``, stepped ``iterations``
    times alone and, made again, as one batch stepped in rounds. Then every seed's whole
    state (policy and resume parts: weights, optimiser moments, targets, buffers, counters,
    random streams) must match its single run's: floating-point arrays within ``tolerance``
    (relative to the value where it is beyond 1: the batch changes the order of
    operations, not the arithmetic), everything else
    exactly; and so must its iterations (steps and episodes; returns and metrics within a
    relative 1e-3)."""
    import rlx

    def made() -> list[Any]:
        agents = [rlx.make(agent, env, seed=seed, **hyperparameters) for seed in seeds]
        for one in agents:
            if hasattr(one, "set_training_budget"):
                one.set_training_budget(iterations * 10_000)
        return agents

    alone = made()
    single = [[one.step() for _ in range(iterations)] for one in alone]
    together = made()
    type(together[0]).seed_batch(together)
    batched: list[list[Iteration]] = [[] for _ in seeds]
    for _ in range(iterations):
        for k, one in enumerate(together):
            batched[k].append(one.step())
    for k, seed in enumerate(seeds):
        where = f"{agent} seed {seed}"
        for a, b in zip(single[k], batched[k], strict=True):
            assert a.env_steps == b.env_steps, f"{where}: {a.env_steps} != {b.env_steps} steps"
            assert a.episode_lengths == b.episode_lengths, f"{where}: other episodes"
            assert np.allclose(a.episode_returns, b.episode_returns, rtol=1e-5), where
            assert a.metrics.keys() == b.metrics.keys(), f"{where}: other metrics"
            for name, value in a.metrics.items():
                assert math.isclose(value, b.metrics[name], rel_tol=1e-3, abs_tol=1e-4), (
                    f"{where}: metric {name} {b.metrics[name]} != {value}"
                )
        check_close_states(alone[k], together[k], tolerance, where)


def check_close_states(
    a: Any, b: Any, tolerance: float = SEED_BATCH_TOLERANCE, where: str = "agent"
) -> None:
    """Assert that agents ``a`` and ``b`` hold the same whole state (:func:`whole_state`):
    floating-point arrays and numbers within ``tolerance`` (relative to the value where it
    is beyond 1), everything else exactly. What a seed batch promises of each seed against
    its single run: the same arithmetic in another order."""
    first, second = whole_state(a), whole_state(b)
    assert first.arrays.keys() == second.arrays.keys(), f"{where}: other arrays"
    for key, value in first.arrays.items():
        other = second.arrays[key]
        if _floating(value):  # within tolerance, relative to the value beyond 1
            gap = np.abs(value - other) / np.maximum(1.0, np.abs(value))
            worst = float(np.max(gap, initial=0.0))
            assert worst <= tolerance, f"{where}: {key} differs by {worst} > {tolerance}"
        else:
            assert np.array_equal(value, other), f"{where}: {key} {_array_difference(value, other)}"
    _check_close_meta(first.meta, second.meta, tolerance, f"{where}: state")


def _check_close_meta(a: Any, b: Any, tolerance: float, where: str) -> None:
    """JSON metadata equal but for floats, which may differ by ``tolerance`` relative
    (learning rates from per-seed schedules in float32, statistics of normalisers)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            _check_close_meta(a[key], b[key], tolerance, f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _check_close_meta(x, y, tolerance, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance), f"{where}: {b} != {a}"
    else:
        assert a == b, f"{where}: {b!r} != {a!r}"
