"""What a study run returns, :class:`StudyResult`, and how it is saved (table, legend, figure)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpjax._src.studies.columns import column_descriptions
from dpjax._src.studies.definition import Study

if TYPE_CHECKING:
    from matplotlib.figure import Figure
else:  # matplotlib loads only when a figure is drawn: at run time the annotation reads Any
    Figure = Any

__all__ = ["StudyResult", "save_figure"]


@dataclasses.dataclass
class StudyResult:
    """What :func:`run_study` returns.

    Attributes:
      study: the :class:`Study` that ran.
      table: a tidy ``pandas.DataFrame``, one row per (mechanism, dataset, grid point, metric,
        statistic[, replicate]); its columns are described in ``COLUMNS``.
      record: the run record: seed, trials, versions, backend, date, wall time, compiles per step.
    """

    study: Study
    table: Any
    record: dict

    def figure(self) -> Figure:
        """The study's small-multiples figure (see :func:`dpjax._src.studies.plots.study_figure`)."""
        from dpjax._src.studies.plots import study_figure

        return study_figure(self)

    def metadata(self) -> dict:
        """Everything needed to read the table: the record, the metrics and the columns."""
        return {
            "study": self.study.name,
            "description": self.study.description,
            "record": self.record,
            "metrics": {m.name: {"description": m.description, "unit": m.unit} for m in self.study.metrics},
            "columns": column_descriptions(self.table.columns, [self.study]),
        }

    def save(self, directory: str | os.PathLike, *, figure: bool = True) -> list[Path]:
        """Writes ``<name>.csv`` (the table), ``<name>.json`` (record, legend, rows) and ``<name>.png``,
        each atomically (a temporary file renamed into place)."""
        import json

        from dpjax._src.atomic import atomic_path, write_text

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        stem = directory / self.study.name
        paths = [stem.with_suffix(".csv"), stem.with_suffix(".json")]
        with atomic_path(paths[0]) as tmp:
            self.table.to_csv(tmp, index=False)
        payload = {**self.metadata(), "rows": json.loads(self.table.to_json(orient="records"))}
        write_text(paths[1], json.dumps(payload, indent=2) + "\n")
        if figure:
            paths.append(stem.with_suffix(".png"))
            save_figure(self.figure(), paths[-1])
        return paths


def save_figure(fig, path, **options) -> None:
    """Saves a matplotlib figure as PNG atomically and closes it."""
    import matplotlib.pyplot as plt

    from dpjax._src.atomic import atomic_path

    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=options.pop("dpi", 110), **options)
    finally:
        plt.close(fig)
