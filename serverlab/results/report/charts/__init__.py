"""The charts: plotly figures of cells, series and signals, and the history's series."""
