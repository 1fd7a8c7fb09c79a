"""EnvPool's MuJoCo gym family (``envpool.mujoco.gym``), run by envhive's own engines.

Its classes are EnvPool's names over envhive's: see ``envhive.envpool._families`` for which ids
and options run on envhive's engines (the rest run on EnvPool's).
"""

from envhive.envpool._modules import foreign_getattr, own_classes

globals().update(own_classes("mujoco.gym"))

__getattr__ = foreign_getattr("mujoco.gym", globals())  # Pusher, HumanoidStandup, Pixel classes
