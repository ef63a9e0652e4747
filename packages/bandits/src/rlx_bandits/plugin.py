"""The plugin manifest of rlx-bandits: specs only, so listing imports no agent and no torch."""

from __future__ import annotations

from collections.abc import Callable

from rlx import AgentSpec, hookimpl

CONTEXT = ("Box",)
ARMS = ("Discrete",)

#: name, "module:Class" target, one-line summary
AGENTS = (
    (
        "epsilon-greedy",
        "rlx_bandits.multi_armed:EpsilonGreedy",
        "multi-armed: random arm with probability epsilon, else the best sample mean",
    ),
    (
        "ucb1",
        "rlx_bandits.multi_armed:UCB1",
        "multi-armed: upper confidence bound mean + sqrt(2 ln t / n) (Auer et al. 2002)",
    ),
    (
        "bayesian-ucb",
        "rlx_bandits.multi_armed:BayesianUCB",
        "multi-armed: upper quantile of the Beta/Gaussian posterior (Kaufmann et al. 2012)",
    ),
    (
        "gradient-bandit",
        "rlx_bandits.multi_armed:GradientBandit",
        "multi-armed: softmax preferences by stochastic gradient ascent (Sutton & Barto 2.8)",
    ),
    (
        "thompson",
        "rlx_bandits.multi_armed:ThompsonSampling",
        "multi-armed: Thompson sampling, Beta-Bernoulli or Gaussian posteriors",
    ),
    (
        "fixed",
        "rlx_bandits.multi_armed:FixedProbabilities",
        "baseline: pulls arms with fixed probabilities, no learning",
    ),
    ("uniform", "rlx_bandits.multi_armed:Uniform", "baseline: uniformly random arms, no learning"),
    (
        "linear-posterior",
        "rlx_bandits.linear:LinearPosterior",
        "contextual: Bayesian linear regression per arm, normal-inverse-gamma prior, sampled",
    ),
    (
        "lin-ucb",
        "rlx_bandits.linear:LinUCB",
        "contextual: ridge regression per arm with an upper confidence bound (Li et al. 2010)",
    ),
    (
        "neural-greedy",
        "rlx_bandits.neural:NeuralGreedy",
        "contextual: a neural network's reward estimates, epsilon-greedy",
    ),
    (
        "dropout",
        "rlx_bandits.neural:Dropout",
        "contextual: a network whose every decision is taken with dropout on (Gal 2016)",
    ),
    (
        "neural-linear",
        "rlx_bandits.neural:NeuralLinear",
        "contextual: Bayesian linear regression on a neural network's last layer",
    ),
    (
        "variational",
        "rlx_bandits.neural:Variational",
        "contextual: Bayes-by-backprop network, one weight sample per decision",
    ),
    (
        "bootstrap",
        "rlx_bandits.neural:Bootstrap",
        "contextual: ensemble of networks on bootstrapped data, one drawn per decision",
    ),
    (
        "param-noise",
        "rlx_bandits.neural:ParamNoise",
        "contextual: network with parameter noise adapted to a KL target",
    ),
)


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    for name, target, summary in AGENTS:
        register(
            AgentSpec(
                name=name,
                target=target,
                family="bandits",
                summary=summary,
                observation_spaces=CONTEXT,
                action_spaces=ARMS,
            )
        )
