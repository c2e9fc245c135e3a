"""Data-holder side: private synthetic data generators."""

from synthinfer.generate.napsu_mq import NapsuMQ

__all__ = ["NapsuMQ"]
