"""Post-processing estimators that combine the free gaps of selection and sparse-vector mechanisms
with separate noisy measurements (Ding, Wang, Zhang, Kifer, "Free Gap Information from the
Differentially Private Sparse Vector and Noisy Max Mechanisms", PVLDB 2019). Post-processing of
released values costs no privacy."""
from dpjax.postprocess import laplace_difference as laplace_difference
from dpjax.postprocess import svt_gap as svt_gap
from dpjax.postprocess import topk_gap as topk_gap
