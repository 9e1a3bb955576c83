"""Differentially private quantiles: the unbounded quantile mechanism (Durfee 2023), JointExp
(Gillenwater, Joseph, Kulesza 2021) and the baselines the papers compare against."""
