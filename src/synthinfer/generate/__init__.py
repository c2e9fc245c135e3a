"""Synthetic data generators."""

from synthinfer.generate.laplace_mechanism import LaplaceMechanismGenerator, laplace_synthetic

__all__ = ["LaplaceMechanismGenerator", "laplace_synthetic"]
