"""The torch family: batched envs whose state lives in torch tensors, and their engine.

A *torch batched env* (:class:`TorchBatchedEnv`) keeps every env's state in tensors on one
device and resets or steps any subset in one call; :class:`TorchEngine` runs one on the
``native`` executor (``_engine.py``), ``_factory.py`` builds one env or the whole batch for an
id, and ``_family.py`` registers the ``"torch"`` engine kind. ``envhive/TorchCartPole-v1`` and
``envhive/TorchPendulum-v1`` are gymnasium's CartPole-v1 and Pendulum-v1 written this way.
Importing this package imports no torch (an env imports it when built).

Examples:
    >>> from envhive.envs.torch import TorchBatchedEnv, TorchCartPole
    >>> issubclass(TorchCartPole, TorchBatchedEnv)
    True
"""

from envhive.envs.torch._cartpole import TorchCartPole
from envhive.envs.torch._engine import NoiseStock, TorchBatchedEnv, TorchEngine
from envhive.envs.torch._pendulum import TorchPendulum

__all__ = ["TorchBatchedEnv", "TorchEngine", "NoiseStock", "TorchCartPole", "TorchPendulum"]
