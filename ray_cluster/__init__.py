"""Ray parameter-server runtime for psched.

Four packages, by role (import the modules directly; this package imports nothing heavy):

* ``ray_cluster.workloads`` -- what is trained: the ``Workload`` protocol and built-ins
  (``workloads.builtin``), their data sets (``workloads.data``), hyper-parameters
  (``workloads.hparams``), job spec files (``workloads.jobspec``) and the optional PyTorch
  networks (``workloads.torch_mlp``, ``workloads.torch_cnn``, ``workloads.torch_lm`` on the
  standard library's text ``workloads.corpus``, sharing ``workloads.torch_flat``; the
  ``torch`` extra);
* ``ray_cluster.ps`` -- the parameter server: the PS-shard and worker actors (``ps.actors``)
  and the device a worker trains on (``ps.devices``),
  momentum SGD over flat vectors and shards (``ps.optim``, its fused kernel
  ``ps.update_kernels``), consistent checkpoints (``ps.checkpoint``) and the Dynamic mini-batch
  SGD learning-rate scale (``ps.elastic``, Lin et al. 2019);
* ``ray_cluster.runtime`` -- one job's training controller (``JobRuntime``, in layers:
  ``runtime.state``, ``runtime.fleet``, ``runtime.checkpoints``, ``runtime.boundary``,
  ``runtime.training``; its data types in ``runtime.types``), psched's executor on Ray for many
  jobs (``runtime.executor``), Ray nodes as psched servers (``runtime.cluster_model``) and
  pre-started worker processes (``runtime.warmpool``);
* ``ray_cluster.service`` -- the live scheduler service (``service.config``, ``service.core``,
  ``service.nodes``, ``service.replay``, ``service.actor``, its journal ``service.journal``,
  the live page ``service.page`` and ``service.http``, and fault injection ``service.faults``).

Packages import downwards only: workloads <- ps <- runtime <- service
(``tests/test_import_graph.py`` fails on a cycle or an upward import).
"""

__all__: list[str] = []
