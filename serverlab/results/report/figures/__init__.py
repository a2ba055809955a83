"""The figures: the one ``Figure`` type, ``METRICS`` and the seed sections' rows, and the
accessors they read a stored test with (engine summary, kernel efficiency, push cycles,
histograms)."""
