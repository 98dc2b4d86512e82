"""Data sets: parsers on tiny files written here in the canonical formats, the real files where the loaders find them
where present, downloads from a loopback HTTP server, and the synthetic sets against independent formulas."""
import functools
import gzip
import hashlib
import inspect
import io
import math
import pickle
import socket
import struct
import sys
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import renormpp as rp
from renormpp.datasets import vision

from realdata import missing
MNIST_NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
CIFAR_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
# known MNIST class totals, digits 0..9
MNIST_TRAIN_COUNTS = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
MNIST_TEST_COUNTS = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)

needs_mnist = pytest.mark.skipif(missing("mnist") is not None, reason=missing("mnist") or "")
MNIST = None if missing("mnist") else rp.datasets.locate("mnist")["train-images-idx3-ubyte"].parent


# ---------------------------------------------------------------- files in the canonical formats, written here
def write_idx(path, a, gz=False):
    code = {np.uint8: 0x08, np.int32: 0x0C, np.float64: 0x0E}[a.dtype.type]
    raw = bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.astype(a.dtype.newbyteorder(">")).tobytes()
    path.write_bytes(gzip.compress(raw) if gz else raw)


def write_mnist(folder, gz=True, seed=0):
    """Tiny MNIST: 40 train and 20 test images of 6x5 pixels; labels cycle through 0..3."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = [rng.integers(0, 256, (40, 6, 5), dtype=np.uint8), (np.arange(40) % 4).astype(np.uint8),
              rng.integers(0, 256, (20, 6, 5), dtype=np.uint8), (np.arange(20) % 4).astype(np.uint8)]
    for name, a in zip(MNIST_NAMES, arrays):
        write_idx(folder / (name + (".gz" if gz else "")), a, gz)
    return arrays


def write_cifar(root, seed=0):
    """Tiny cifar-10-batches-py: 5 x 8 train images (4 a class) and 20 test images (2 a class)."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k, (name, n) in enumerate([(f"data_batch_{b}", 8) for b in range(1, 6)] + [("test_batch", 20)]):
        x = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)  # height, width, channel
        y = (8 * k + np.arange(n)) % 10
        batch = {b"batch_label": name.encode(), b"labels": [int(c) for c in y],
                 b"data": x.transpose(0, 3, 1, 2).reshape(n, 3072), b"filenames": [b"x.png"] * n}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
        out.append((x, y))
    (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": [c.encode() for c in CIFAR_NAMES]}))
    train = tuple(np.concatenate(a) for a in zip(*out[:5]))
    return train, out[5]


@pytest.fixture(scope="session")
def cifar_root():
    """The folder that holds the real CIFAR-10's cifar-10-batches-py/, found by the loaders' rules."""
    if missing("cifar10"):
        pytest.skip(missing("cifar10"))
    return rp.datasets.locate("cifar10")["test_batch"].parent.parent


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def serve(monkeypatch):
    """Serve folders over HTTP on loopback: serve(folder) -> base URL."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    servers = []

    def start(folder):
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def unzipped_md5(path):
    return hashlib.md5(gzip.decompress(path.read_bytes())).hexdigest()


def pixels(data, split=""):
    """Undo the normalization: the pixels before it, from the recorded mean and std."""
    return getattr(data, "X" + split) * data.metadata["std"] + data.metadata["mean"]


def pillow_gray_resized(rgb, size=28):
    """Float ITU-R 601-2 luma, resized by Pillow's antialiased bilinear filter (an implementation apart from jax's)."""
    luma = rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
    return np.stack([np.asarray(Image.fromarray(im).resize((size, size), Image.Resampling.BILINEAR)).ravel()
                     for im in luma])


# ---------------------------------------------------------------- IDX parser
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_reads_every_dtype(tmp_path, gz):
    rng = np.random.default_rng(1)
    for a in (rng.integers(0, 256, (3, 4, 5), dtype=np.uint8), rng.integers(-9, 9, 7, dtype=np.int32),
              rng.standard_normal((2, 3))):
        write_idx(tmp_path / "a", a, gz)
        got = rp.datasets.read_idx(tmp_path / "a")
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, a)


def _corrupt(raw):
    return {"truncated": raw[:-1], "trailing byte": raw + b"\0", "bad magic": b"\1" + raw[1:], "empty": b"",
            "truncated gzip": gzip.compress(raw)[:-9],
            "garbled gzip": (lambda z: z[:20] + bytes(b ^ 0xFF for b in z[20:40]) + z[40:])(gzip.compress(raw))}


@pytest.mark.parametrize("kind", list(_corrupt(b"")))
def test_read_idx_refuses_corrupt_files(tmp_path, kind):
    write_idx(tmp_path / "ok", np.arange(600, dtype=np.uint8).reshape(6, 10, 10) % 251)
    (tmp_path / "bad").write_bytes(_corrupt((tmp_path / "ok").read_bytes())[kind])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        rp.datasets.read_idx(tmp_path / "bad")


# ---------------------------------------------------------------- MNIST on tiny files
@pytest.mark.parametrize("gz, sub", [(True, "mnist"), (False, "")])
def test_mnist_selects_normalizes_and_one_hot_encodes(tmp_path, gz, sub):
    x, y, x0, y0 = write_mnist(tmp_path / sub, gz=gz)
    d = rp.datasets.mnist(classes=(2, 0), P=12, P_test=6, root=tmp_path, seed=3)
    tr, te = d.metadata["train_indices"], d.metadata["test_indices"]
    assert len(set(tr)) == 12 and len(set(te)) == 6 and set(y[tr]) == {0, 2} and set(y0[te]) == {0, 2}
    raw, raw0 = x[tr].reshape(12, 30).astype(float), x0[te].reshape(6, 30).astype(float)
    np.testing.assert_allclose(d.X, (raw - raw.mean()) / raw.std(), atol=1e-12)
    np.testing.assert_allclose(d.X_test, (raw0 - raw.mean()) / raw.std(), atol=1e-12)  # train statistics
    np.testing.assert_array_equal(d.Y, np.stack([y[tr] == 2, y[tr] == 0], 1))   # column a = classes[a]
    np.testing.assert_array_equal(d.Y_test, np.stack([y0[te] == 2, y0[te] == 0], 1))
    assert d.class_names == ("2", "0") and d.X.dtype == d.Y.dtype == np.float64
    assert d.metadata["seed"] == 3 and d.metadata["preprocessing"] == "supplement"
    assert "'train_indices': '<array (12,)>'" in repr(d)  # arrays in the metadata are shown by shape


def test_a_data_set_is_decoded_once_and_again_when_a_file_changes(tmp_path, monkeypatch):
    """A sweep loads its data set once per point and per report: the decoded files are kept (read-only), and read
    again when a file's size or mtime changes."""
    import os

    vision._decoded.cache_clear()
    calls, read_idx = [], vision.read_idx
    monkeypatch.setattr(vision, "read_idx", lambda path: calls.append(path) or read_idx(path))
    write_mnist(tmp_path, gz=False, seed=0)
    first = rp.datasets.mnist(classes=(0, 1), P=8, P_test=4, root=tmp_path)
    again = rp.datasets.mnist(classes=(0, 1), P=8, P_test=4, root=tmp_path)
    assert len(calls) == 4 and np.array_equal(first.X, again.X)
    x, *_ = vision._mnist_arrays(tmp_path, False)[0]
    with pytest.raises(ValueError, match="read-only"):
        x[0, 0, 0] = 1  # nothing a caller does changes what the next one gets
    write_mnist(tmp_path, gz=False, seed=1)  # new pixels, same sizes: the mtime tells
    stamp = (tmp_path / MNIST_NAMES[0]).stat().st_mtime_ns
    os.utime(tmp_path / MNIST_NAMES[0], ns=(stamp + 10**9, stamp + 10**9))
    changed = rp.datasets.mnist(classes=(0, 1), P=8, P_test=4, root=tmp_path)
    assert len(calls) == 8 and not np.array_equal(first.X, changed.X)


