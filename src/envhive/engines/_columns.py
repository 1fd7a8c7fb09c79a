"""Named columns: compiled code reads parameters and addresses by name, not by offset.

A compiled family keeps its parameters (and, for MuJoCo, its address table) in one flat float
or int array per batch, because numba functions take arrays, not dicts. The names are declared
once, in order, next to the code that reads them; :func:`column_index` turns them into the
positions that code indexes with (module-level ints, constants to numba), and the packing code
writes the values in the same declared order. Renaming or reordering a column then changes one
tuple, never a bare offset.

Examples:
    >>> PARAMS = ("gravity", "length")
    >>> _P = column_index(PARAMS)
    >>> _P["length"]
    1
"""

from __future__ import annotations

__all__ = ["column_index"]


def column_index(*groups: tuple[str, ...]) -> dict[str, int]:
    """The position of each name in the concatenation of ``groups`` (names must be unique).

    Examples:
        >>> column_index(("a", "b"), ("c",))
        {'a': 0, 'b': 1, 'c': 2}
    """
    names = [name for group in groups for name in group]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate column names in {names}")
    return {name: k for k, name in enumerate(names)}
