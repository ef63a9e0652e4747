"""Invalid-action masking (``action_masks``, ``maskable-ppo``): the masked categorical against a
hand calculation, masks in acting, in the rollout and in evaluation, the refusals, exact resume,
and learning on rlx/MaskedPick-v0 where unmasked PPO fails."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError, SpaceError
from rlx.evaluation import evaluate
from rlx.nn.distributions import Categorical, MultiCategorical
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx_onpolicy.masks import apply_masks, apply_masks_numpy, checked_masks

SMALL = {"n_envs": 2, "n_steps": 16, "batch_size": 16, "n_epochs": 2}


class MultiMasked(gym.Env):
    """MultiDiscrete([3, 4]) actions, one valid action in each component (reward 1 when both
    are taken, else -1 and the end); the valid ones move with the step count."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3, 4])
        self.t = 0

    def action_masks(self) -> np.ndarray:
        mask = np.zeros(7, bool)
        mask[self.t % 3] = True
        mask[3 + self.t % 4] = True
        return mask

    def _observation(self) -> np.ndarray:
        return np.array([self.t % 3 / 3, self.t % 4 / 4], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action):
        good = int(action[0]) == self.t % 3 and int(action[1]) == self.t % 4
        self.t += 1
        return self._observation(), 1.0 if good else -1.0, not good, self.t >= 10, {}


def test_masked_categorical_matches_a_hand_calculation():
    logits = torch.tensor([[1.0, 2.0, 3.0, 0.5]])
    mask = torch.tensor([[True, False, True, False]])
    masked = apply_masks(logits, mask)
    log_prob, entropy = Categorical(4).log_prob_entropy(masked, None, torch.tensor([2]))
    # softmax over the valid logits 1 and 3 alone
    p1, p3 = math.exp(1) / (math.exp(1) + math.exp(3)), math.exp(3) / (math.exp(1) + math.exp(3))
    assert log_prob.item() == pytest.approx(math.log(p3), rel=1e-6)
    assert entropy.item() == pytest.approx(-(p1 * math.log(p1) + p3 * math.log(p3)), rel=1e-6)
    assert Categorical(4).mode(masked).item() == 2
    numpy_masked = apply_masks_numpy(logits.numpy(), mask.numpy())
    assert np.array_equal(numpy_masked, masked.numpy())
    # The gradient reaches the valid logits only.
    logits.requires_grad_(True)
    Categorical(4).log_prob_entropy(apply_masks(logits, mask), None, torch.tensor([0]))[
        0
    ].backward()
    assert logits.grad[0, 1] == 0 and logits.grad[0, 3] == 0 and logits.grad[0, 0] != 0


def test_masked_multicategorical_entropy_is_over_each_components_valid_actions():
    logits = torch.zeros(1, 7)
    mask = torch.tensor([[True, True, False, True, False, False, False]])
    masked = apply_masks(logits, mask)
    distribution = MultiCategorical([3, 4])
    log_prob, entropy = distribution.log_prob_entropy(masked, None, torch.tensor([[1, 0]]))
    assert log_prob.item() == pytest.approx(math.log(0.5), rel=1e-6)  # 1/2 * 1
    assert entropy.item() == pytest.approx(math.log(2), rel=1e-6)  # log 2 + log 1
    assert distribution.mode(masked).tolist() == [[0, 0]]


def test_bad_masks_are_one_clear_error():
    with pytest.raises(SpaceError, match="do not fit"):
        checked_masks(np.ones(5, bool), 1, [4])
    with pytest.raises(SpaceError, match="no valid action"):
        checked_masks(np.zeros((2, 4), bool), 2, [4])
    with pytest.raises(SpaceError, match="component 1"):
        checked_masks(np.array([True, False, False, False, False]), 1, [3, 2])
    assert checked_masks([[1, 0, 1]], 1, [3]).dtype == bool


