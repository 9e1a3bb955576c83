"""Post-processing estimators that combine the free gaps of selection and sparse-vector mechanisms
with separate noisy measurements (Ding, Wang, Zhang, Kifer, "Free Gap Information from the
Differentially Private Sparse Vector and Noisy Max Mechanisms", PVLDB 2019). Post-processing of
released values costs no privacy."""
from dpjax._src.postprocess import laplace_difference, svt_gap, topk_gap

__all__ = [
    "laplace_difference",
    "svt_gap",
    "topk_gap",
]
