"""Learned combinations of metric scores (Wan & Bansal 2022, Table 2): logistic regression and
an MLP over features such as (CLIP-S, BERT-S), fit on human factuality judgments.

Fit with scikit-learn; saved as plain JSON (weights, feature scaling), so loading needs neither
pickle nor sklearn, and `predict` is a few lines of numpy that equal sklearn's predict_proba.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np


class _Combiner:
    kind = ""

    def __init__(self, **params: Any) -> None:
        self.params = params
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None

    def _standardize(self, X: np.ndarray, fit: bool = False) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"features must be [N, F], got shape {X.shape}")
        if fit:
            self.mean_ = X.mean(0)
            self.scale_ = np.where(X.std(0) > 0, X.std(0), 1.0)
        if self.mean_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted")
        return (X - self.mean_) / self.scale_

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "kind": self.kind,
            "params": self.params,
            "mean": self.mean_.tolist(),
            "scale": self.scale_.tolist(),
        }
        state.update(self._state())
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
        return path

    def _state(self) -> dict[str, Any]:
        raise NotImplementedError

    def __call__(self, features: np.ndarray) -> np.ndarray:
        return self.predict(features)


class LogisticCombiner(_Combiner):
    """P(factual | features) by logistic regression on standardized features."""

    kind = "logistic"

    def fit(self, features: np.ndarray, labels: np.ndarray) -> LogisticCombiner:
        from sklearn.linear_model import LogisticRegression

        X = self._standardize(features, fit=True)
        model = LogisticRegression(**{"max_iter": 1000, **self.params}).fit(X, np.asarray(labels))
        self.coef_ = model.coef_[0].astype(np.float64)
        self.intercept_ = float(model.intercept_[0])
        self._sk = model
        return self

    def predict(self, features: np.ndarray) -> np.ndarray:
        z = self._standardize(features) @ self.coef_ + self.intercept_
        return 1.0 / (1.0 + np.exp(-z))

    def _state(self) -> dict[str, Any]:
        return {"coef": self.coef_.tolist(), "intercept": self.intercept_}


class MLPCombiner(_Combiner):
    """P(factual | features) by a small ReLU MLP (sklearn MLPClassifier, logistic output)."""

    kind = "mlp"

    def fit(self, features: np.ndarray, labels: np.ndarray) -> MLPCombiner:
        from sklearn.neural_network import MLPClassifier

        X = self._standardize(features, fit=True)
        params = {"hidden_layer_sizes": (16,), "max_iter": 2000, "random_state": 0, **self.params}
        params["hidden_layer_sizes"] = tuple(params["hidden_layer_sizes"])
        self.params = {**params, "hidden_layer_sizes": list(params["hidden_layer_sizes"])}
        model = MLPClassifier(**params).fit(X, np.asarray(labels))
        self.weights_ = [w.astype(np.float64) for w in model.coefs_]
        self.biases_ = [b.astype(np.float64) for b in model.intercepts_]
        self._sk = model
        return self

    def predict(self, features: np.ndarray) -> np.ndarray:
        h = self._standardize(features)
        for i, (w, b) in enumerate(zip(self.weights_, self.biases_)):
            h = h @ w + b
            if i < len(self.weights_) - 1:
                h = np.maximum(h, 0.0)
        return 1.0 / (1.0 + np.exp(-h[:, 0]))

    def _state(self) -> dict[str, Any]:
        return {"weights": [w.tolist() for w in self.weights_], "biases": [b.tolist() for b in self.biases_]}


def load_combiner(path: str | os.PathLike) -> LogisticCombiner | MLPCombiner:
    state = json.loads(Path(path).read_text())
    cls = {"logistic": LogisticCombiner, "mlp": MLPCombiner}[state["kind"]]
    obj = cls(**state["params"])
    obj.mean_, obj.scale_ = np.asarray(state["mean"]), np.asarray(state["scale"])
    if cls is LogisticCombiner:
        obj.coef_, obj.intercept_ = np.asarray(state["coef"]), float(state["intercept"])
    else:
        obj.weights_ = [np.asarray(w) for w in state["weights"]]
        obj.biases_ = [np.asarray(b) for b in state["biases"]]
    return obj
