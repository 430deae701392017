"""The model of performance against configuration, the next profiles to run, and the recommendation.

Two Gaussian processes (scikit-learn's, rather than hand-written fitting: kernel hyperparameters by
marginal likelihood, noise learned with a white kernel) over the features of a configuration (its slots,
and the logarithms of its checkpoint interval, memory per slot and managed fraction):

- **capacity per slot**, as the logarithm of max rate ÷ slots. DS2's linear scaling is the prior (a
  constant rate per slot); the process learns how the job departs from it (sublinear scaling, memory
  or checkpoint overhead). Fitted from the profiles and from the job's own epochs at the configuration in
  force;
- **restart time** after a lost TaskManager, as its logarithm, from the profiles that measured one.

Recovery is not modelled on its own: it is the restart plus the catch-up of what the restart replays and
what arrives meanwhile, restart + (interval ÷ 2 + restart) × rate ÷ (max rate − rate) (a failure falls, on
average, half an interval after the last checkpoint), so a longer interval or a smaller margin costs
recovery time as the job's own numbers say.

A configuration is *feasible* when it sustains the forecast rate and recovers within the target. Its
probability of that is estimated from joint draws of both processes' posteriors (seeded: the same
observations give the same answer). The **recommendation** is the cheapest configuration
(:meth:`Configuration.cost`: slots, then memory, then a longer interval) whose probability reaches
``tuning.confidence``. The **next profiles** are chosen by expected improvement under constraints
(Gardner et al., 2014): the cost is known exactly, so a candidate's expected improvement is how much
cheaper it is than the cheapest feasible one so far, times its probability of being feasible.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from autoscaler.tuning.configuration import Configuration


@dataclass(frozen=True)
class Observation:
    """A configuration and what was measured with it (a profile, or an epoch of the job itself)."""

    configuration: Configuration
    max_rate: float | None
    restart_s: float | None
    source: str  # "profile <copy id>" or "epoch <n>"


@dataclass(frozen=True)
class Prediction:
    configuration: Configuration
    max_rate: float
    max_rate_low: float  # at the model's confidence (its lower quantile)
    recovery_s: float | None  # at the mean of both processes (None: no restart measured yet)
    p_rate: float  # probability that it sustains the forecast rate
    p_feasible: float  # ... and recovers within the target
    cost: tuple[int, int, float]


def features(c: Configuration) -> list[float]:
    return [float(c.slots), math.log2(c.checkpoint_interval_s), math.log2(c.memory_per_slot_mb), math.log2(c.managed_fraction)]


@dataclass(frozen=True)
class _Process:
    """A fitted process of a logarithm; its prior mean is the observations' mean (one profile: its own value, so
    capacity per slot is DS2's linear scaling until profiles say otherwise)."""

    model: GaussianProcessRegressor
    mean: float

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mu, sd = self.model.predict(x, return_std=True)
        return mu + self.mean, sd


# The kernel's bounds, in the features' units (one slot; one doubling of an interval, a memory or a fraction) and in
# natural-log units of the modelled value. A length scale below one unit would treat a configuration one doubling away
# as unrelated, above 100 as the same; an amplitude of 0.01-4 lets the value vary a priori between about ±10 % and
# a factor of 7 across the candidates: never certain of what was not measured, never told nothing by a neighbour.
LENGTH_BOUNDS, AMPLITUDE_BOUNDS, NOISE_BOUNDS = (1.0, 100.0), (0.01, 4.0), (1e-6, 0.25)


