"""A griffe extension for the docs site (mkdocs.yml): fastcore's `@patch` methods as members of their class.

The notebooks define many methods one per cell with fastcore's `@patch` (`def f(self: Cls, ...)`), and nbdev's index
records them as `Cls.f`, so `show_doc(Cls.f)` asks mkdocstrings for `module.Cls.f`. Griffe reads the source without
running it and sees a module-level function `f`, several of them when more than one class gets an `f`. This
extension remembers each function decorated `@patch` (or `@patch(...)`) as it is visited and, once the package is
loaded, makes it a member of the class its first parameter's annotation names (a class of the same module, or one it
imports from the package): the API entry of `Cls.f` then renders with its own signature and docstring.
"""
from __future__ import annotations
import griffe


def _is_patch(expr) -> bool:
    "Whether a decorator expression is fastcore's `patch`: `@patch`, `@patch(...)`, `@fastcore.basics.patch`."
    s = str(expr)
    return s.split("(")[0].split(".")[-1] == "patch"


class FastcorePatch(griffe.Extension):
    "Attach every `@patch` function to the class named by its `self` annotation (see the module docstring)."
    def __init__(self):
        super().__init__()
        self.patched = []                                   # (function, its module, the class name) as visited

    def on_function_instance(self, *, node, func, agent, **kwargs) -> None:
        if not any(_is_patch(d.value) for d in func.decorators) or not func.parameters: return
        ann = func.parameters[0].annotation
        name = getattr(ann, "name", None) if ann is not None and not isinstance(ann, str) else ann
        if isinstance(name, str) and name.isidentifier() and func.parent is not None and func.parent.is_module:
            self.patched.append((func, func.parent, name))

    def on_package(self, *, pkg, loader, **kwargs) -> None:
        for func, mod, name in self.patched:
            target = mod.members.get(name)
            if target is None: continue
            if target.is_alias:
                try: target = target.final_target
                except Exception: continue                   # a class from outside the package: left as it is
            if not target.is_class or func.name in target.members: continue     # a method the class defines wins
            target.set_member(func.name, func)
        self.patched = []
