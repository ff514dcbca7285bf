"""Self-contained HTML report of a crossval run (``crosssim report DIR``)."""

from crosssim.report.build import ReportResult, build_report, write_report

__all__ = ["ReportResult", "build_report", "write_report"]
