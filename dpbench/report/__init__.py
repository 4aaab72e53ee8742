"""Reports: a self-contained HTML report and a Markdown summary of a dpbench store.

>>> from dpbench.report import build_report
>>> html, md = build_report("results/quickstart.zarr", "reports/quickstart.html")
"""

from .build import build_report, default_output, render_report, report_context

__all__ = ["build_report", "default_output", "render_report", "report_context"]
