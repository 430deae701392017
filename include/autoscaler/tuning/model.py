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


def _process(x: np.ndarray, y: np.ndarray) -> GaussianProcessRegressor:
    spans = np.maximum(np.ptp(x, axis=0), 1.0)
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale=spans, length_scale_bounds=(1e-2, 1e3), nu=2.5) + WhiteKernel(
        1e-2, (1e-6, 1.0)
    )
    # normalize_y: the prior mean is the observations' mean (one profile: its capacity per slot, DS2's linear scaling).
    model = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # few points: a bound reached is expected, not a fault
        model.fit(x, y)
    return model


DRAWS = 400  # posterior draws per candidate: the probability to within about 0.025 (one standard error)


def recovery_time(restart_s: np.ndarray, max_rate: np.ndarray, rate: float, interval_s: float) -> np.ndarray:
    """Restart plus catch-up (see the module docstring); infinite where the job cannot keep up at all."""
    margin = max_rate - rate
    with np.errstate(divide="ignore", invalid="ignore"):
        catch_up = np.where(margin > 0, (interval_s / 2 + restart_s) * rate / margin, np.inf)
    return restart_s + catch_up


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
            mu, sd = self.rate_model.predict(x, return_std=True)
        else:
            mu, sd = np.zeros(len(configs)), np.full(len(configs), np.inf)
        if self.restart_model is not None:
            rmu, rsd = self.restart_model.predict(x, return_std=True)
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

    def recommend(self, predictions: Sequence[Prediction]) -> Prediction | None:
        """The cheapest prediction that is feasible with probability ``confidence`` (None: none is, yet)."""
        sure = [p for p in predictions if p.p_feasible >= self.confidence]
        return min(sure, key=lambda p: p.cost) if sure else None

    def next_profiles(self, predictions: Sequence[Prediction], count: int) -> list[Prediction]:
        """Up to ``count`` unprofiled candidates with the highest expected improvement (constrained EI)."""
        if not predictions:
            return []
        scale = max(p.cost[1] for p in predictions) + 1
        scalar = {p.configuration: p.cost[0] + p.cost[1] / scale for p in predictions}
        best_feasible = [scalar[p.configuration] for p in predictions if p.p_feasible >= self.confidence]
        best = min(best_feasible) if best_feasible else max(scalar.values()) + 1
        fresh = [p for p in predictions if p.configuration not in self.observed]
        scored = sorted(fresh, key=lambda p: (-(max(best - scalar[p.configuration], 0.0) * p.p_feasible), p.cost))
        return [p for p in scored if best - scalar[p.configuration] > 0][:count]
