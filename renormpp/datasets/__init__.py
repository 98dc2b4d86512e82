r"""Data sets of the paper (supplement, "Details on datasets for Bayesian experiments", "Low-dimensional data").

Every loader returns a :class:`Dataset`: float64 ``X``, ``Y``, ``X_test``, ``Y_test``, the ``class_names``
and a ``metadata`` dict with the seed and the choices made.

* :func:`synthetic`: Gaussian inputs, linear or 1HL-erf teacher (Fig. 1a, Fig. S1a).
* :func:`mnist`: MNIST classes, one-hot (Fig. 1b); :func:`projected_mnist`: ReLU random projection (Fig. S1b).
* :func:`cifar10`: grayscale CIFAR-10 downscaled to 28x28, one-hot (Fig. 1c-d, Fig. 2).
* :func:`low_dimensional`: the five-target regression with N0 = 12 (Fig. 4).

Files are looked for under :func:`data_dir`: the ``root`` argument, else ``$RENORMPP_DATA``, else
``~/.cache/renormpp``; ``download=True`` (or :func:`fetch`, or ``renormpp data fetch mnist|cifar10|all`` on the
command line) fetches missing files from the canonical source and checks them; :func:`locate` says where the
files of a data set are found (or which are missing, and where it looked).
"""
from ._common import Dataset, data_dir
from .synthetic import TEACHERS, low_dimensional, low_dimensional_targets, synthetic
from .vision import cifar10, fetch, locate, mnist, projected_mnist, read_cifar_batch, read_idx

__all__ = ["Dataset", "data_dir", "TEACHERS", "synthetic", "low_dimensional", "low_dimensional_targets", "mnist",
           "projected_mnist", "cifar10", "fetch", "locate", "read_idx", "read_cifar_batch"]
