"""The migration report: what a run would meet on Trainium (report.py), the
run's device timeline as the report keeps it (run_timeline.py), and the report
as a self-contained HTML page (page.py)."""
from .report import Report, report

__all__ = ["Report", "report"]
