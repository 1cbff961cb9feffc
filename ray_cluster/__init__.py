"""Ray parameter-server runtime for psched.

Submodules (import them directly; this package imports nothing heavy on purpose):

* ``ray_cluster.workloads`` — the ``Workload`` protocol and built-in training tasks;
* ``ray_cluster.optim`` — momentum SGD over flat vectors and their shards (its fused in-place
  kernel in ``ray_cluster.update_kernels``, Numba);
* ``ray_cluster.elastic`` — the Dynamic mini-batch SGD learning-rate scale (Lin et al. 2019);
* ``ray_cluster.torch_workload`` — the optional PyTorch workload (needs the ``torch`` extra);
* ``ray_cluster.actors`` (the PS-shard and worker actors), ``ray_cluster.checkpoint``,
  ``ray_cluster.warmpool`` -- the runtime's building blocks;
* ``ray_cluster.runtime`` -- one job's training controller (``JobRuntime``, in layers:
  ``runtime.state``, ``runtime.fleet``, ``runtime.checkpoints``, ``runtime.boundary``,
  ``runtime.training``; its data types in ``runtime.types``);
* ``ray_cluster.executor`` -- psched's executor on Ray (many jobs, slot by slot);
  ``ray_cluster.cluster_model`` -- Ray nodes as psched servers;
* ``ray_cluster.service`` -- the live scheduler service (public import path; its parts
  ``service.config``, ``service.core``, ``service.nodes``, ``service.replay``,
  ``service.actor``); its journal is ``ray_cluster.journal``, job files are read by
  ``ray_cluster.jobspec``.

Layers import downwards only (``tests/test_import_graph.py`` checks there is no cycle):
workloads <- runtime building blocks <- runtime <- executor <- service.
``ray_cluster.recovery`` re-exports ``ray_cluster.service.nodes``.
"""

__all__: list[str] = []
