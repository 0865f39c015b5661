"""Fits that start from the model in service (``cuemem bench train-ranker --prior``): a blend of
a fit with it, and the fit of only what it lacks on top of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The L2 penalties tried for :func:`on_top` (over the standardised weights, per training row):
# decades, as the fits' C.
ON_TOP_L2 = (1.0, 10.0, 100.0)


def blend(prior: Any, fitted: Any, weight: float, drop: Sequence[int] = ()) -> Any:
    """One linear model whose logit is ``weight`` times the prior's plus the rest times the fit's,
    in the fit's standardisation (the same features in the same order); the features in ``drop``
    get no weight from either (:func:`unsupported`)."""
    import dataclasses

    import numpy as np

    def raw(m: Any) -> tuple[Any, float]:  # weights and bias over the unstandardised features
        w = np.asarray(m.weights) / np.asarray(m.scale)
        return w, float(m.bias - (w * np.asarray(m.mean)).sum())

    if tuple(prior.features) != tuple(fitted.features):
        raise ValueError(f"prior: model {prior.version} has other features than the fit")
    (wp, bp), (wf, bf) = raw(prior), raw(fitted)
    w = weight * wp + (1.0 - weight) * wf
    bias = weight * bp + (1.0 - weight) * bf
    w[list(drop)] = 0.0
    return dataclasses.replace(
        fitted,
        weights=tuple(float(v) for v in w * np.asarray(fitted.scale)),
        bias=float(bias + (w * np.asarray(fitted.mean)).sum()),
    )


def on_top(prior: Any, lines: Sequence[dict[str, Any]], l2: float, drop: Sequence[int] = ()) -> Any | None:
    """``prior`` kept whole, and only the features it gives no weight (added after it was fitted,
    as `turn_alone` was) fitted on ``lines``, with a shift of its bias, the prior's logit as an
    offset: a new signal learned without moving what the prior learned on every other feature,
    which a refit of all of them on a small training split does (docs/BENCHMARKS.md, "A turn by
    itself beside its window"). L2 ``l2`` on their standardised weights; those constant on
    ``lines`` and those in ``drop`` (too few training rows show them) are not fitted. The prior's
    own weights stay, those of features this training split barely shows included: they were
    learned, or refused, on the prior's own split. None when there is no feature to fit."""
    import dataclasses

    import numpy as np
    from scipy.optimize import minimize
    from scipy.special import expit

    from bench.ranker import matrix

    x, y = matrix(lines)
    new = [j for j, w in enumerate(prior.weights) if w == 0.0 and j not in set(drop) and x[:, j].std() > 1e-9]
    if not new:
        return None
    mean, scale = x[:, new].mean(axis=0), x[:, new].std(axis=0)
    s = (x[:, new] - mean) / scale
    offset = np.asarray(prior.logits(x.tolist()))
    n = len(y)

    def loss(p: Any) -> tuple[float, Any]:
        z = offset + s @ p[:-1] + p[-1]
        err = expit(z) - y
        value = float(np.mean(np.logaddexp(0.0, z) - y * z) + l2 / n * float(p[:-1] @ p[:-1]))
        return value, np.append(s.T @ err / n + 2.0 * l2 / n * p[:-1], err.mean())

    p = minimize(loss, np.zeros(len(new) + 1), jac=True, method="L-BFGS-B").x
    weights, means, scales = list(prior.weights), list(prior.mean), list(prior.scale)
    for k, j in enumerate(new):
        weights[j], means[j], scales[j] = float(p[k]), float(mean[k]), float(scale[k])
    return dataclasses.replace(
        prior, weights=tuple(weights), mean=tuple(means), scale=tuple(scales), bias=prior.bias + float(p[-1])
    )
