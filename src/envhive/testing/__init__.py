"""Test envs and helpers shipped with envhive, for envhive's own suite and for yours.

* :class:`CountingEnv`: observations encode ``(env, episode, step, last action)``, and episodes
  end on a scripted pattern, so a leaked, duplicated or misplaced transition is visible.
* :class:`ZooEnv` and :data:`SPACE_ZOO`: deterministic envs over every kind of space.
* :class:`TagTeamEnv`: a multi-agent env (PettingZoo's parallel API) whose agents die, join
  and end on a script, each row saying which episode, step and agent it is.
* :func:`transcript` / :func:`assert_same_transcript`: record and compare runs.

Examples:
    >>> import envhive
    >>> from envhive.testing import CountingEnv
    >>> env = envhive.make(lambda: CountingEnv(pattern=[(2, "term")]), num_envs=2)
    >>> obs, _ = env.reset(seed=0)
    >>> obs[:, :3].tolist()
    [[0, 0, 0], [1, 0, 0]]
    >>> env.close()
"""

from envhive.testing._agents import TagTeamEnv
from envhive.testing._envs import SPACE_ZOO, CountingEnv, ZooEnv
from envhive.testing._transcript import assert_same_transcript, transcript

__all__ = ["CountingEnv", "ZooEnv", "SPACE_ZOO", "TagTeamEnv", "transcript", "assert_same_transcript"]
