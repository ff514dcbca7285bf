"""Self-contained HTML report of a crossval run (``crosssim report DIR``)."""

from crosssim.report.build import write_report

__all__ = ["write_report"]
