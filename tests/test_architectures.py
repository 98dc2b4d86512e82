"""The architecture seam (renormpp.architectures): one record declares a network's model, readout features, theory,
options (its [model] table) and dims; the rest of the package reads the record."""
import dataclasses
import typing

import jax
import numpy as np
import pytest

import renormpp as rp
from renormpp import architectures, readout
from renormpp.experiments import config as config_mod
from renormpp.network import hidden


def _draw(N1=6, N0=4, seed=0):
    k0, k1 = jax.random.split(jax.random.PRNGKey(seed))
    return {"w": jax.random.normal(k0, (N1, N0)), "v": jax.random.normal(k1, (2, N1))}


def _data(P=9, N0=4, D=2, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(P, N0)), rng.normal(size=(P, D))


def _doubled(params, X, activation="erf"):
    """A toy architecture's features: the fully connected layer on the inputs scaled by 2."""
    return hidden(params, 2.0 * X, activation)


def test_readout_reads_the_architecture_features():
    """readout's closed forms with another architecture's features equal those of the fully connected network on
    the inputs those features see (an independent path: the default features on 2 X)."""
    X, Y = _data()
    X0, Y0 = _data(P=5, seed=2)
    params = _draw()
    kw = dict(T=0.1, lambda1=1.5)
    toy = readout.rao_blackwell(X, Y, X0, Y0, features=_doubled, **kw)(params)
    ref = readout.rao_blackwell(2 * X, Y, 2 * X0, Y0, **kw)(params)
    for k in ("eps_g", "overlap"):
        np.testing.assert_allclose(toy[k], ref[k], rtol=1e-6)
    key = jax.random.PRNGKey(3)
    for N1 in (6, 20):  # the N1 < P and N1 >= P forms of the exact draw
        p = _draw(N1=N1)
        np.testing.assert_allclose(readout.draw_readout(key, p, X, Y, features=_doubled, **kw),
                                   readout.draw_readout(key, p, 2 * X, Y, **kw), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(readout.log_marginal_of(params, X, Y, features=_doubled, **kw),
                               readout.log_marginal_of(params, 2 * X, Y, **kw), rtol=1e-6)
    update = readout.gibbs_fn(X, Y, features=_doubled, **kw)
    np.testing.assert_allclose(update(key, {"v": params["v"]}, {"w": params["w"]})["v"],
                               readout.draw_readout(key, params, 2 * X, Y, **kw), rtol=1e-5, atol=1e-6)


def test_fully_connected_record_matches_the_model_and_theory():
    fc = architectures.get_architecture("fc")
    assert fc.model is rp.models.mlp and fc.features is hidden
    kw = fc.model_kwargs(N1=7, T=0.02, lambda0=2.0, lambda1=3.0, activation="erf", integrate_v=True, depth=2)
    assert kw == dict(N1=7, depth=2, activation="erf", T=0.02, lambdas=(2.0, 2.0, 3.0), integrate_v=True)
    assert fc.first_layer(depth=1) == "w" and fc.first_layer(depth=3) == "w0"
    X, Y = _data(P=12)
    th = fc.solve(X, Y, N1=6, T=0.05, lambda0=1.0, lambda1=1.0, activation="erf", method="exact", depth=2)
    ref = rp.theory.solve(X, Y, N1=6, T=0.05, activation="erf", method="exact", depth=2)
    np.testing.assert_allclose(th.Q, ref.Q)
    np.testing.assert_allclose(fc.kernel(X, depth=2), rp.kernels.nngp(X, depth=2))
    with pytest.raises(ValueError, match="depth = 2 needs an odd activation"):
        fc.check("relu", depth=2)
    with pytest.raises(ValueError, match="unknown architecture 'cnn'; choose one of 'fc'"):
        architectures.get_architecture("cnn")


def test_model_table_comes_from_the_record():
    """The [model] table of an architecture is made from its record's options: a toy record with an option of its
    own gets a table with that key, its default, type check and description, and its check runs on resolve."""

    def options(scale: typing.Annotated[float, "how much the inputs are scaled"] = 2.0, *, activation="erf"):
        if scale > 10:
            raise ValueError("model.scale above 10 saturates erf: use a smaller scale")

    toy = dataclasses.replace(architectures.FC, name="doubled", label="inputs doubled", features=_doubled,
                              options=options)
    table = config_mod._model_table(toy, point=True)
    assert set(table.model_fields) == {"architecture", "N1", "T", "lambda0", "lambda1", "activation", "scale"}
    assert table.model_fields["scale"].default == 2.0
    assert table.model_fields["scale"].description == "how much the inputs are scaled"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(architectures.ARCHITECTURES, "doubled", toy)
        m = table.model_validate({"architecture": "doubled", "N1": 3})
        assert m.options() == {"scale": 2.0}
        with pytest.raises(Exception, match="saturates erf"):
            table.model_validate({"architecture": "doubled", "N1": 3, "scale": 11.0})
        with pytest.raises(Exception, match="greater than 0"):
            table.model_validate({"architecture": "doubled", "N1": 3, "scale": -1.0})


def test_config_architecture_key():
    base = {"data": {"name": "synthetic", "P": 10, "P_test": 10, "N0": 5}, "run": {"out": "/tmp/unused"}}
    cfg = config_mod.resolve({**base, "model": {"N1": 4}})
    assert cfg.model.architecture == "fc" and cfg.model.options() == {"depth": 1}
    assert 'architecture = "fc"' in cfg.dumps()
    with pytest.raises(config_mod.ConfigError, match="model.architecture = 'cnn' is not allowed: choose one of 'fc'"):
        config_mod.resolve({**base, "model": {"N1": 4, "architecture": "cnn"}})
    with pytest.raises(config_mod.ConfigError, match="model.depth = 2 needs an odd activation"):
        config_mod.resolve({**base, "model": {"N1": 4, "depth": 2, "activation": "relu"}})
