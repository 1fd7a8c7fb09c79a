"""A griffe extension for envhive's API reference (loaded by mkdocstrings, see mkdocs.yml).

* Lazy exports: a name in a module's ``__all__`` that the module provides through its
  ``__getattr__`` (``envhive.executors.ProcessExecutor``, ``envhive.frontends.TorchRLEnv``:
  their optional dependencies are imported on first use) is found, statically, where it is
  defined inside the package and added to the module as an alias, so the reference names the
  public path and survives the module being moved.
* Sphinx roles in docstrings (``:class:`Pool```, ``:func:`~envhive.make```) become optional
  cross-references: a link where the target is rendered in the reference, code otherwise.
  RST's ``\\ `` (an escaped space) is dropped and ``.. code-block:: LANG`` becomes a fence.
* A docstring's first paragraph is joined into one line: griffe takes the first line as the
  summary shown in member lists, and envhive's first sentences often wrap.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj):`(~?)([^`<>]+?)`")
# A first paragraph that holds a section, a list, code or a table keeps its lines.
_KEEP_LINES = re.compile(r"^\s*(\w[\w ]*:\s*$|[*\-|] |>>>|```)", re.M)
_CODE_BLOCK = re.compile(r"^( *)\.\. code-block:: *(\w*)\n\n((?:\1 {2,}.*\n|\n)+)", re.M)


def _modules(module: griffe.Module) -> Any:
    yield module
    for sub in module.modules.values():
        if not sub.is_alias:
            yield from _modules(sub)


def _defined(root: griffe.Module, name: str) -> list[griffe.Object]:
    """Objects named ``name`` defined (not imported) in ``root``'s modules."""
    found = []
    for module in _modules(root):
        member = module.members.get(name)
        if member is not None and not member.is_alias and not member.is_module:
            found.append(member)
    return found


def _add_lazy_exports(pkg: griffe.Module) -> None:
    for module in _modules(pkg):
        exports = module.exports or []
        for name in exports:
            if not isinstance(name, str) or name in module.members:
                continue
            candidates = _defined(module, name)
            if len(candidates) == 1:
                module.set_member(name, griffe.Alias(name, candidates[0], parent=module))


def _resolve(obj: griffe.Object, name: str) -> str:
    scope: Any = obj if obj.is_module or obj.is_class else obj.parent
    head, _, rest = name.partition(".")
    while scope is not None:
        try:
            target = scope.resolve(head)
        except (griffe.NameResolutionError, AttributeError, KeyError):
            scope = scope.parent
            continue
        return f"{target}.{rest}" if rest else target
    return name


def _rewrite(obj: griffe.Object, text: str) -> str:
    def role(match: re.Match[str]) -> str:
        tilde, name = match.groups()
        name = name.strip().removesuffix("()")
        shown = name.rsplit(".", 1)[-1] if tilde else name
        target = _resolve(obj, name)
        return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'

    def block(match: re.Match[str]) -> str:
        indent, lang, body = match.groups()
        code = textwrap.dedent(body).strip("\n")
        fence = textwrap.indent(f"```{lang}\n{code}\n```\n", indent)
        return fence + "\n"

    text = _CODE_BLOCK.sub(block, text + "\n").rstrip("\n")
    text = _ROLE.sub(role, text).replace("\\ ", "")
    first, sep, rest = text.partition("\n\n")
    if not _KEEP_LINES.search(first):
        first = " ".join(line.strip() for line in first.splitlines())
    return first + sep + rest


def _walk(obj: griffe.Object, seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if obj.docstring is not None:
        obj.docstring.value = _rewrite(obj, obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _walk(member, seen)


class EnvhiveDocs(griffe.Extension):
    """Lazy exports as aliases, and Sphinx roles as cross-references (see the module)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "envhive":
            return
        _add_lazy_exports(pkg)
        _walk(pkg, set())
