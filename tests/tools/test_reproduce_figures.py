"""The reproductions' figure rule (dpjax._src.tools.reproduce.figures): no series hidden without a note."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from dpjax._src.tools.reproduce.figures import HIDDEN, plot_series


def test_a_series_on_another_is_drawn_visibly_with_a_legend_note():
    fig, ax = plt.subplots()
    x = [1.0, 2.0, 3.0]
    labels = plot_series(ax, x, [
        ("a", [0.0, 0.5, 1.0], "o-"),
        ("b", [0.0, 0.5, 1.0], "o-"),  # identical to a
        ("c", [0.0, 0.5 + HIDDEN / 2, 1.0], "o-"),  # closer to a than the eye separates
        ("d", [0.0, 0.5 + 2 * HIDDEN, 1.0], "o-"),  # apart
    ], ms=3)
    assert labels == ["a", "b (= a, identical)", "c (≈ a)", "d"]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == labels
    assert [line.get_linestyle() for line in lines] == ["-", "--", "--", "-"]
    assert lines[1].get_markerfacecolor() == "none" and lines[1].get_zorder() > lines[0].get_zorder()
    fig2, ax2 = plt.subplots()  # on a fixed axis extent, lines closer than HIDDEN of it coincide
    assert plot_series(ax2, x, [("a", [0.90, 0.95, 0.97], "o-"), ("b", [0.905, 0.952, 0.97], "o-")],
                       span=1.0) == ["a", "b (≈ a)"]
    plt.close(fig)
    plt.close(fig2)
