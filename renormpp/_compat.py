"""Work-arounds for other packages' import behaviour, applied once when renormpp is imported."""
from __future__ import annotations

import sys


def link_submodules(package: str) -> None:
    """Make every imported submodule of ``package`` an attribute of its parent package again.

    ArviZ (``arviz_base``) imports NumPyro lazily (``lazy_loader``, i.e. ``importlib.util.LazyLoader``). When
    ``arviz`` is imported before NumPyro, the lazily executed ``numpyro`` package binds some submodules in
    ``sys.modules`` without setting them as attributes of their parents: ``numpyro.infer.initialization`` exists
    but ``numpyro.infer.initialization`` raises AttributeError, and ``arviz.from_numpyro``, which reads that
    attribute, fails. Importing renormpp imports NumPyro; this restores the attributes, whatever the import order.
    """
    prefix = package + "."
    for name, module in list(sys.modules.items()):
        if not name.startswith(prefix) or module is None:
            continue
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is not None and child not in vars(parent):
            setattr(parent, child, module)
