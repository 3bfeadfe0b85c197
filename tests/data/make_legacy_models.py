"""How tests/data/legacy_*.keras were written (run once, at fa8d6ed, before lnn/models/ existed; rerunning it now would write new files, not legacy ones)."""
import numpy as np, lnn
rng = np.random.default_rng(0)
out = {}
n = 2
q = rng.normal(size=(5, n)); qd = rng.normal(size=(5, n)); qdd = rng.normal(size=(5, n)); tau = rng.normal(size=(5, n))
for kind, extra in [("kinetic-potential", dict(convex=True)), ("black-box", {}), ("structured", {})]:
    m = lnn.LagrangianNetwork(n, kind=kind, hidden=(8, 8), angular=(True, False), damping=True,
                              dtype="float64", seed=3, **extra)
    m.adapt(rng.normal(size=(50, n)) * 2 + 1, rng.normal(size=(50, n)) * 3, rng.normal(size=(50, n)))
    for v in m.trainable_variables:  # move off the initialisation
        v.assign(v + 0.05 * rng.normal(size=v.shape))
    tag = kind.replace("-", "_")
    m.save(f"tests/data/legacy_{tag}.keras")
    out[f"{tag}/M"] = m.mass_matrix(q, qd).numpy()
    out[f"{tag}/qdd"] = m.acceleration(q, qd, tau).numpy()
    out[f"{tag}/tau"] = m.inverse_dynamics(q, qd, qdd).numpy()
    out[f"{tag}/E"] = m.energy(q, qd).numpy()
    out[f"{tag}/L"] = m.lagrangian(q, qd).numpy()
out["q"], out["qd"], out["qdd"], out["tau"] = q, qd, qdd, tau
np.savez("tests/data/legacy_outputs.npz", **out)