def test_sampling_never_picks_an_invalid_action_and_the_rollout_keeps_the_masks():
    agent = rlx.make("maskable-ppo", "rlx/MaskedPick-v0", seed=0, **SMALL)
    seen = []
    record = agent.sampler.record

    def spy(inputs, actions, log_probs, values, masks=None):
        seen.append((actions.copy(), masks.copy()))
        record(inputs, actions, log_probs, values, masks)

    agent.sampler.record = spy
    iteration = agent.step()
    assert seen and not iteration.episode_returns  # no invalid action: no episode ended early
    for actions, masks in seen:
        assert masks[np.arange(len(actions)), actions].all()
    stored = agent.buffer.flat()
    assert stored["action_masks"].shape == (32, 16)
    assert stored["action_masks"][torch.arange(32), stored["actions"]].all()


def test_multidiscrete_masks_in_acting_and_learning():
    agent = rlx.make(
        "ppo", MultiMasked(), seed=0, action_masks=True, n_envs=1, n_steps=32, batch_size=32
    )
    iteration = agent.step()
    # Every episode runs its 10 steps: no component ever took an invalid action.
    assert iteration.episode_returns and all(r == 10.0 for r in iteration.episode_returns)
    env = MultiMasked()
    observation, _ = env.reset(seed=0)
    env.t = 5
    action = agent.act(observation, action_masks=env.action_masks())
    assert action.tolist() == [2, 1]


def test_greedy_act_picks_the_best_valid_action_and_evaluation_passes_the_masks():
    agent = rlx.make("maskable-ppo", "rlx/MaskedPick-v0", seed=0, **SMALL)
    observation = np.linspace(0.0, 1.0, 16, dtype=np.float32)
    params, _ = agent.policy(torch.as_tensor(observation[None]))
    order = params[0].argsort(descending=True).tolist()
    mask = np.zeros(16, bool)
    mask[order[3]] = mask[order[7]] = True
    assert agent.act(observation, action_masks=mask) == order[3]
    batch = agent.act(np.stack([observation] * 3), action_masks=np.stack([mask] * 3))
    assert batch.tolist() == [order[3]] * 3
    # rlx.evaluate gives the agent the environment's masks: no episode ends on an invalid one.
    result = evaluate(agent, gym.make("rlx/MaskedPick-v0"), episodes=5)
    assert result.lengths == (20,) * 5
    vector = gym.make_vec("rlx/MaskedPick-v0", 3, vectorization_mode="sync")
    assert evaluate(agent, vector, episodes=4).lengths == (20,) * 4


def test_an_environment_without_masks_is_refused_with_one_message(tmp_path, monkeypatch, capsys):
    with pytest.raises(ConfigError, match="action_masks\\(\\) method") as refused:
        rlx.make("maskable-ppo", "CartPole-v1", **SMALL)
    assert 'info["action_mask"]' in str(refused.value)  # both ways of giving masks are named
    with pytest.raises(ConfigError, match="Box actions have none to mask"):
        rlx.make("ppo", "Pendulum-v1", action_masks=True, **SMALL)
    from rlx.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["run", "a2c", "--env", "CartPole-v1", "--set", "action_masks=true", "--steps", "64"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "action_masks() method" in err and 'info["action_mask"]' in err


def test_maskable_ppo_is_the_ppo_preset_with_masks():
    assert rlx.make("maskable-ppo", "rlx/MaskedPick-v0", **SMALL).config.action_masks
    assert not rlx.make("ppo", "rlx/MaskedPick-v0", **SMALL).config.action_masks


def test_rlx_run_trains_maskable_ppo_seeds_as_one_batch(tmp_path, monkeypatch, capsys):
    """``rlx run maskable-ppo --seeds 0-1`` batches its seeds: no notice of seeds trained one
    by one, and each seed's run never took an invalid action (every episode lasts its 20
    steps; the batched sampler masks each seed's logits with its own environments' masks)."""
    from rlx.cli import main

    monkeypatch.chdir(tmp_path)
    group = tmp_path / "group"
    args = ["run", "maskable-ppo", "--env", "rlx/MaskedPick-v0", "--seeds", "0-1", "--jobs", "1"]
    settings = ["-s", "n_envs=2", "-s", "n_steps=32", "-s", "batch_size=64"]
    with pytest.raises(SystemExit) as exit_:
        main([*args, *settings, "--steps", "256", "--out", str(group)])
    err = capsys.readouterr().err
    assert exit_.value.code == 0, err
    assert "train one by one" not in err
    for seed in (0, 1):
        rows = (group / f"seed-{seed}" / "metrics.csv").read_text().splitlines()
        column = rows[0].split(",").index("train/length_mean")
        lengths = {row.split(",")[column] for row in rows[1:]} - {""}
        assert lengths == {"20"}, lengths


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("maskable-ppo", SMALL),
        ("a2c", {"n_envs": 2, "action_masks": True}),
        # masks in the info alone: exact resume needs the latest info's masks in the state
        ("maskable-ppo", {**SMALL, "env_kwargs": {"mask_in_info": True}}),
    ],
)
def test_check_agent_with_masks(name, settings):
    check_agent(name, "rlx/MaskedPick-v0", **settings)


