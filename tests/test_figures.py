"""One figure type for the whole report: every table shows rows of `Figure`, each saying
what it counts, over which window and from which source; the TLS tables' headings come from
their figures, one heading a cell."""

import random

from test_report import recorded

from serverlab.results.report.charts import chart
from serverlab.results.report.figures.figure import Figure
from serverlab.results.report.figures.seed_figures import SEED_FIGURES
from serverlab.results.report.figures.table import METRICS
from serverlab.results.report.sections import slow_link, tls, transports

TABLES = {
    "cells": METRICS,
    "seeds": SEED_FIGURES,
    "transports": transports.FIGURES,
    "slow link": slow_link.FIGURES,
    "emit charts": chart.EMIT_FIGURES,
    # A figure stands in several TLS tables: each once.
    "tls": tuple(
        dict.fromkeys((*tls.RESUME_FIGURES, *tls.TAX_FIGURES, *tls.H2_FIGURES, tls.MEMORY))
    ),
}


def test_every_table_of_the_report_shows_figures_that_say_their_window_and_source():
    for table, figures in TABLES.items():
        for figure in figures:
            assert isinstance(figure, Figure), (table, figure)
            assert figure.label and figure.window and figure.source, (table, figure.name)


def test_no_table_names_two_of_its_figures_alike():
    for table, figures in TABLES.items():
        names = [figure.name for figure in figures]
        assert len(set(names)) == len(names), (table, names)


def test_a_name_means_one_figure_on_the_whole_page_and_the_tails_say_what_they_measure():
    labels: dict[str, set[str]] = {}
    for table, figures in TABLES.items():
        if table != "seeds":  # the seed sections' names are their data files' own keys
            for figure in figures:
                labels.setdefault(figure.name, set()).add(figure.label)
    assert {name: said for name, said in labels.items() if len(said) > 1} == {}
    assert labels["p99"] == {"latency p99"}
    assert labels["delay_p99"] == {"delivery delay p99"}


def test_a_view_of_a_figure_keeps_the_flags_of_the_figure_it_shows():
    cpu = next(figure for figure in METRICS if figure.name == "cpu")
    seen = cpu.view("cpu_percent", label="server mean CPU")
    assert (seen.name, seen.titled, seen.flag_names) == (
        "cpu_percent",
        "server mean CPU (%)",
        frozenset({"cpu"}),
    )


TLS_TESTS = [
    ("handshake-storm", {"tls_key": "ecdsa-p256", "rate": 20, "transport": "tls"}),
    ("handshake-resume", {"tls_resume": "on", "transport": "tls"}),
    ("handshake-resume", {"tls_resume": "off", "transport": "tls"}),
    ("tls-tax", {"transport": "clear"}),
    ("tls-tax", {"transport": "tls"}),
    ("h2-multiplex", {"transport": "h2"}),
    ("h1-100-connections", {"transport": "tls"}),
    ("push-sse", {"behaviour": "sse", "clients": 10, "transport": "clear"}),
    ("push-sse", {"behaviour": "sse", "clients": 10, "transport": "tls"}),
    ("push-sse", {"behaviour": "sse", "clients": 10, "transport": "h2"}),
]


def test_each_tls_table_has_one_heading_a_cell_taken_from_its_figures():
    rng = random.Random(3)
    tests = [recorded(1, name, params, "node-http", 0, rng) for name, params in TLS_TESTS]
    section = tls.tls_section(tests, [])
    assert section is not None
    for table in ("storm", "resume", "tax", "h2", "memory"):
        rows = getattr(section, table)
        assert rows and all(len(row) == len(section.headings[table]) for row in rows), table
    assert f"{tls.LATENCY.heading} h1" in section.headings["h2"]
    assert f"{tls.CPU_REQUEST.heading} clear" in section.headings["tax"]
