"""envhive's torch-native batched envs (:class:`~envhive.engines.TorchBatchedEnv` subclasses).

``envhive/TorchCartPole-v1``: gymnasium's CartPole-v1 with its whole batch in torch tensors on
any device, run by the native executor (``envhive.engines._torch.TorchEngine``).
"""

from envhive.envs.torch._cartpole import TorchCartPole

__all__ = ["TorchCartPole"]
