r"""The patch geometry of a one-hidden-layer convolutional network (Aiudi et al., Nat. Commun. 16 (2025),
arXiv:2307.11807, and rpacelli/deepbays' CONV_1HL conventions).

A square single-channel image of side s, stored as a row of X (length :math:`N_0 = s^2`, row-major), is cut into
non-overlapping :math:`m \times m` patches :math:`x_i`, :math:`n_p = (s/m)^2` of them, numbered row-major over the
grid of patches; each patch is a vector of :math:`m^2` pixels, row-major inside the patch. The network's
pre-activations are :math:`h_{ci} = w_c \cdot x_i / m` (one filter :math:`w_c` per channel, shared by all patches).

:class:`Patches` holds (image_shape, patch), checks them against the data, and cuts X into patches
(:meth:`Patches.extract`), for NumPy and JAX arrays alike; :func:`as_patches` accepts a :class:`Patches` or a dict
``{"image_shape": (s, s), "patch": m}``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Union

from ._checks import positive_int


def _shape(image_shape) -> tuple:
    """``image_shape`` as a tuple: the side s (an int) is (s, s); a string "s" or "s x s" (``"28x28"``, as a config
    writes it) is read; anything else is taken as a sequence."""
    if isinstance(image_shape, str):
        sides = re.fullmatch(r"\s*(\d+)\s*(?:[xX×]\s*(\d+)\s*)?", image_shape)
        if sides is None:
            raise ValueError(f"image_shape = {image_shape!r} is not an image shape: give the side in pixels (28) or "
                             "'side x side' ('28x28')")
        return tuple(int(g or sides.group(1)) for g in sides.groups())
    return tuple(image_shape) if hasattr(image_shape, "__len__") else (image_shape,) * 2


@dataclass(frozen=True)
class Patches:
    """Square images of shape ``image_shape`` = (s, s) (or the side s, or ``"s x s"``) cut into non-overlapping
    ``patch`` x ``patch`` patches."""

    image_shape: tuple
    patch: int

    def __post_init__(self):
        shape = _shape(self.image_shape)
        if len(shape) != 2:
            raise ValueError(f"image_shape must be (side, side) for square single-channel images; got {shape}")
        s = tuple(positive_int("image_shape", v, "image side in pixels") for v in shape)
        if s[0] != s[1]:
            raise ValueError(f"the convolutional network takes square images; got image_shape {s}. Crop or pad the "
                             "images to a square")
        m = positive_int("patch", self.patch, "patch side in pixels")
        if s[0] % m:
            raise ValueError(f"patch = {m} does not divide the image side {s[0]}: the patches do not overlap and must "
                             f"tile the image. Choose a divisor of {s[0]}: "
                             f"{', '.join(str(d) for d in range(1, s[0] + 1) if s[0] % d == 0)}")
        object.__setattr__(self, "image_shape", s)
        object.__setattr__(self, "patch", m)

    @property
    def side(self) -> int:
        return self.image_shape[0]

    @property
    def n_patches(self) -> int:
        """:math:`n_p = (s/m)^2`."""
        return (self.side // self.patch) ** 2

    @property
    def patch_size(self) -> int:
        """:math:`m^2`, the pixels of one patch."""
        return self.patch ** 2

    def check(self, N0: int, name: str = "X") -> None:
        """A ValueError unless rows of length ``N0`` are images of this shape."""
        if N0 != self.side ** 2:
            raise ValueError(f"{name} has {N0} columns, but image_shape {self.image_shape} needs {self.side ** 2} "
                             f"(side x side pixels, row-major); give the image_shape of the data")

    def extract(self, X):
        """X (P, s*s) -> (P, n_p, m*m): the patches of every image (NumPy or JAX, whichever X is)."""
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-d array (P, side*side); got shape {X.shape}")
        self.check(X.shape[1])
        g, m = self.side // self.patch, self.patch
        return X.reshape(X.shape[0], g, m, g, m).transpose(0, 1, 3, 2, 4).reshape(X.shape[0], g * g, m * m)


PatchesLike = Union[Patches, Mapping]


def as_patches(conv: PatchesLike) -> Patches:
    """A :class:`Patches` from itself or from ``{"image_shape": (s, s), "patch": m}``."""
    if isinstance(conv, Patches):
        return conv
    if isinstance(conv, Mapping):
        unknown = set(conv) - {"image_shape", "patch"}
        if unknown or not {"image_shape", "patch"} <= set(conv):
            raise ValueError(f"conv must be dict(image_shape=(side, side), patch=m); got keys {sorted(conv)}")
        return Patches(tuple(conv["image_shape"]) if not isinstance(conv["image_shape"], int)
                       else conv["image_shape"], conv["patch"])
    raise TypeError(f"conv must be a renormpp.patches.Patches or dict(image_shape=(side, side), patch=m); got "
                    f"{type(conv).__name__}")
