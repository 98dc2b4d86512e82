"""The patch geometry of the convolutional network: patches against a loop over the image, NumPy and JAX alike, and
clear errors for shapes that do not tile."""
import jax.numpy as jnp
import numpy as np
import pytest

from renormpp.patches import Patches, as_patches


def test_patches_are_the_image_cut_row_major():
    rng = np.random.default_rng(0)
    s, m = 6, 3
    X = rng.standard_normal((4, s * s))
    out = Patches((s, s), m).extract(X)
    assert out.shape == (4, 4, 9)
    for mu in range(4):
        img = X[mu].reshape(s, s)
        for i in range(4):
            r, c = divmod(i, s // m)
            np.testing.assert_array_equal(out[mu, i], img[r * m:(r + 1) * m, c * m:(c + 1) * m].ravel())
    np.testing.assert_allclose(np.asarray(Patches((s, s), m).extract(jnp.asarray(X))), out, rtol=1e-6)  # float32


def test_one_patch_is_the_whole_image_and_pixels_are_patches():
    X = np.arange(2 * 16.0).reshape(2, 16)
    np.testing.assert_array_equal(Patches((4, 4), 4).extract(X)[:, 0], X)
    np.testing.assert_array_equal(Patches((4, 4), 1).extract(X)[..., 0], X)


@pytest.mark.parametrize("kwargs, message", [
    (dict(image_shape=(4, 6), patch=2), "square images"),
    (dict(image_shape=(28, 28), patch=5), "patch = 5 does not divide the image side 28: the patches do not overlap "
                                          "and must tile the image. Choose a divisor of 28: 1, 2, 4, 7, 14, 28"),
    (dict(image_shape=(28, 28), patch=0), "patch"),
])
def test_bad_geometry_is_refused_with_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Patches(**kwargs)


def test_data_of_the_wrong_width_and_bad_specs_are_refused():
    with pytest.raises(ValueError, match="X has 10 columns, but image_shape \\(4, 4\\) needs 16"):
        Patches((4, 4), 2).extract(np.zeros((3, 10)))
    assert as_patches({"image_shape": [28, 28], "patch": 7}).n_patches == 16
    assert as_patches({"image_shape": 28, "patch": 7}) == Patches((28, 28), 7)
    with pytest.raises(ValueError, match="conv must be dict"):
        as_patches({"shape": 28})
    with pytest.raises(TypeError):
        as_patches(7)