def _process(x: np.ndarray, y: np.ndarray) -> _Process:
    kernel = ConstantKernel(0.25, AMPLITUDE_BOUNDS) * Matern(length_scale=np.full(x.shape[1], 2.0),
                                                              length_scale_bounds=LENGTH_BOUNDS, nu=2.5) \
        + WhiteKernel(1e-2, NOISE_BOUNDS)  # fmt: skip
    model = GaussianProcessRegressor(kernel=kernel, normalize_y=False, n_restarts_optimizer=2, random_state=0)
    mean = float(np.mean(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # few points: a bound reached is expected, not a fault
        model.fit(x, y - mean)
    return _Process(model, mean)


DRAWS = 400  # posterior draws per candidate: the probability to within about 0.025 (one standard error)


def recovery_time(restart_s: np.ndarray, max_rate: np.ndarray, rate: float, interval_s: float) -> np.ndarray:
    """Restart plus catch-up (see the module docstring); infinite where the job cannot keep up at all."""
    margin = max_rate - rate
    with np.errstate(divide="ignore", invalid="ignore"):
        catch_up = np.where(margin > 0, (interval_s / 2 + restart_s) * rate / margin, np.inf)
    return restart_s + catch_up


def _scalar_costs(predictions: Sequence[Prediction]) -> dict[Configuration, float]:
    """The lexicographic cost as one number, same order: slots, + memory below one slot, + checkpoint work below that."""
    memory_scale = max(p.cost[1] for p in predictions) + 1
    work = {p.configuration: 1 / p.configuration.checkpoint_interval_s for p in predictions}
    work_scale = (max(work.values()) + 1) * memory_scale
    return {p.configuration: p.cost[0] + p.cost[1] / memory_scale + work[p.configuration] / work_scale for p in predictions}


class Model:
    """Both processes, fitted from observations; ``predict`` for any candidate."""

    def __init__(self, observations: Sequence[Observation], forecast_rate: float, recovery_target_s: float,
                 confidence: float) -> None:  # fmt: skip
        self.forecast_rate, self.recovery_target_s, self.confidence = forecast_rate, recovery_target_s, confidence
        rate = [o for o in observations if o.max_rate and o.max_rate > 0]
        restart = [o for o in observations if o.restart_s and o.restart_s > 0]
        self.rate_model = self.restart_model = None
        if rate:
            x = np.array([features(o.configuration) for o in rate])
            y = np.array([math.log(o.max_rate / o.configuration.slots) for o in rate])  # type: ignore[operator]
            self.rate_model = _process(x, y)
        if restart:
            x = np.array([features(o.configuration) for o in restart])
            self.restart_model = _process(x, np.array([math.log(o.restart_s) for o in restart]))  # type: ignore[arg-type]
        self.observed = {o.configuration for o in observations if o.source.startswith("profile")}

    def predict(self, configs: Sequence[Configuration], slots_per_tm: int, floor_mb: int) -> list[Prediction]:
        if not configs:
            return []
        x = np.array([features(c) for c in configs])
        z = float(norm.ppf(self.confidence))
        rng = np.random.default_rng(0)
        unit = rng.standard_normal((2, DRAWS))
        if self.rate_model is not None:
            mu, sd = self.rate_model.predict(x)
        else:
            mu, sd = np.zeros(len(configs)), np.full(len(configs), np.inf)
        if self.restart_model is not None:
            rmu, rsd = self.restart_model.predict(x)
        else:
            rmu, rsd = np.full(len(configs), np.nan), np.zeros(len(configs))
        out = []
        for i, c in enumerate(configs):
            f = self.forecast_rate
            if not math.isfinite(sd[i]):  # nothing measured: as likely as not, and no estimate
                out.append(Prediction(c, 0.0, 0.0, None, 0.5, 0.25, c.cost(slots_per_tm, floor_mb)))
                continue
            rates = np.exp(mu[i] + sd[i] * unit[0]) * c.slots
            p_rate = float(np.mean(rates >= f))
            if math.isnan(rmu[i]):
                recovery, p_feasible = None, p_rate * 0.5  # no restart measured yet: recovery as likely as not
            else:
                restarts = np.exp(rmu[i] + rsd[i] * unit[1])
                ok = (rates >= f) & (recovery_time(restarts, rates, f, c.checkpoint_interval_s) <= self.recovery_target_s)
                p_feasible = float(np.mean(ok))
                recovery = float(recovery_time(np.exp(rmu[i]), np.exp(mu[i]) * c.slots, f, c.checkpoint_interval_s))
            out.append(Prediction(c, float(math.exp(mu[i]) * c.slots), float(math.exp(mu[i] - z * sd[i]) * c.slots), recovery,
                                  p_rate, p_feasible, c.cost(slots_per_tm, floor_mb)))  # fmt: skip
        return out

    def recommend(self, predictions: Sequence[Prediction], in_force: Configuration | None = None) -> Prediction | None:
        """The cheapest prediction that is feasible with probability ``confidence`` (None: none is, yet).

        At equal cost, the one nearest to ``in_force`` (in the model's features): a change that buys nothing is not
        made (a managed fraction or a memory per slot below the TaskManagers' floor costs the same as what runs).
        """
        sure = [p for p in predictions if p.p_feasible >= self.confidence]
        here = np.array(features(in_force)) if in_force is not None else None

        def away(p: Prediction) -> float:
            return 0.0 if here is None else float(np.linalg.norm(np.array(features(p.configuration)) - here))

        return min(sure, key=lambda p: (p.cost, away(p), p.configuration.key())) if sure else None

    def next_profiles(self, predictions: Sequence[Prediction], count: int) -> list[Prediction]:
        """Up to ``count`` unprofiled candidates with the highest expected improvement (constrained EI), one at a time.

        Candidates whose expected improvement is within 1 % of the best left are told apart by their distance (in the
        model's features) from every configuration profiled or chosen so far, farthest first: a batch of copies then
        spreads over what is not known yet rather than measuring near-twins of one configuration.
        """
        if not predictions:
            return []
        scalar = _scalar_costs(predictions)
        # The incumbent: the cheapest configuration measured so far that is feasible (none: anything feasible improves).
        sure = [p for p in predictions if p.configuration in self.observed and p.p_feasible >= self.confidence]
        measured = [scalar[p.configuration] for p in sure]
        best = min(measured) if measured else max(scalar.values()) + 1
        gain = {p.configuration: max(best - scalar[p.configuration], 0.0) * p.p_feasible for p in predictions}
        left = [p for p in predictions if p.configuration not in self.observed and best - scalar[p.configuration] > 0]
        known = [np.array(features(c)) for c in self.observed]
        chosen: list[Prediction] = []
        while left and len(chosen) < count:
            top = max(gain[p.configuration] for p in left)
            near_top = [p for p in left if gain[p.configuration] >= 0.99 * top]

            def spread(p: Prediction) -> float:
                x = np.array(features(p.configuration))
                return min((float(np.linalg.norm(x - k)) for k in known), default=0.0)

            pick = min(near_top, key=lambda p: (-spread(p), p.cost, p.configuration.key()))
            chosen.append(pick)
            known.append(np.array(features(pick.configuration)))
            left.remove(pick)
        return chosen
