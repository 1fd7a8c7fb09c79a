"""EnvPool's classic control family (``envpool.classic_control``), run by envhive's own engines.

Its classes are EnvPool's names over envhive's: see ``envhive.envpool._families`` for which ids
and options run on envhive's engines (the rest run on EnvPool's).
"""

from envhive.envpool._modules import own_classes

globals().update(own_classes("classic_control"))