def _train(name, steps, target=None, **config):
    agent = rlx.make(name, "rlx/MaskedPick-v0", seed=0, **config)
    assert hasattr(agent.env.unwrapped, "action_masks") != bool(config.get("env_kwargs"))
    trainer = Trainer(
        agent,
        steps=steps,
        eval_every=5_000,
        eval_episodes=20,
        target_return=target,
        progress=False,
        verbose=False,
        plot=False,
    )
    return trainer.fit()


#: rlx/MaskedPick-v0: a random valid action earns about 10 an episode, the best valid one 15.
LEARN = {"n_envs": 8, "n_steps": 64, "batch_size": 128, "n_epochs": 4, "learning_rate": 1e-3}


def test_masked_ppo_learns_maskedpick_where_unmasked_ppo_fails():
    masked = _train("maskable-ppo", 40_000, target=13.0, **LEARN, ent_coef=0.01)
    assert masked.stop_reason == "target", masked
    unmasked = _train("ppo", 20_000, **LEARN, ent_coef=0.01)
    assert unmasked.final_eval.mean_return < 2.0, unmasked


def test_maskable_ppo_learns_maskedpick_with_the_masks_in_the_info():
    """The environment has no action_masks() method: training and the trainer's evaluations
    read the masks from the infos, and learn as with the method."""
    info = {"env_kwargs": {"mask_in_info": True}}
    result = _train("maskable-ppo", 40_000, target=13.0, **LEARN, ent_coef=0.01, **info)
    assert result.stop_reason == "target", result
    assert result.final_eval.lengths == (20,) * 20  # no invalid action in evaluation


def _valid_actions(vector) -> np.ndarray:
    """What each copy of a synchronous vector of MaskedPick environments holds valid now."""
    return np.stack([env.unwrapped.valid for env in vector.unwrapped.envs])


def test_the_mask_of_each_step_is_the_info_mask_of_its_observation():
    """Step by step, across autoresets (20-step episodes, 3 rollouts of 24 steps): the mask the
    rollout acts under is the valid actions of the observation acted on, which only the infos
    tell; a copy whose next step is an autoreset (its action ignored) gets every action."""
    agent = rlx.make(
        "maskable-ppo",
        "rlx/MaskedPick-v0",
        seed=0,
        env_kwargs={"mask_in_info": True},
        n_envs=2,
        n_steps=24,
        batch_size=48,
        n_epochs=1,
    )
    runner = agent.sampler.runner
    assert not hasattr(runner.envs.unwrapped.envs[0].unwrapped, "action_masks")
    record, seen = agent.sampler.record, []

    def spy(inputs, actions, log_probs, values, masks=None):
        seen.append((masks.copy(), _valid_actions(runner.envs), runner.autoreset.copy()))
        record(inputs, actions, log_probs, values, masks)

    agent.sampler.record = spy
    for _ in range(3):
        agent.step()
    resets = 0
    for masks, valid, autoreset in seen:
        assert np.array_equal(masks[~autoreset], valid[~autoreset])
        assert masks[autoreset].all()
        resets += int(autoreset.sum())
    assert resets == 6  # each copy's episodes ended at steps 20, 41 and 62
    assert agent.sampler.buffer.flat()["action_masks"].sum(-1).eq(3).all()  # stored: 3 valid


