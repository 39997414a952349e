"""Bundled example data (UCI Pima Indians Diabetes and Sonar); see ``data/README.md``."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

__all__ = ["REFERENCE_LOG_Z", "Dataset", "load_pima", "load_sonar"]

#: Reference log evidences of the standard logistic-regression set-up (prior N(0, 5²),
#: standardized predictors, no intercept) with their uncertainty.
REFERENCE_LOG_Z = {"pima": (-438.981, 0.01), "sonar": (-144.51, 0.05)}

PIMA_FEATURES = (
    "pregnancies",
    "glucose",
    "blood_pressure",
    "skin_thickness",
    "insulin",
    "bmi",
    "diabetes_pedigree",
    "age",
)


@dataclass(frozen=True)
class Dataset:
    """Predictors ``X`` (n, p), binary labels ``y`` (n,) and feature names."""

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    name: str


def _standardize(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(axis=0)) / X.std(axis=0)


def _read(filename: str) -> list[list[str]]:
    text = resources.files("pymc_crais").joinpath("data", filename).read_text()
    return [line.split(",") for line in text.splitlines() if line.strip()]


def load_pima(standardize: bool = True) -> Dataset:
    """The Pima Indians Diabetes data: 768 rows, 8 predictors, y = 1 for diabetes.

    Parameters
    ----------
    standardize : bool, default True
        Centre each predictor and divide by its population standard deviation (the
        standard set-up of the evidence benchmarks).
    """
    rows = np.array(_read("pima-indians-diabetes.data"), dtype=np.float64)
    X, y = rows[:, :-1], rows[:, -1].astype(np.int64)
    return Dataset(_standardize(X) if standardize else X, y, PIMA_FEATURES, "pima")


def load_sonar(standardize: bool = True) -> Dataset:
    """The Sonar (mines vs. rocks) data: 208 rows, 60 predictors, y = 1 for rock (``R``).

    Parameters
    ----------
    standardize : bool, default True
        Centre each predictor and divide by its population standard deviation.
    """
    rows = _read("sonar.all-data")
    X = np.array([r[:-1] for r in rows], dtype=np.float64)
    y = np.array([1 if r[-1].strip() == "R" else 0 for r in rows], dtype=np.int64)
    names = tuple(f"band_{i:02d}" for i in range(X.shape[1]))
    return Dataset(_standardize(X) if standardize else X, y, names, "sonar")
