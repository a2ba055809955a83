"""The HTML report: ``build_report(db_path, selection, out_path)``; see builder.py."""

from serverlab.results.report.builder import DEFAULT_REPORT, build_report
from serverlab.results.report.selection import SelectionError, parse_selection
from serverlab.results.report.summary import print_summary

__all__ = ["DEFAULT_REPORT", "SelectionError", "build_report", "parse_selection", "print_summary"]
