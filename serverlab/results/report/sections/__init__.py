"""The report's sections, one module each, built from cells and figures."""
