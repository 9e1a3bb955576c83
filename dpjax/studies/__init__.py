"""Monte Carlo studies: the chunked ``vmap`` runner, error summaries, datasets and the registry."""

from dpjax.studies.datasets import Dataset
from dpjax.studies.registry import Study, accuracy_row, register, studies
from dpjax.studies.runner import monte_carlo, trial_keys
from dpjax.studies.summary import ErrorSummary, summarize_errors

__all__ = [
    "Dataset",
    "ErrorSummary",
    "Study",
    "accuracy_row",
    "monte_carlo",
    "register",
    "studies",
    "summarize_errors",
    "trial_keys",
]
