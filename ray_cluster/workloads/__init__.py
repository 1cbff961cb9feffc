"""Training workloads: the protocol and built-ins (:mod:`~ray_cluster.workloads.builtin`), their
data sets, hyper-parameters, job spec files and the optional PyTorch network."""
