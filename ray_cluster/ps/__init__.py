"""The parameter server on Ray: PS-shard and worker actors, momentum SGD and its kernels,
consistent checkpoints and the dynamic mini-batch learning-rate scale."""
