r"""MNIST, randomly projected MNIST and grayscale CIFAR-10, prepared as in the paper.

Supplement, "Details on datasets for Bayesian experiments": inputs flattened and normalized to zero
mean and unit variance, only the examples of the chosen D classes, P train and P_test test examples
selected with a deterministic seed, one-hot labels. The paper uses P = P_test = 1000 throughout; MNIST
with classes (0, 1) and (1, 2, 3), CIFAR-10 downscaled to 28x28 with ("cats", "horses"), ("cars",
"birds", "cats", "deers") and all ten classes (Figs. 1-3).

Choices where the paper is silent (also recorded in each data set's ``metadata``):

* "zero mean and unit variance" is read as one scalar mean and standard deviation over all pixels
  of the selected training inputs, applied to train and test (the authors' code also normalizes by
  one scalar pair; per-pixel standardization would divide by zero on MNIST's constant border pixels).
* The P examples are drawn without replacement from ``numpy.random.default_rng(seed)`` (train first,
  then test) among all examples of the chosen classes, and kept in file order.
* Column a of the one-hot labels is the a-th entry of ``classes``, in the order given.

Files are the canonical ones: the four MNIST IDX files (gzipped or not) in ``<root>/mnist/`` or
``<root>/``, and CIFAR-10's ``cifar-10-batches-py/`` (python version) in ``<root>/``, with ``root``
resolved by :func:`~renormpp.datasets.data_dir`. ``download=True`` (or :func:`fetch`, or ``renormpp data fetch``
on the command line) fetches what is missing from the canonical source and checks its MD5.
"""
from __future__ import annotations

import dataclasses
import functools
import gzip
import pickle
import struct
import tarfile
import zlib
from pathlib import Path

import jax
import numpy as np

from ._common import Dataset, check_positive_ints, data_dir, download, find_files, missing_error

MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MNIST_MD5 = {  # of the uncompressed files
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
MNIST_URLS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")  # checksums guard them
MNIST_CLASSES = tuple("0123456789")
AUTHORS_MNIST_STATS = (0.1307, 0.3081)  # mean and std of MNIST's training pixels scaled to [0, 1]

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_FILES = ("batches.meta", *(f"data_batch_{b}" for b in range(1, 6)), "test_batch")
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601-2, as Pillow's convert("L")
_ALIASES = {"car": "automobile", "plane": "airplane"}  # the paper says "cars"; CIFAR-10 says "automobile"

_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_CORRUPT = "it is corrupt or truncated: delete it and fetch it again"


def read_idx(path) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzipped or not (told by its content), into a numpy array.

    Raises ValueError for a bad magic number, a broken gzip stream, or a size that disagrees with the header.
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{path} is not a valid gzip file ({err}); {_CORRUPT}") from err
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file (magic number {raw[:4].hex() or 'missing'}); {_CORRUPT}")
    header = 4 + 4 * raw[3]
    shape = struct.unpack(f">{raw[3]}I", raw[4:header]) if len(raw) >= header else None
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    need = None if shape is None else header + dtype.itemsize * int(np.prod(shape))
    if need != len(raw):
        raise ValueError(f"{path} holds {len(raw)} bytes but its header (shape {shape}) needs {need}; {_CORRUPT}")
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


class _ArraysOnly(pickle.Unpickler):
    """CIFAR-10 batches hold dicts, lists, bytes and numpy arrays; refuse anything else (pickles can run code)."""

    def find_class(self, module, name):
        numpy = module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray") and name in (
            "_reconstruct", "ndarray", "dtype", "scalar")
        if numpy or (module, name) == ("_codecs", "encode"):  # how protocol-2 pickles from Python 3 store bytes
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not part of a CIFAR-10 batch")


def _unpickle(path: Path, keys) -> dict:
    with open(path, "rb") as f:
        try:
            d = _ArraysOnly(f, encoding="bytes").load()
        except Exception as err:  # truncated or garbled pickles fail in many ways
            raise ValueError(f"{path} is not a readable CIFAR-10 pickle ({err!r}); {_CORRUPT}") from err
    if not isinstance(d, dict) or not all(k in d for k in keys):
        raise ValueError(f"{path} is not a CIFAR-10 file: it lacks the keys {keys}; {_CORRUPT}")
    return d


