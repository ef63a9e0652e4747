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


#: name: where the algorithm comes from (AgentSpec.paper)
PAPERS = {
    "epsilon-greedy": (
        "Sutton & Barto (2018), Reinforcement Learning: An Introduction, 2nd edition, "
        "MIT Press, sections 2.2-2.4"
    ),
    "ucb1": (
        "Auer, Cesa-Bianchi & Fischer (2002), Finite-time Analysis of the Multiarmed "
        "Bandit Problem, Machine Learning 47"
    ),
    "bayesian-ucb": (
        "Kaufmann, Cappé & Garivier (2012), On Bayesian Upper Confidence Bounds for "
        "Bandit Problems, AISTATS"
    ),
    "gradient-bandit": (
        "Sutton & Barto (2018), Reinforcement Learning: An Introduction, 2nd edition, "
        "MIT Press, section 2.8"
    ),
    "thompson": (
        "Thompson (1933), On the Likelihood that One Unknown Probability Exceeds "
        "Another in View of the Evidence of Two Samples, Biometrika 25; Agrawal & Goyal "
        "(2012), Analysis of Thompson Sampling for the Multi-armed Bandit Problem, COLT"
    ),
    "fixed": (
        "Riquelme, Tucker & Snoek (2018), Deep Bayesian Bandits Showdown: An Empirical "
        "Comparison of Bayesian Deep Networks for Thompson Sampling, ICLR (its "
        "fixed-policy baseline)"
    ),
    "uniform": (
        "Riquelme, Tucker & Snoek (2018), Deep Bayesian Bandits Showdown: An Empirical "
        "Comparison of Bayesian Deep Networks for Thompson Sampling, ICLR (its uniform "
        "baseline)"
    ),
    "linear-posterior": (
        "Riquelme, Tucker & Snoek (2018), Deep Bayesian Bandits Showdown: An Empirical "
        "Comparison of Bayesian Deep Networks for Thompson Sampling, ICLR (LinFullPost)"
    ),
    "lin-ucb": (
        "Li, Chu, Langford & Schapire (2010), A Contextual-Bandit Approach to "
        "Personalized News Article Recommendation, WWW"
    ),
    "neural-greedy": (
        "Riquelme, Tucker & Snoek (2018), Deep Bayesian Bandits Showdown: An Empirical "
        "Comparison of Bayesian Deep Networks for Thompson Sampling, ICLR (the greedy "
        "neural baseline)"
    ),
    "dropout": (
        "Gal & Ghahramani (2016), Dropout as a Bayesian Approximation: Representing "
        "Model Uncertainty in Deep Learning, ICML; Riquelme, Tucker & Snoek (2018), "
        "Deep Bayesian Bandits Showdown: An Empirical Comparison of Bayesian Deep "
        "Networks for Thompson Sampling, ICLR"
    ),
    "neural-linear": (
        "Riquelme, Tucker & Snoek (2018), Deep Bayesian Bandits Showdown: An Empirical "
        "Comparison of Bayesian Deep Networks for Thompson Sampling, ICLR "
        "(NeuralLinear); Snoek et al. (2015), Scalable Bayesian Optimization Using Deep "
        "Neural Networks, ICML"
    ),
    "variational": (
        "Blundell, Cornebise, Kavukcuoglu & Wierstra (2015), Weight Uncertainty in "
        "Neural Networks, ICML; Riquelme, Tucker & Snoek (2018), Deep Bayesian Bandits "
        "Showdown: An Empirical Comparison of Bayesian Deep Networks for Thompson "
        "Sampling, ICLR"
    ),
    "bootstrap": (
        "Osband, Blundell, Pritzel & Van Roy (2016), Deep Exploration via Bootstrapped "
        "DQN, NeurIPS; Riquelme, Tucker & Snoek (2018), Deep Bayesian Bandits Showdown: "
        "An Empirical Comparison of Bayesian Deep Networks for Thompson Sampling, ICLR"
    ),
    "param-noise": (
        "Plappert et al. (2018), Parameter Space Noise for Exploration, ICLR; Riquelme, "
        "Tucker & Snoek (2018), Deep Bayesian Bandits Showdown: An Empirical Comparison "
        "of Bayesian Deep Networks for Thompson Sampling, ICLR"
    ),
}


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    """Register the multi-armed and contextual bandit agents."""
    for name, target, summary in AGENTS:
        register(
            AgentSpec(
                name=name,
                target=target,
                family="bandits",
                summary=summary,
                paper=PAPERS[name],
                observation_spaces=CONTEXT,
                action_spaces=ARMS,
            )
        )
