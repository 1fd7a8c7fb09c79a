"""``envpool.atari.registration``: the Atari games (``atari_game_list``: ROM ids).

Examples:
    >>> "pong" in atari_game_list
    True
"""

from envhive.envpool.registration import registry

__all__ = ["atari_game_list"]

#: Every Atari game ``make`` accepts (``<Game>-v5``), as ROM ids, sorted.
atari_game_list = sorted({kw["task"] for path, _, kw in registry.specs.values() if path == "envpool.atari"})