def read_cifar_batch(path) -> tuple[np.ndarray, np.ndarray]:
    """Read one pickled CIFAR-10 batch (python version): images uint8 (n, 32, 32, 3) and labels (n,)."""
    d = _unpickle(Path(path), (b"data", b"labels"))
    data, labels = np.asarray(d[b"data"]), np.asarray(d[b"labels"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(f"{path}: data must be uint8 of shape (n, 3072); got {data.dtype} {data.shape}; {_CORRUPT}")
    _check_labels(data, labels, 10, path)
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels.astype(np.int64)


def _check_labels(images, labels, n_classes, where) -> None:
    if labels.ndim != 1 or len(labels) != len(images):
        raise ValueError(f"{where}: {len(labels)} labels for {len(images)} images; {_CORRUPT}")
    if len(labels) and not (labels.min() >= 0 and labels.max() < n_classes):
        raise ValueError(f"{where}: labels outside 0..{n_classes - 1}; {_CORRUPT}")


def locate(name: str, root=None) -> dict:
    """``{file name: path}`` of the files of data set ``name`` ("mnist" or "cifar10") where the loaders look for them:
    ``root``, else ``$RENORMPP_DATA``, else ``~/.cache/renormpp`` (:func:`~renormpp.datasets.data_dir`).

    Parameters
    ----------
    name : {"mnist", "cifar10"}
        The data set.
    root : str or path, optional
        The folder looked in first.

    Returns
    -------
    dict
        ``{file name: path}``.

    Raises
    ------
    FileNotFoundError
        Naming the missing files, the folders searched and how to get them.
    ValueError
        For an unknown name.
    """
    base = data_dir(root)
    if name == "mnist":
        dirs = [base / "mnist", base]
        files = find_files(MNIST_FILES, dirs, ("", ".gz"))
        what, names = "MNIST", [n + "[.gz]" for n in MNIST_FILES]
    elif name == "cifar10":
        dirs = [base / CIFAR10_DIR, base]
        files = find_files(CIFAR10_FILES, dirs)
        what, names = "CIFAR-10 (python version)", CIFAR10_FILES
    else:
        raise ValueError(f"unknown data set {name!r}; choose 'mnist' or 'cifar10'")
    if files is None:
        fetch_command = f"renormpp data fetch {name}" + ("" if root is None else f" --root {base}")
        raise missing_error(what, names, dirs, _by_hand(name, base), fetch_command)
    return files


def _by_hand(name: str, base: Path) -> str:
    if name == "mnist":
        return f"download them from {' or '.join(MNIST_URLS)} into {base / 'mnist'}"
    return f"download {CIFAR10_URL} and extract it in {base}"


def fetch(name: str, root=None) -> Path:
    """Download data set ``name`` ("mnist" or "cifar10") where the loaders look for it, unless it is there already;
    returns the folder that holds its files. Each download is checked against its MD5 and discarded if it fails.
    ``renormpp data fetch NAME [--root DIR]`` calls it.

    Parameters
    ----------
    name : {"mnist", "cifar10"}
        The data set.
    root : str or path, optional
        As for the loaders (:func:`~renormpp.datasets.data_dir`).

    Returns
    -------
    pathlib.Path
        The folder that holds the files.

    Raises
    ------
    ConnectionError
        When no source can be reached (the message says how to get the files by hand).
    ValueError
        For a download that fails its checksum, or an unknown name.
    """
    base = data_dir(root)
    try:
        locate(name, root)
    except FileNotFoundError:
        if name == "mnist":
            for file in MNIST_FILES:
                if find_files([file], [base / "mnist"], ("", ".gz")) is None:
                    download([url + file + ".gz" for url in MNIST_URLS], base / "mnist" / (file + ".gz"),
                             MNIST_MD5[file], gunzip=True, by_hand=_by_hand(name, base))
        else:
            tar = download([CIFAR10_URL], base / Path(CIFAR10_URL).name, CIFAR10_MD5, by_hand=_by_hand(name, base))
            with tarfile.open(tar) as t:
                t.extractall(base, filter="data")
            tar.unlink()
    return next(iter(locate(name, root).values())).parent


def _stamp(files: dict) -> tuple:
    """What identifies the contents of a data set's files without reading them: path, size and mtime of each."""
    return tuple((name, str(p), p.stat().st_size, p.stat().st_mtime_ns) for name, p in sorted(files.items()))


@functools.lru_cache(maxsize=2)
def _decoded(kind: str, stamp: tuple):
    """The decoded arrays of the files of ``stamp`` (read-only), kept for the next call: a sweep loads its data set
    once per point and once per report (MNIST 0.25 s, CIFAR-10 0.3 s each time); the size and mtime in the stamp
    make an updated file read again."""
    files = {name: Path(path) for name, path, _, _ in stamp}
    if kind == "mnist":
        arrays = tuple(read_idx(files[n]) for n in MNIST_FILES)
    else:
        train = [read_cifar_batch(files[f"data_batch_{b}"]) for b in range(1, 6)]
        arrays = (*(np.concatenate(a) for a in zip(*train)), *read_cifar_batch(files["test_batch"]))
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _mnist_arrays(root, download: bool):
    if download:
        fetch("mnist", root)
    files = locate("mnist", root)
    x, y, x0, y0 = _decoded("mnist", _stamp(files))
    for images, labels, name in ((x, y, MNIST_FILES[1]), (x0, y0, MNIST_FILES[3])):
        if images.ndim != 3:
            raise ValueError(f"{files[name].parent}: MNIST images must have shape (n, rows, cols); got {images.shape}")
        _check_labels(images, labels, 10, files[name])
    return (x, y), (x0, y0), files[MNIST_FILES[0]].parent


def _cifar10_arrays(root, download: bool):
    if download:
        fetch("cifar10", root)
    files = locate("cifar10", root)
    names = _unpickle(files["batches.meta"], (b"label_names",))[b"label_names"]
    if len(names) != 10:
        raise ValueError(f"{files['batches.meta']}: expected 10 class names, got {len(names)}; {_CORRUPT}")
    x, y, x0, y0 = _decoded("cifar10", _stamp(files))
    return (x, y), (x0, y0), tuple(n.decode() for n in names), files["test_batch"].parent


def _class_indices(classes, names) -> tuple:
    """Indices of ``classes`` (indices, names, plurals, or "all") among ``names``."""
    if isinstance(classes, str) and classes.lower() == "all":
        return tuple(range(len(names)))
    lookup = {n.lower(): i for i, n in enumerate(names)}
    out = []
    for c in (classes,) if isinstance(classes, (str, int, np.integer)) else classes:
        i = None
        if isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c < len(names):
            i = int(c)
        elif isinstance(c, str):
            keys = (c.strip().lower(), c.strip().lower().removesuffix("s"))
            i = next((lookup[_ALIASES.get(k, k)] for k in keys if _ALIASES.get(k, k) in lookup), None)
        if i is None:
            raise ValueError(f"unknown class {c!r}; choose among {', '.join(names)} (by name or index) or 'all'")
        out.append(i)
    if not out or len(set(out)) != len(out):
        raise ValueError(f"classes must be one or more distinct classes; got {classes!r}")
    return tuple(out)


def _pick(labels, idx, n: int, rng, split: str) -> np.ndarray:
    pool = np.flatnonzero(np.isin(labels, idx))
    if n > len(pool):
        raise ValueError(f"asked for {n} {split} examples, but the {split} set holds only {len(pool)} of the chosen "
                         f"classes; ask for at most {len(pool)}")
    return pool[:n] if rng is None else np.sort(rng.choice(pool, n, replace=False))


def _prepare(name, train, test, names, classes, P, P_test, seed, *, transform, first=False, stats=None, **meta):
    """Shared by the image loaders: keep the chosen classes, select P train and P_test test examples (at
    random from ``seed``, or the first ones in file order), transform and flatten, normalize (by ``stats``,
    or by the mean and std of the selected training inputs), one-hot encode. ``meta`` goes to the metadata."""
    check_positive_ints(P=P, P_test=P_test)
    idx = _class_indices(classes, names)
    rng = None if first else np.random.default_rng(seed)
    (x, y), (x0, y0) = train, test
    tr, te = _pick(y, idx, P, rng, "train"), _pick(y0, idx, P_test, rng, "test")
    X = np.asarray(transform(x[tr]), np.float64).reshape(P, -1)
    X_test = np.asarray(transform(x0[te]), np.float64).reshape(P_test, -1)
    normalization = ("(x - mean) / std with fixed constants" if stats else
                     "(x - mean) / std with one mean and std over all pixels of the selected training inputs")
    if stats is None:
        stats = X.mean(), X.std()
        if not stats[1] > 0:
            raise ValueError("the selected training inputs are constant: they cannot be scaled to unit variance")
    mean, std = map(float, stats)
    one_hot = lambda labels: (labels[:, None] == np.array(idx)).astype(np.float64)  # noqa: E731
    selection = ("the first P (P_test) examples of the classes in file order" if first else
                 f"drawn without replacement by numpy default_rng({seed}), train then test, kept in file order")
    meta.update(classes=idx, seed=seed, P=P, P_test=P_test, N0=X.shape[1], selection=selection,
                normalization=normalization, mean=mean, std=std, train_indices=tr, test_indices=te)
    return Dataset(X=(X - mean) / std, Y=one_hot(y[tr]), X_test=(X_test - mean) / std, Y_test=one_hot(y0[te]),
                   name=name, class_names=tuple(names[i] for i in idx), metadata=meta)


def mnist(classes=(0, 1), P: int = 1000, P_test: int = 1000, *, root=None, seed: int = 0,
          preprocessing: str = "supplement", download: bool = False) -> Dataset:
    r"""MNIST restricted to ``classes``, flattened (N0 = 784), normalized, with one-hot labels (D = len(classes)).

    ``preprocessing``:

    * ``"supplement"`` (default): the supplement's recipe. P train examples (from the 60,000) and P_test test
      examples (from the 10,000) of the chosen classes drawn at random from ``seed``; pixels (0..255) shifted
      and scaled by the mean and standard deviation of all pixels of the selected training images, so that
      X has zero mean and unit variance.
    * ``"authors_code"``: what the authors' code does: pixels scaled to [0, 1], then
      :math:`(x - 0.1307)/0.3081` (MNIST's usual constants), and the first P (P_test) examples of the
      chosen classes in file order; ``seed`` is not used.

    ``metadata`` holds the file positions of the selected examples (``train_indices``, ``test_indices``),
    the ``mean`` and ``std`` used, and where the files were read (``source``).

    Parameters
    ----------
    classes : sequence or "all", default (0, 1)
        Digits (ints or strings), or ``"all"``; the paper uses (0, 1) and (1, 2, 3).
    P : int, default 1000
        Training examples.
    P_test : int, default 1000
        Test examples.
    root : str or path, optional
        Where the files are: ``root``, else ``$RENORMPP_DATA``, else ``~/.cache/renormpp``
        (:func:`~renormpp.datasets.data_dir`).
    seed : int, default 0
        The seed of the selection (``"supplement"``).
    preprocessing : {"supplement", "authors_code"}
        The recipe, as above.
    download : bool, default False
        Download the files (:func:`~renormpp.datasets.fetch`) where they are missing.

    Returns
    -------
    Dataset
        ``X``, ``Y`` (train) and ``X_test``, ``Y_test`` in float64, with ``metadata``.

    Raises
    ------
    FileNotFoundError
        Where the files are missing and ``download`` is False (the message says how to get them).
    ValueError
        For unknown classes or recipe, or more examples than the classes have.
    """
    recipes = {"supplement": dict(transform=lambda x: x, pixels="0..255"),
               "authors_code": dict(transform=lambda x: x / 255.0, pixels="divided by 255", first=True,
                                    stats=AUTHORS_MNIST_STATS)}
    if preprocessing not in recipes:
        raise ValueError(f"unknown preprocessing {preprocessing!r}; choose 'supplement' or 'authors_code'")
    train, test, where = _mnist_arrays(root, download)
    return _prepare("mnist", train, test, MNIST_CLASSES, classes, P, P_test, seed, preprocessing=preprocessing,
                    source=str(where), **recipes[preprocessing])


def projected_mnist(N0: int = 144, classes=(0, 1), P: int = 1000, P_test: int = 1000, *, root=None, seed: int = 0,
                    preprocessing: str = "supplement", download: bool = False) -> Dataset:
    r"""Randomly projected MNIST (supplement): :math:`x_{proj} = \mathrm{ReLU}(\Pi x/\sqrt{\tilde N_0})`.

    ``x`` are the normalized MNIST inputs of :func:`mnist`, :math:`\tilde N_0 = 784`, and
    :math:`\Pi \in \mathbb R^{N_0\times\tilde N_0}` has standard normal entries drawn by
    ``numpy.random.default_rng([seed, 1]).standard_normal((N0, 784))``; the same :math:`\Pi` maps train and
    test. Labels stay one-hot. The supplement (Fig. S1) uses N0 = 12² and 28² with D = 2.

    Choice: the supplement projects "the raw input images"; we project the normalized ones, so that
    :math:`\Pi x/\sqrt{\tilde N_0}` has about unit variance before the ReLU. No normalization after it.

    Parameters
    ----------
    N0 : int, default 144
        The projected dimension.
    classes, P, P_test, root, seed, preprocessing, download
        As for :func:`mnist`.

    Returns
    -------
    Dataset
    """
    check_positive_ints(N0=N0)
    data = mnist(classes, P, P_test, root=root, seed=seed, preprocessing=preprocessing, download=download)
    Pi = np.random.default_rng([seed, 1]).standard_normal((N0, data.X.shape[1]))
    project = lambda X: np.maximum(X @ Pi.T / np.sqrt(Pi.shape[1]), 0.0)  # noqa: E731
    meta = dict(data.metadata, N0=N0, N0_original=data.X.shape[1],
                projection=f"ReLU(Pi x / sqrt(784)), Pi = default_rng([{seed}, 1]).standard_normal(({N0}, 784)), "
                           "applied to the normalized MNIST inputs")
    return dataclasses.replace(data, X=project(data.X), X_test=project(data.X_test), name="projected-mnist",
                               metadata=meta)


def _grayscale(images: np.ndarray, size: int) -> np.ndarray:
    """RGB (n, 32, 32, 3) -> luma (n, size, size): ITU-R 601-2 weights, antialiased linear resize."""
    gray = images.astype(np.float32) @ np.array(LUMA, np.float32)
    if gray.shape[1:] != (size, size):
        gray = jax.image.resize(gray, (len(gray), size, size), method="linear", antialias=True)
    return np.asarray(gray)


def cifar10(classes=("cat", "horse"), P: int = 1000, P_test: int = 1000, *, size: int = 28, root=None,
            seed: int = 0, download: bool = False) -> Dataset:
    r"""Grayscale CIFAR-10 downscaled to ``size`` x ``size`` (N0 = size², 28² in the paper), normalized, one-hot.

    Reads the canonical python batches (``cifar-10-batches-py/``). Each image becomes luma
    :math:`L = 0.299R + 0.587G + 0.114B` (ITU-R 601-2, as Pillow's ``convert("L")``), is resized with an
    antialiased linear (triangle) filter (``jax.image.resize``; the same filter as Pillow's and
    torchvision's bilinear downscaling), flattened, and normalized like :func:`mnist`'s ``"supplement"``
    recipe: examples drawn from ``seed``, one scalar mean and standard deviation from the selected training
    images.

    Choices: the luma is kept in float (no rounding to 8 bits) and the resize works in float32.

    Parameters
    ----------
    classes : sequence or "all", default ("cat", "horse")
        Names (``"cat"``, the paper's plurals ``"cats"``, ``"cars"`` for ``automobile``, ``"deers"``), indices, or
        ``"all"``. The default is Fig. 1c's D = 2 task; the paper also uses ("cars", "birds", "cats", "deers") and
        all ten classes.
    P : int, default 1000
        Training examples.
    P_test : int, default 1000
        Test examples.
    size : int, default 28
        The side of the downscaled images (N0 = size²).
    root : str or path, optional
        Where the files are: ``root``, else ``$RENORMPP_DATA``, else ``~/.cache/renormpp``
        (:func:`~renormpp.datasets.data_dir`).
    seed : int, default 0
        The seed of the selection.
    download : bool, default False
        Download the files (:func:`~renormpp.datasets.fetch`) where they are missing.

    Returns
    -------
    Dataset
        ``X``, ``Y`` (train) and ``X_test``, ``Y_test`` in float64, with ``metadata``.

    Raises
    ------
    FileNotFoundError
        Where the files are missing and ``download`` is False (the message says how to get them).
    ValueError
        For unknown classes, or more examples than the classes have.
    """
    check_positive_ints(size=size)
    train, test, names, where = _cifar10_arrays(root, download)
    return _prepare("cifar10", train, test, names, classes, P, P_test, seed,
                    transform=lambda x: _grayscale(x, size), preprocessing="supplement", size=size, grayscale="ITU-R 601-2 luma, float",
                    resize="antialiased linear (jax.image.resize)", source=str(where))
