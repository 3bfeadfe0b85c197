"""Hand a learned model to other tools: a TensorFlow SavedModel a controller calls, a URDF with the identified inertias.

- :func:`export_savedmodel` (also ``LagrangianNetwork.export``, ``IdentifiedModel.export``, ``lnn export
  --savedmodel``): signatures ``inverse_dynamics``, ``acceleration``, ``mass_matrix``, loadable by TensorFlow
  alone (:mod:`lnn.export.savedmodel`);
- :func:`write_urdf` (also ``IdentifiedModel.to_urdf``, ``lnn export --urdf``): a template URDF with the
  rigid-body stage's identified inertial parameters and linear friction (:mod:`lnn.export.urdf`).
"""

from lnn.export.savedmodel import SIGNATURES, ExportedModel, export_savedmodel
from lnn.export.urdf import URDFExport, write_urdf

__all__ = ["SIGNATURES", "ExportedModel", "URDFExport", "export_savedmodel", "write_urdf"]