def test_mnist_seed_decides_the_selection(tmp_path):
    write_mnist(tmp_path)
    a, b, c = (rp.datasets.mnist(classes=(1, 3), P=10, P_test=5, root=tmp_path, seed=s) for s in (5, 5, 6))
    for k in ("X", "Y", "X_test", "Y_test"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    assert not np.array_equal(a.metadata["train_indices"], c.metadata["train_indices"])
    assert not np.array_equal(a.X, c.X)


def test_mnist_authors_code_takes_the_first_examples(tmp_path):
    x, y, x0, y0 = write_mnist(tmp_path)
    d = rp.datasets.mnist(classes=(3, 1), P=5, P_test=4, root=tmp_path, preprocessing="authors_code", seed=9)
    first, first0 = [i for i in range(40) if y[i] in (1, 3)][:5], [i for i in range(20) if y0[i] in (1, 3)][:4]
    np.testing.assert_allclose(d.X, (x[first].reshape(5, -1) / 255 - 0.1307) / 0.3081, atol=1e-12)
    np.testing.assert_allclose(d.X_test, (x0[first0].reshape(4, -1) / 255 - 0.1307) / 0.3081, atol=1e-12)
    np.testing.assert_array_equal(d.Y[:, 0], y[first] == 3)


@pytest.mark.parametrize("kw, match", [
    (dict(P=11), "holds only 10 of the chosen classes"), (dict(P_test=6), "holds only 5"),
    (dict(classes=(1, 1)), "distinct"), (dict(classes=(1, 12)), "unknown class 12"),
    (dict(classes=("seven",)), "unknown class 'seven'"), (dict(classes=()), "one or more"),
    (dict(P=0), "P must be a positive integer"), (dict(preprocessing="torch"), "unknown preprocessing")])
def test_mnist_bad_arguments(tmp_path, kw, match):
    write_mnist(tmp_path)
    with pytest.raises(ValueError, match=match):
        rp.datasets.mnist(**{"classes": (1,), "P": 3, "P_test": 3, "root": tmp_path, **kw})


@pytest.mark.parametrize("which, array, match", [
    (1, np.zeros(39, np.uint8), "39 labels for 40 images"), (3, np.full(20, 10, np.uint8), "labels outside 0..9"),
    (0, np.zeros((40, 30), np.uint8), "shape \\(n, rows, cols\\)"), (0, np.zeros((40, 6, 5), np.uint8), "constant")])
def test_mnist_refuses_inconsistent_files(tmp_path, which, array, match):
    write_mnist(tmp_path)
    write_idx(tmp_path / (MNIST_NAMES[which] + ".gz"), array, gz=True)
    with pytest.raises(ValueError, match=match):
        rp.datasets.mnist(classes=(1,), P=2, P_test=2, root=tmp_path)


def test_where_data_lives(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RENORMPP_DATA", raising=False)
    assert rp.datasets.data_dir() == tmp_path / "home" / ".cache" / "renormpp"
    monkeypatch.setenv("RENORMPP_DATA", str(tmp_path / "env"))
    assert rp.datasets.data_dir() == tmp_path / "env"
    assert rp.datasets.data_dir(tmp_path / "arg") == tmp_path / "arg"
    x = write_mnist(tmp_path / "env" / "mnist")[0]
    d = rp.datasets.mnist(classes=(0,), P=3, P_test=2)  # found through RENORMPP_DATA
    np.testing.assert_allclose(pixels(d), x[d.metadata["train_indices"]].reshape(3, -1), atol=1e-9)
    with pytest.raises(FileNotFoundError):
        rp.datasets.mnist(classes=(0,), P=3, P_test=2, root=tmp_path / "arg")  # root wins over the variable


def test_missing_files_say_what_where_and_how(tmp_path):
    write_mnist(tmp_path / "mnist")
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError) as err:
        rp.datasets.mnist(root=tmp_path)
    msg = str(err.value)
    assert all(n in msg for n in MNIST_NAMES) and str(tmp_path / "mnist") in msg and "https://" in msg
    assert "download=True" in msg and "RENORMPP_DATA" in msg and f"renormpp data fetch mnist --root {tmp_path}" in msg
    with pytest.raises(FileNotFoundError, match="test_batch.*cifar-10-batches-py.*cifar-10-python.tar.gz and extract it in"):
        rp.datasets.cifar10(root=tmp_path)


# ---------------------------------------------------------------- downloads from a loopback server
def test_mnist_download_tries_mirrors_and_checks_checksums(tmp_path, serve, monkeypatch):
    write_mnist(tmp_path / "site")
    md5 = {n: unzipped_md5(tmp_path / "site" / f"{n}.gz") for n in MNIST_NAMES}
    monkeypatch.setattr(vision, "MNIST_MD5", md5)
    monkeypatch.setattr(vision, "MNIST_URLS", (closed_port_url(), serve(tmp_path / "site")))
    d = rp.datasets.mnist(classes=(0, 1), P=4, P_test=2, root=tmp_path / "cache", download=True)
    assert sorted(p.name for p in (tmp_path / "cache" / "mnist").iterdir()) == sorted(f"{n}.gz" for n in MNIST_NAMES)
    ref = rp.datasets.mnist(classes=(0, 1), P=4, P_test=2, root=tmp_path / "site")
    np.testing.assert_array_equal(d.X, ref.X)


def test_download_discards_a_file_with_the_wrong_checksum(tmp_path, serve, monkeypatch):
    write_mnist(tmp_path / "site")
    monkeypatch.setattr(vision, "MNIST_URLS", (serve(tmp_path / "site"),))  # canonical checksums: no match
    with pytest.raises(ValueError, match="checksum mismatch.*train-images-idx3-ubyte.gz"):
        rp.datasets.mnist(root=tmp_path / "cache", download=True)
    assert list((tmp_path / "cache" / "mnist").iterdir()) == []


@pytest.mark.parametrize("reachable", [False, True])
def test_download_fails_cleanly_without_a_source(tmp_path, serve, monkeypatch, reachable):
    url = serve(tmp_path) if reachable else closed_port_url()  # an empty site answers 404
    monkeypatch.setattr(vision, "MNIST_URLS", (url,))
    with pytest.raises(ConnectionError, match="could not download train-images-idx3-ubyte.gz") as err:
        rp.datasets.mnist(root=tmp_path / "cache", download=True)
    assert url in str(err.value) and ("HTTP 404" in str(err.value) if reachable else "refused" in str(err.value))
    assert str(tmp_path / "cache" / "mnist") in str(err.value)


@needs_mnist
def test_mnist_download_of_the_real_files(tmp_path, serve, monkeypatch):
    """The real files over loopback pass the canonical checksums (which the README's prefixes confirm)."""
    assert [vision.MNIST_MD5[n][:8] for n in MNIST_NAMES] == ["6bbc9ace", "a25bea73", "2646ac64", "27ae3e4e"]
    monkeypatch.setattr(vision, "MNIST_URLS", (serve(MNIST),))
    d = rp.datasets.mnist(root=tmp_path, download=True)
    np.testing.assert_array_equal(d.X, rp.datasets.mnist(root=MNIST).X)


def test_cifar10_download_extracts_the_archive(tmp_path, serve, monkeypatch):
    write_cifar(tmp_path / "build")
    with tarfile.open(tmp_path / "site.tar.gz", "w:gz") as t:
        t.add(tmp_path / "build" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    monkeypatch.setattr(vision, "CIFAR10_URL", serve(tmp_path) + "site.tar.gz")
    monkeypatch.setattr(vision, "CIFAR10_MD5", hashlib.md5((tmp_path / "site.tar.gz").read_bytes()).hexdigest())
    d = rp.datasets.cifar10(P=4, P_test=2, root=tmp_path / "cache", download=True)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["cifar-10-batches-py"]  # archive removed
    np.testing.assert_array_equal(d.X, rp.datasets.cifar10(P=4, P_test=2, root=tmp_path / "build").X)


def serve_tiny_sets(tmp_path, serve, monkeypatch):
    """Tiny MNIST and CIFAR-10 served over loopback as the canonical sources (checksums to match); their folders."""
    write_mnist(tmp_path / "site")
    monkeypatch.setattr(vision, "MNIST_MD5", {n: unzipped_md5(tmp_path / "site" / f"{n}.gz") for n in MNIST_NAMES})
    monkeypatch.setattr(vision, "MNIST_URLS", (serve(tmp_path / "site"),))
    write_cifar(tmp_path / "build")
    with tarfile.open(tmp_path / "site" / "cifar.tar.gz", "w:gz") as t:
        t.add(tmp_path / "build" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    monkeypatch.setattr(vision, "CIFAR10_URL", vision.MNIST_URLS[0] + "cifar.tar.gz")
    tar_md5 = hashlib.md5((tmp_path / "site" / "cifar.tar.gz").read_bytes()).hexdigest()
    monkeypatch.setattr(vision, "CIFAR10_MD5", tar_md5)
    return tmp_path / "site", tmp_path / "build"


def test_data_fetch_command(tmp_path, serve, monkeypatch, capsys):
    """`renormpp data fetch all --root DIR` puts both sets where the loaders find them; a second fetch is a no-op."""
    from renormpp.cli import main

    mnist_site, cifar_build = serve_tiny_sets(tmp_path, serve, monkeypatch)
    root = tmp_path / "data"
    assert main(["data", "fetch", "all", "--root", str(root)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == ["mnist:", str(root / "mnist"), "cifar10:", str(root / "cifar-10-batches-py")]
    assert sorted(p.name for p in root.iterdir()) == ["cifar-10-batches-py", "mnist"]
    np.testing.assert_array_equal(rp.datasets.mnist(P=4, P_test=2, root=root).X,
                                  rp.datasets.mnist(P=4, P_test=2, root=mnist_site).X)
    np.testing.assert_array_equal(rp.datasets.cifar10(P=4, P_test=2, root=root).X,
                                  rp.datasets.cifar10(P=4, P_test=2, root=cifar_build).X)
    monkeypatch.setattr(vision, "MNIST_URLS", (closed_port_url(),))  # nothing is downloaded again
    monkeypatch.setattr(vision, "CIFAR10_URL", closed_port_url() + "cifar.tar.gz")
    assert main(["data", "fetch", "all", "--root", str(root)]) == 0
    monkeypatch.setenv("RENORMPP_DATA", str(root))  # the default root
    assert main(["data", "fetch", "mnist"]) == 0 and capsys.readouterr().out.split()[-1] == str(root / "mnist")


@pytest.mark.parametrize("fault", ["corrupt", "unreachable"])
def test_data_fetch_command_fails_cleanly(tmp_path, serve, monkeypatch, capsys, fault):
    from renormpp.cli import main

    site, _ = serve_tiny_sets(tmp_path, serve, monkeypatch)
    if fault == "corrupt":
        (site / "cifar.tar.gz").write_bytes((site / "cifar.tar.gz").read_bytes()[:-100])
    else:
        monkeypatch.setattr(vision, "CIFAR10_URL", closed_port_url() + "cifar.tar.gz")
    assert main(["data", "fetch", "cifar10", "--root", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert ("checksum mismatch" if fault == "corrupt" else "could not download cifar.tar.gz") in err
    assert f"download {vision.CIFAR10_URL} and extract it in {tmp_path / 'data'}" in err  # the way by hand
    assert list((tmp_path / "data").iterdir()) == []  # nothing half-written


# ---------------------------------------------------------------- CIFAR-10 on tiny files
def test_read_cifar_batch_keeps_channels_and_pixels(tmp_path):
    (x, y), _ = write_cifar(tmp_path)
    got, labels = rp.datasets.read_cifar_batch(tmp_path / "cifar-10-batches-py" / "data_batch_2")
    np.testing.assert_array_equal(got, x[8:16])
    np.testing.assert_array_equal(labels, y[8:16])


def test_cifar10_grayscale_resize_and_class_names(tmp_path):
    (x, y), (x0, y0) = write_cifar(tmp_path)
    full = rp.datasets.cifar10(classes=("cats", "horses"), P=8, P_test=4, size=32, root=tmp_path)
    tr = full.metadata["train_indices"]
    assert full.class_names == ("cat", "horse") and set(y[tr]) == {3, 7}
    pil_gray = np.stack([np.asarray(Image.fromarray(im).convert("L"), float).ravel() for im in x[tr]])
    assert np.abs(pixels(full) - pil_gray).max() < 0.51  # Pillow rounds the luma to integers
    small = rp.datasets.cifar10(classes=("cat", "horse"), P=8, P_test=4, root=tmp_path)
    assert small.X.shape == (8, 784) and small.X_test.shape == (4, 784)
    for images, split in ((x, ""), (x0, "_test")):
        chosen = images[small.metadata["test_indices" if split else "train_indices"]]
        np.testing.assert_allclose(pixels(small, split), pillow_gray_resized(chosen), atol=5e-3)
    assert abs(small.X.mean()) < 1e-12 and abs(small.X.std() - 1) < 1e-12


@pytest.mark.parametrize("classes, expected", [
    (("cars", "birds", "cats", "deers"), (1, 2, 3, 4)), ("all", tuple(range(10))), ((9, "Airplane"), (9, 0)),
    ("planes", (0,))])
def test_cifar10_class_choices(tmp_path, classes, expected):
    write_cifar(tmp_path)
    d = rp.datasets.cifar10(classes=classes, P=len(expected), P_test=len(expected), root=tmp_path)
    assert d.metadata["classes"] == expected and d.class_names == tuple(CIFAR_NAMES[i] for i in expected)
    assert d.Y.shape == (len(expected), len(expected))


class _Opens:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


@pytest.mark.parametrize("kind, match", [("truncated", "not a readable"), ("no labels", "lacks the keys"),
                                         ("code", "refusing to load"), ("bad shape", "shape \\(n, 3072\\)")])
def test_cifar10_refuses_corrupt_files(tmp_path, kind, match):
    write_cifar(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    batch = pickle.loads(path.read_bytes())
    bad = {"truncated": path.read_bytes()[:5000], "no labels": pickle.dumps({b"data": batch[b"data"]}),
           "code": pickle.dumps({b"data": _Opens(tmp_path / "pwned"), b"labels": []}),
           "bad shape": pickle.dumps({**batch, b"data": batch[b"data"][:, :3000]})}[kind]
    path.write_bytes(bad)
    with pytest.raises(ValueError, match=match):
        rp.datasets.cifar10(P=2, P_test=1, root=tmp_path)
    assert not (tmp_path / "pwned").exists()


# ---------------------------------------------------------------- projected MNIST
def test_projected_mnist_is_relu_of_one_gaussian_projection(tmp_path):
    write_mnist(tmp_path)
    d = rp.datasets.projected_mnist(N0=7, classes=(0, 1), P=6, P_test=4, root=tmp_path, seed=2)
    base = rp.datasets.mnist(classes=(0, 1), P=6, P_test=4, root=tmp_path, seed=2)
    Pi = np.random.default_rng([2, 1]).standard_normal((7, 30))  # as documented
    assert d.X.shape == (6, 7) and d.X_test.shape == (4, 7) and d.X.min() >= 0 and d.X_test.min() >= 0
    np.testing.assert_allclose(d.X, np.maximum(base.X @ Pi.T / math.sqrt(30), 0), atol=1e-12)
    np.testing.assert_allclose(d.X_test, np.maximum(base.X_test @ Pi.T / math.sqrt(30), 0), atol=1e-12)
    np.testing.assert_array_equal(d.Y, base.Y)
    again = rp.datasets.projected_mnist(N0=7, classes=(0, 1), P=6, P_test=4, root=tmp_path, seed=2)
    other = rp.datasets.projected_mnist(N0=7, classes=(0, 1), P=6, P_test=4, root=tmp_path, seed=3)
    np.testing.assert_array_equal(d.X, again.X)
    assert not np.array_equal(d.X, other.X)
    assert d.metadata["N0"] == 7 and d.metadata["N0_original"] == 30


def test_every_loader_takes_its_config_table(tmp_path):
    """A [data] table of each loader resolves and loads through renormpp run's path (projected_mnist's table once
    passed its **kwargs on as a key: every run of it failed)."""
    from renormpp.experiments.config import LOADERS, resolve
    from renormpp.experiments.stages import load_data

    write_mnist(tmp_path)
    cfg = resolve({"data": {"name": "projected_mnist", "N0": 7, "P": 6, "P_test": 4, "root": str(tmp_path)},
                   "model": {"N1": 4}, "run": {"out": str(tmp_path / "out")}})
    d = load_data(cfg.data)
    np.testing.assert_array_equal(d.X, rp.datasets.projected_mnist(N0=7, P=6, P_test=4, root=tmp_path).X)
    for name, loader in LOADERS.items():
        fields = set(type(resolve({"data": {"name": name}, "model": {"N1": 4}, "run": {"out": "x"}}).data).model_fields)
        assert fields - {"name"} <= set(inspect.signature(loader).parameters), name


# ---------------------------------------------------------------- the real files
@needs_mnist
def test_real_mnist_counts_pixels_and_normalization():
    labels = rp.datasets.read_idx(MNIST / "train-labels-idx1-ubyte.gz")
    labels0 = rp.datasets.read_idx(MNIST / "t10k-labels-idx1-ubyte.gz")
    assert tuple(np.bincount(labels)) == MNIST_TRAIN_COUNTS and tuple(np.bincount(labels0)) == MNIST_TEST_COUNTS
    with pytest.raises(ValueError, match=f"holds only {MNIST_TRAIN_COUNTS[5]} "):
        rp.datasets.mnist(classes=(5,), P=MNIST_TRAIN_COUNTS[5] + 1, root=MNIST)
    with gzip.open(MNIST / "train-images-idx3-ubyte.gz") as f:
        raw = np.frombuffer(f.read(), np.uint8, offset=16).reshape(60000, 784).astype(float)
    assert abs(raw.mean() / 255 - 0.1307) < 1e-4 and abs(raw.std() / 255 - 0.3081) < 1e-4  # the authors' constants
    d = rp.datasets.mnist(classes=(1, 2, 3), root=MNIST, seed=0)
    sel = raw[d.metadata["train_indices"]]
    assert d.X.shape == (1000, 784) and d.Y.shape == (1000, 3) and d.X_test.shape == (1000, 784)
    np.testing.assert_allclose(d.X, (sel - sel.mean()) / sel.std(), atol=1e-10)
    assert abs(d.X_test.mean()) < 0.05 and abs(d.X_test.std() - 1) < 0.05
    np.testing.assert_array_equal(np.argmax(d.Y, 1), labels[d.metadata["train_indices"]] - 1)
    assert 250 < d.Y.sum(0).min() and d.Y_test.sum() == 1000


@needs_mnist
def test_real_projected_mnist_shape():
    d = rp.datasets.projected_mnist(N0=144, root=MNIST)
    assert d.X.shape == (1000, 144) and d.X_test.shape == (1000, 144) and d.Y.shape == (1000, 2)
    assert d.X.min() == 0 and 0.3 < (d.X > 0).mean() < 0.7  # ReLU of roughly symmetric pre-activations


def test_real_cifar10_class_names_shapes_and_pixels(cifar_root):
    d = rp.datasets.cifar10(classes="all", root=cifar_root, seed=1)
    assert d.class_names == CIFAR_NAMES
    assert d.X.shape == (1000, 784) and d.Y.shape == (1000, 10) and d.X_test.shape == (1000, 784)
    assert abs(d.X.mean()) < 1e-10 and abs(d.X.std() - 1) < 1e-10
    assert abs(d.X_test.mean()) < 0.05 and abs(d.X_test.std() - 1) < 0.05
    with open(cifar_root / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    first = [i for i in d.metadata["train_indices"] if i < 10000][:5]
    rgb = batch[b"data"][first].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(pixels(d)[:5], pillow_gray_resized(rgb), atol=5e-3)
    np.testing.assert_array_equal(np.argmax(d.Y[:5], 1), np.asarray(batch[b"labels"])[first])
    for kw, n in ((dict(P=5001), 5000), (dict(P_test=1001), 1000)):  # 5000 train and 1000 test images a class
        with pytest.raises(ValueError, match=f"holds only {n} "):
            rp.datasets.cifar10(classes="horses", root=cifar_root, **kw)


# ---------------------------------------------------------------- synthetic teachers
def test_linear_teacher_is_reproducible_and_exact():
    a = rp.datasets.synthetic(P=50, P_test=20, N0=9, D=3, teacher="linear", seed=4)
    b = rp.datasets.synthetic(P=50, P_test=20, N0=9, D=3, teacher="linear", seed=4)
    np.testing.assert_array_equal(a.X, b.X)
    assert a.X.shape == (50, 9) and a.Y.shape == (50, 3) and a.X_test.shape == (20, 9) and a.Y_test.shape == (20, 3)
    # labels are linear in the inputs: Y = X W^T / sqrt(N0) for one W on train and test
    X = np.vstack([a.X, a.X_test])
    Y = np.vstack([a.Y, a.Y_test])
    W, *_ = np.linalg.lstsq(X / 3.0, Y, rcond=None)
    np.testing.assert_allclose(X / 3.0 @ W, Y, atol=1e-10)
    assert a.metadata["seed"] == 4 and a.metadata["teacher"] == "linear"
    assert not np.array_equal(a.X, rp.datasets.synthetic(P=50, P_test=20, N0=9, D=3, seed=5).X)


def test_erf_teacher_matches_the_supplement_equation():
    """y_a = (1/sqrt N1) sum_i v_ia erf(sum_j w_ij x_j / sqrt N0), with the documented draw order, by loops."""
    P, P_test, N0, D, N1 = 4, 3, 5, 2, 7
    d = rp.datasets.synthetic(P=P, P_test=P_test, N0=N0, D=D, teacher="erf_1hl", seed=11, teacher_width=N1)
    rng = np.random.default_rng(11)
    x, w, v = rng.standard_normal((P + P_test, N0)), rng.standard_normal((N1, N0)), rng.standard_normal((N1, D))
    y = [[sum(v[i, a] * math.erf(sum(w[i, j] * xm[j] for j in range(N0)) / math.sqrt(N0)) for i in range(N1))
          / math.sqrt(N1) for a in range(D)] for xm in x]
    np.testing.assert_allclose(np.vstack([d.X, d.X_test]), x)
    np.testing.assert_allclose(np.vstack([d.Y, d.Y_test]), y, rtol=1e-12, atol=1e-14)


def test_erf_teacher_label_statistics():
    """y_a = v_a . erf(w x / sqrt N0) / sqrt N1 with standard normal v, w: averaged over teachers,
    E[y^2] = E[erf(h)^2] = (2/pi) arcsin(2/3) for h ~ N(0, 1) (the NNGP kernel on the diagonal)."""
    var = [rp.datasets.synthetic(P=500, P_test=1, N0=30, D=2, teacher="erf_1hl", seed=s).Y.var() for s in range(40)]
    se = np.std(var) / np.sqrt(len(var))
    assert abs(np.mean(var) - 2 / np.pi * np.arcsin(2 / 3)) < 4 * se
    assert rp.datasets.synthetic(P=5, P_test=1, teacher="erf_1hl").metadata["teacher_width"] == 1000


@pytest.mark.parametrize("kw, match", [(dict(teacher="cubic"), "unknown teacher"), (dict(P=0), "P must be"),
                                       (dict(D=1.5), "D must be")])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        rp.datasets.synthetic(**kw)


# ---------------------------------------------------------------- low-dimensional regression
def supplement_targets(x):
    x = x.T
    return np.stack([np.sin(2 * np.pi * x[0]) + np.log(x[1] + 1), np.cos(2 * np.pi * x[2]) + x[3] ** 2 / 10,
                     np.tan(2 * np.pi * x[4]) / 5 + np.sqrt(np.clip(x[5], 0, None)),
                     x[6] ** 3 / 20 - np.sin(2 * np.pi * x[7]), (np.exp(x[8]) - x[9]) / 20], axis=1)


@pytest.mark.parametrize("noise_ratio", [0.0, 0.25])
def test_low_dimensional_targets_noise_and_scaling(noise_ratio):
    d = rp.datasets.low_dimensional(noise_ratio=noise_ratio, seed=1)
    m = d.metadata
    assert d.X.shape == (1600, 12) and d.Y.shape == (1600, 5) and d.X_test.shape == (400, 12) and m["D"] == 5
    np.testing.assert_allclose(d.X.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(d.Y.std(0), 1, atol=1e-12)  # scaled with training statistics
    x = np.vstack([d.X, d.X_test]) * m["x_std"] + m["x_mean"]
    y = np.vstack([d.Y, d.Y_test]) * m["y_std"] + m["y_mean"]
    assert x.min() > -1 and x.max() <= 1 and abs(x.std() - 1 / math.sqrt(3)) < 0.01  # uniform on [-1, 1]
    f = supplement_targets(x)
    ratio = (y - f).var(0) / f.var(0)
    assert np.all(np.abs((y - f).mean(0)) <= 4 * np.sqrt(noise_ratio * f.var(0) / 2000) + 1e-9)  # zero-mean noise
    np.testing.assert_allclose(ratio, noise_ratio, atol=4 * noise_ratio * math.sqrt(2 / 2000) + 1e-12)
    if noise_ratio:
        assert np.corrcoef((y - f)[:, 0], f[:, 0])[0, 1] < 0.1  # additive noise, independent of the target


def test_low_dimensional_is_seeded_and_checks_arguments():
    a, b, c = (rp.datasets.low_dimensional(P=50, P_test=10, seed=s) for s in (0, 0, 1))
    np.testing.assert_array_equal(a.Y_test, b.Y_test)
    assert not np.array_equal(a.X, c.X)
    assert a.class_names == ("y1", "y2", "y3", "y4", "y5") and len(a.metadata["choices"]) >= 4
    with pytest.raises(ValueError, match="at least 10"):
        rp.datasets.low_dimensional(n_features=9)
    with pytest.raises(ValueError, match="noise_ratio"):
        rp.datasets.low_dimensional(noise_ratio=-0.1)
