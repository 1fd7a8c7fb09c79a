"""envhive's torch-native batched envs (:class:`~envhive.engines.TorchBatchedEnv` subclasses).

``envhive/TorchCartPole-v1`` and ``envhive/TorchPendulum-v1``: gymnasium's CartPole-v1 and
Pendulum-v1 with the whole batch in torch tensors on any device, run by the native executor
(``envhive.engines._torch.TorchEngine``).
"""

from envhive.envs.torch._cartpole import TorchCartPole
from envhive.envs.torch._pendulum import TorchPendulum

__all__ = ["TorchCartPole", "TorchPendulum"]
