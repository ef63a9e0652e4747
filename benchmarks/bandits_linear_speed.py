"""Decisions + updates per second of rlx's linear-posterior against refitting at every update.

On two UCI classification bandits (one arm per class, reward 1 for the right class, features
standardised as in Riquelme et al. 2018) each variant makes ``--steps`` decisions and
updates, Thompson sampling from a per-arm Bayesian linear regression with the same
normal-inverse-gamma prior (lambda_prior 0.25, a0 = b0 = 6, intercept, 2 initial pulls per
arm):

- ``rlx``: ``rlx.make("linear-posterior", ...)``; each update changes the pulled arm's
  posterior by a rank-one (Sherman-Morrison) step, and each decision draws every arm's
  ``beta . x`` directly from its normal-inverse-gamma posterior;
- ``refit``: the peer approach (the Showdown's ``LinearFullPosteriorSampling`` and GenRL's
  ``LinearPosteriorAgent``): each update recomputes the pulled arm's precision ``lambda I +
  X^T X`` from all its data and inverts it; each decision draws a full weight vector per arm
  with ``multivariate_normal``. Written here in NumPy float64 (GenRL uses torch float32 and
  scipy's invgamma; NumPy is the faster of the two at these sizes). The draw is NumPy's
  default, by SVD (LAPACK ``gesdd``), as in both peers. While an arm has ``n < d + 1`` rows its
  covariance has a ``(d + 1 - n)``-fold eigenvalue, on which ``gesdd`` now and then fails to
  converge ("SVD did not converge": a few of a Covertype run's 70,000 draws, in some seeds;
  which ones depends on the rounding, so on the OpenBLAS kernel). The peers then draw from
  N(0, I); this draws the same N(mu, cov) by Cholesky instead and counts it
  (``refit_svd_failures``);
- ``refit_scalar_draw``: ``refit`` with rlx's decision, which isolates what the incremental
  update alone is worth.

Data: Statlog (Shuttle) ``shuttle.trn`` (43,500 x 9, 7 arms) and the 10,000-row Covertype
sample (54 features, 7 arms) from ``shared/data/uci``, read directly: the benchmark times the
agents, not an environment. Rows are shuffled with the repeat's seed. Variants run alternately,
``--repeats`` times; the median rate is reported. A check replays the ``refit`` run's data
through rlx's incremental posterior and reports the largest difference of the final posterior
means (same arithmetic up to rounding). Single-threaded BLAS (the machines have 2 cores).

    python benchmarks/bandits_linear_speed.py [--steps 10000] [--repeats 3]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.spaces import Box, Discrete  # noqa: E402

import rlx  # noqa: E402
from rlx.runs import package_versions  # noqa: E402
from rlx_bandits.linear import LinearPosteriorConfig, NormalInverseGammaRegressions  # noqa: E402

DATA = Path(os.environ.get("RLX_UCI_DATA", Path(__file__).parents[1] / "shared/data/uci"))
if not DATA.exists():
    DATA = Path("/work/shared/data/uci")
RESULTS = Path(__file__).parent / "results" / "bandits_linear_speed.json"
CONFIG = LinearPosteriorConfig()


def load_statlog() -> tuple[np.ndarray, np.ndarray]:
    """Features ``(43500, 9)`` and 0-based classes ``(43500,)`` of ``shuttle.trn``."""
    with gzip.open(DATA / "shuttle" / "shuttle.trn.gz", "rt") as file:
        table = np.loadtxt(file)
    return table[:, :-1], table[:, -1].astype(np.int64) - 1


def load_covertype() -> tuple[np.ndarray, np.ndarray]:
    """Features ``(10000, 54)`` and 0-based classes ``(10000,)`` of the Covertype sample."""
    with gzip.open(DATA / "covtype" / "covtype_sample10k.csv.gz", "rt") as file:
        table = np.loadtxt(file, delimiter=",", skiprows=1)
    return table[:, :-1], table[:, -1].astype(np.int64) - 1


DATASETS = {"statlog": load_statlog, "covertype": load_covertype}


def standardise(features: np.ndarray) -> np.ndarray:
    std = features.std(axis=0)
    return (features - features.mean(axis=0)) / np.where(std > 0, std, 1.0)


class ClassificationBandit(gymnasium.Env):
    """Spaces only: the benchmark calls ``select`` and ``update`` itself."""

    def __init__(self, context_dim: int, n_arms: int) -> None:
        self.observation_space = Box(-np.inf, np.inf, (context_dim,), np.float64)
        self.action_space = Discrete(n_arms)


class RefitPosteriorSampling:
    """Per-arm Bayesian linear regression refitted from all of the arm's data at each update."""

    def __init__(self, context_dim: int, n_arms: int, steps: int, seed: int, scalar_draw: bool):
        dim = context_dim + 1
        self.n_arms, self.scalar_draw = n_arms, scalar_draw
        self.rng = np.random.default_rng(seed)
        self.x = np.zeros((n_arms, steps, dim))
        self.y = np.zeros((n_arms, steps))
        self.counts = np.zeros(n_arms, dtype=np.int64)
        self.order: list[tuple[int, int]] = []
        self.mu = np.zeros((n_arms, dim))
        self.cov = np.repeat(np.eye(dim)[None] / CONFIG.lambda_prior, n_arms, axis=0)
        self.a = np.full(n_arms, CONFIG.a0)
        self.b = np.full(n_arms, CONFIG.b0)
        self.svd_failures = 0

    def draw(self, mean: np.ndarray, cov: np.ndarray) -> np.ndarray:
        """``multivariate_normal`` by SVD as the peers draw it; by Cholesky (the same
        distribution) where LAPACK's SVD fails to converge on a repeated eigenvalue."""
        try:
            return self.rng.multivariate_normal(mean, cov)
        except np.linalg.LinAlgError:
            self.svd_failures += 1
            return self.rng.multivariate_normal(mean, cov, method="cholesky")

    def select(self, context: np.ndarray) -> int:
        pulls = int(self.counts.sum())
        if pulls < self.n_arms * CONFIG.initial_pulls:
            return pulls % self.n_arms
        x = np.append(context, 1.0)
        sigma2 = self.b / self.rng.standard_gamma(self.a)
        if self.scalar_draw:
            spread = np.sqrt(sigma2 * ((self.cov @ x) @ x))
            values = self.mu @ x + spread * self.rng.standard_normal(self.n_arms)
        else:
            beta = np.stack(
                [self.draw(self.mu[arm], sigma2[arm] * self.cov[arm]) for arm in range(self.n_arms)]
            )
            values = beta @ x
        return int(np.argmax(values))

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        n = self.counts[action]
        self.x[action, n, :-1] = context
        self.x[action, n, -1] = 1.0
        self.y[action, n] = reward
        self.counts[action] = n + 1
        self.order.append((action, int(n)))
        x, y = self.x[action, : n + 1], self.y[action, : n + 1]
        precision = CONFIG.lambda_prior * np.eye(x.shape[1]) + x.T @ x
        self.cov[action] = np.linalg.inv(precision)
        self.mu[action] = self.cov[action] @ (x.T @ y)
        self.a[action] = CONFIG.a0 + 0.5 * (n + 1)
        self.b[action] = CONFIG.b0 + 0.5 * (y @ y - self.mu[action] @ precision @ self.mu[action])

    def incremental_difference(self) -> float:
        """Largest |difference| of posterior means after replaying this run's data through
        rlx's incremental posterior."""
        posterior = NormalInverseGammaRegressions(
            self.n_arms, self.x.shape[2], CONFIG.lambda_prior, CONFIG.a0, CONFIG.b0
        )
        for arm, row in self.order:
            posterior.update(arm, self.x[arm, row], float(self.y[arm, row]))
        return float(np.abs(posterior.mean - self.mu).max())


