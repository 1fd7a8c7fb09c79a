r"""Front ends: each lays out the pool's neutral :class:`~envhive._batch.Batch` its own way.

* :class:`VectorEnv` (``api="gymnasium"``, the default): gymnasium's vector API, plus
  EnvPool-style ``send``/``recv``.
* ``JaxVectorEnv`` (``api="jax"``): :class:`VectorEnv` with jax arrays, whose ``xla()`` runs
  any env inside ``jax.jit`` (``envhive.jax._front``; needs the ``jax`` extra).
* :class:`DmEnv` (``api="dm_env"``): DeepMind's ``dm_env`` API, batched.
* ``TorchRLEnv`` (``api="torchrl"``): a ``torchrl.envs.EnvBase``; imported on first use
  (``envhive.frontends.TorchRLEnv``), as it needs the ``torchrl`` extra.
* ``SB3VecEnv`` (``api="sb3"``): a Stable-Baselines3 ``VecEnv``; imported on first use
  (``envhive.frontends.SB3VecEnv``), as it needs the ``sb3`` extra.
* :class:`PettingZooEnv` (``api="pettingzoo"``): a multi-agent pool as one PettingZoo
  ``ParallelEnv``; :class:`FlatAgents` (``agent_layout="flat"``): a multi-agent pool with its
  agents folded into the batch axis, which the single-agent front ends take as a pool.
  A front end without an agent axis takes a pool of one-agent envs as that agent's rows
  (``OneAgent``) and refuses one of several agents (``check_agent_axis``).

A front end reads only the pool's results (and its spaces); it never touches buffers or
executors, so adding one touches nothing else. Writing one: take a :class:`Pool` (``env.pool``
of any front end, or ``envhive.make(...).pool``), call ``pool.step``/``reset``/``recv`` and lay
out the :class:`Batch` they return; infos come as :class:`Column`\ s.

Examples:
    >>> import envhive
    >>> from envhive.frontends import DmEnv
    >>> env = envhive.make("CartPole-v1", num_envs=2, api="dm_env")
    >>> isinstance(env, DmEnv)
    True
    >>> env.close()
"""

from envhive._batch import Batch
from envhive._infos import Column
from envhive._pool import Pool
from envhive.frontends._dm_env import DmEnv
from envhive.frontends._flat import FlatAgents
from envhive.frontends._gymnasium import VectorEnv
from envhive.frontends._pettingzoo import PettingZooEnv

__all__ = ["VectorEnv", "DmEnv", "TorchRLEnv", "SB3VecEnv", "PettingZooEnv", "FlatAgents", "Pool",
           "Batch", "Column"]


def __getattr__(name: str) -> object:
    if name == "TorchRLEnv":  # torchrl is an optional extra: imported on first use
        from envhive.frontends._torchrl import TorchRLEnv

        return TorchRLEnv
    if name == "SB3VecEnv":  # stable-baselines3 is an optional extra: imported on first use
        from envhive.frontends._sb3 import SB3VecEnv

        return SB3VecEnv
    raise AttributeError(f"module 'envhive.frontends' has no attribute {name!r}")
