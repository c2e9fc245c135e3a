"""Reports of a release: one self-contained HTML page (:func:`report`), its fidelity measures
(:mod:`.fidelity`) and figures (:mod:`.figures`)."""

from synthinfer.reporting.page import MAX_DATASETS, Report, report

__all__ = ["MAX_DATASETS", "Report", "report"]