def run(policy: Any, contexts: np.ndarray, labels: np.ndarray, steps: int) -> tuple[float, float]:
    """Seconds for ``steps`` decisions and updates, and the fraction of correct arms."""
    correct = 0
    start = time.perf_counter()
    for t in range(steps):
        row = t % len(labels)
        context = contexts[row]
        action = policy.select(context)
        reward = float(action == labels[row])
        policy.update(context, action, reward)
        correct += int(reward)
    return time.perf_counter() - start, correct / steps


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    variants = ("rlx", "refit", "refit_scalar_draw")
    results: dict[str, Any] = {
        "benchmark": "linear-posterior decisions + updates per second",
        "steps": args.steps,
        "repeats": args.repeats,
        "hyperparameters": {
            "lambda_prior": CONFIG.lambda_prior,
            "a0": CONFIG.a0,
            "b0": CONFIG.b0,
            "intercept": CONFIG.intercept,
            "initial_pulls": CONFIG.initial_pulls,
        },
        "datasets": {},
    }
    for name, load in DATASETS.items():
        features, labels = load()
        contexts = standardise(features)
        n_arms = int(labels.max()) + 1
        rates: dict[str, list[float]] = {variant: [] for variant in variants}
        accuracy: dict[str, list[float]] = {variant: [] for variant in variants}
        differences, svd_failures = [], []
        for repeat in range(args.repeats):
            order = np.random.default_rng(repeat).permutation(len(labels))
            shuffled, classes = contexts[order], labels[order]
            for variant in variants:
                if variant == "rlx":
                    env = ClassificationBandit(contexts.shape[1], n_arms)
                    policy = rlx.make("linear-posterior", env, seed=repeat)
                else:
                    scalar = variant == "refit_scalar_draw"
                    policy = RefitPosteriorSampling(
                        contexts.shape[1], n_arms, args.steps, repeat, scalar
                    )
                elapsed, right = run(policy, shuffled, classes, args.steps)
                rates[variant].append(args.steps / elapsed)
                accuracy[variant].append(right)
                if variant == "refit":
                    differences.append(policy.incremental_difference())
                    svd_failures.append(policy.svd_failures)
                print(
                    f"{name:>9} repeat {repeat} {variant:>17}: {args.steps / elapsed:9,.0f} "
                    f"steps/s, correct arm {right:.3f}"
                    + (f", {policy.svd_failures} SVD failures" if variant == "refit" else ""),
                    flush=True,
                )
        median = {variant: statistics.median(values) for variant, values in rates.items()}
        results["datasets"][name] = {
            "context_dim": int(contexts.shape[1]),
            "arms": n_arms,
            "rows": len(labels),
            "steps_per_second": median,
            "steps_per_second_all": rates,
            "ratio_rlx_to_refit": median["rlx"] / median["refit"],
            "ratio_rlx_to_refit_scalar_draw": median["rlx"] / median["refit_scalar_draw"],
            "fraction_correct_arm": {v: statistics.mean(a) for v, a in accuracy.items()},
            "max_abs_difference_of_posterior_means_incremental_vs_refit": max(differences),
            "refit_svd_failures": svd_failures,
        }
    results.update(
        machine=machine(),
        versions=package_versions(),
        date=time.strftime("%Y-%m-%d", time.gmtime()),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")

    print(f"\nlinear-posterior, {args.steps:,} decisions + updates, median of {args.repeats}")
    print(f"{'data':>9} | {'d':>3} | {'rlx':>9} | {'refit':>9} | {'ratio':>6} | refit+rlx draw")
    for name, row in results["datasets"].items():
        rate = row["steps_per_second"]
        print(
            f"{name:>9} | {row['context_dim']:>3} | {rate['rlx']:9,.0f} | {rate['refit']:9,.0f} | "
            f"{row['ratio_rlx_to_refit']:6.1f} | {rate['refit_scalar_draw']:9,.0f} "
            f"({row['ratio_rlx_to_refit_scalar_draw']:.1f}x)"
        )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