def test_info_masks_train_as_the_method_on_asynchronous_environments():
    """Worker processes: whether the copies have an action_masks() method is found without
    asking the workers (a missing method would end them), and masks from the infos train
    exactly as those of the method, before and after the environments are closed and reopened."""
    runs = []
    for env_kwargs in ({"mask_in_info": True}, {}):
        agent = rlx.make(
            "maskable-ppo",
            "rlx/MaskedPick-v0",
            seed=0,
            env_kwargs=env_kwargs,
            vectorization="async",
            **{**SMALL, "batch_size": 32},
        )
        returns = list(agent.step().episode_returns) + list(agent.step().episode_returns)
        agent.sampler.close()
        returns += agent.step().episode_returns
        agent.sampler.close()
        runs.append(returns)
    assert len(runs[0]) >= 2 and runs[0] == runs[1]


def test_evaluation_passes_the_info_masks_of_each_observation():
    """rlx.evaluate on one environment and on a vector of them: the masks the agent gets are
    those of the observations it acts on; sub-environments whose episode ended get every
    action."""
    agent = rlx.make("maskable-ppo", "rlx/MaskedPick-v0", seed=0, **SMALL)
    vector = gym.make_vec("rlx/MaskedPick-v0", 3, vectorization_mode="sync", mask_in_info=True)
    act, checked = agent.act, []

    def spy(observation, deterministic=True, action_masks=None):
        valid = _valid_actions(vector)
        playing = ~action_masks.all(-1)
        assert np.array_equal(action_masks[playing], valid[playing])
        checked.append(int(playing.sum()))
        return act(observation, deterministic=deterministic, action_masks=action_masks)

    agent.act = spy
    result = evaluate(agent, vector, episodes=4)
    assert result.lengths == (20,) * 4 and checked == [3] * 20 + [1] * 20
    del agent.act
    single = gym.make("rlx/MaskedPick-v0", mask_in_info=True)
    assert evaluate(agent, single, episodes=3).lengths == (20,) * 3


def test_action_masks_reads_the_method_first_then_the_info():
    from rlx.evaluation import action_masks

    with_method = gym.make("rlx/MaskedPick-v0")
    _, info = with_method.reset(seed=0)
    info["action_mask"] = np.ones(16, bool)  # the method wins over the info
    assert action_masks(with_method, info).sum() == 3
    in_info = gym.make("rlx/MaskedPick-v0", mask_in_info=True)
    _, info = in_info.reset(seed=0)
    assert np.array_equal(action_masks(in_info, info), in_info.unwrapped.valid)
    assert action_masks(in_info) is None and action_masks(in_info, {}) is None
    vector = gym.make_vec("rlx/MaskedPick-v0", 2, vectorization_mode="sync", mask_in_info=True)
    _, infos = vector.reset(seed=0)
    infos["_action_mask"] = np.array([True, False])  # copy 1 gave no mask
    with pytest.raises(SpaceError, match="copy 1 of the vector environment"):
        action_masks(vector, infos)
    masks = action_masks(vector, infos, ignored=np.array([False, True]))  # copy 1 autoresets
    assert np.array_equal(masks[0], infos["action_mask"][0]) and masks[1].all()


def test_a2c_with_masks_learns_maskedpick():
    result = _train("a2c", 60_000, target=12.0, action_masks=True, n_envs=8, learning_rate=1e-3)
    assert result.stop_reason == "target", result


def test_maskedpick_pays_a_valid_actions_value_and_ends_on_an_invalid_one():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("rlx/MaskedPick-v0")
    check_env(env.unwrapped, skip_render_check=True)
    observation, info = env.reset(seed=3)
    mask = env.unwrapped.action_masks()
    assert mask.sum() == 3 and np.array_equal(info["action_mask"], mask)
    best = int(np.flatnonzero(mask)[np.argmax(observation[mask])])
    _, reward, terminated, _, _ = env.step(best)
    assert reward == pytest.approx(observation[best]) and not terminated
    invalid = int(np.flatnonzero(~env.unwrapped.action_masks())[0])
    _, reward, terminated, _, _ = env.step(invalid)
    assert reward == -1.0 and terminated
