"""Ray parameter-server runtime for psched.

Submodules (import them directly; this package imports nothing heavy on purpose):

* ``ray_cluster.workloads`` — the ``Workload`` protocol and built-in training tasks;
* ``ray_cluster.optim`` — momentum SGD over flat vectors and their shards (its fused in-place
  kernel in ``ray_cluster.update_kernels``, Numba);
* ``ray_cluster.elastic`` — the Dynamic mini-batch SGD learning-rate scale (Lin et al. 2019);
* ``ray_cluster.torch_workload`` — the optional PyTorch workload (needs the ``torch`` extra);
* ``ray_cluster.actors``, ``ray_cluster.runtime`` (with its data types in
  ``ray_cluster.runtime_types``), ``ray_cluster.executor``, ``ray_cluster.checkpoint`` — the
  runtime;
* ``ray_cluster.service`` — the live scheduler service (public import path), with
  ``ray_cluster.recovery`` (re-plans, nodes, restarts), ``ray_cluster.service_config`` and
  ``ray_cluster.service_entry`` (the Ray actor, ``run_trace``); its journal is
  ``ray_cluster.journal``.
"""

__all__: list[str] = []
