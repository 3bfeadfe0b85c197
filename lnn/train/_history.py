"""What :func:`lnn.fit` returns and raises: :class:`History`, :class:`TrainingDivergedError`.

:class:`Record` is the running log that becomes the History (and is saved in
``history.json`` beside the checkpoints, to resume from).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lnn.errors import TrainingDivergedError

__all__ = ["History", "Record", "TrainingDivergedError"]


@dataclass(frozen=True)
class History:
    """What happened during :func:`lnn.fit`, epoch by epoch.

    Attributes
    ----------
    epoch : ndarray of int, shape ``(E,)``
        Epoch numbers (0-based; a resumed run continues the numbering).
    train : dict of str to ndarray, shape ``(E,)``
        Mean training loss per term, and ``"total"`` (the weighted sum).
    validation : dict of str to ndarray, shape ``(E,)``
        The same on the validation set (empty without validation data).
    lr : ndarray, shape ``(E,)``
        Learning rate at the end of each epoch.
    time : ndarray, shape ``(E,)``
        Wall time (s) since the start of the call at the end of each epoch.
    best_epoch : int
        Epoch with the lowest monitored loss (validation total when there is
        validation data, else training total); its weights are the model's
        at return when ``restore_best`` is true. -1 if no epoch finished.
    best_loss : float
        That loss.
    stopped_reason : str
        ``"epochs"``, ``"time_limit"``, ``"early_stopping"`` or ``"callback"``
        (a callable returned True, or a ``keras.callbacks.Callback`` set
        ``model.stop_training``).
    traces : int
        How often the train step was traced (1 for a healthy run).
    weights : dict of str to float
        The loss weights used, by canonical term name.
    """

    epoch: np.ndarray
    train: dict
    validation: dict
    lr: np.ndarray
    time: np.ndarray
    best_epoch: int
    best_loss: float
    stopped_reason: str
    traces: int
    weights: dict = field(default_factory=dict)

    def as_rows(self) -> list[dict]:
        """One dict per epoch: ``epoch, time, lr, train_<term>..., val_<term>...``."""
        rows = []
        for i, epoch in enumerate(self.epoch):
            row = {"epoch": int(epoch), "time": float(self.time[i]), "lr": float(self.lr[i])}
            row.update({f"train_{k}": float(v[i]) for k, v in self.train.items()})
            row.update({f"val_{k}": float(v[i]) for k, v in self.validation.items()})
            rows.append(row)
        return rows


class Record:
    """The per-epoch log of a running fit (lists of floats, JSON-serialisable).

    Parameters
    ----------
    terms : sequence of str
        The canonical loss terms (``"total"`` is added).
    validation : bool
        Whether there is validation data.
    """

    def __init__(self, terms, *, validation: bool) -> None:
        self.log: dict[str, list] = {"epoch": [], "lr": [], "time": []}
        self.train: dict[str, list] = {k: [] for k in [*terms, "total"]}
        self.validation: dict[str, list] = {k: [] for k in [*terms, "total"]} if validation else {}

    def __len__(self) -> int:
        return len(self.log["epoch"])

    @property
    def elapsed(self) -> float:
        """Wall time recorded at the end of the last epoch (0 before the first)."""
        return self.log["time"][-1] if self.log["time"] else 0.0

    def add(self, epoch: int, *, lr: float, time: float, train: dict, validation: dict | None) -> dict:
        """Append one epoch's means; return its row (see :meth:`row`)."""
        self.log["epoch"].append(epoch)
        self.log["lr"].append(lr)
        self.log["time"].append(time)
        for k, v in train.items():
            self.train[k].append(v)
        for k, v in (validation or {}).items():
            self.validation[k].append(v)
        return self.row(-1)

    def row(self, i: int) -> dict:
        """Epoch ``i``: ``epoch, time, lr, train_<term>..., val_<term>...`` (:meth:`History.as_rows`)."""
        row = {"epoch": int(self.log["epoch"][i]), "time": float(self.log["time"][i]), "lr": float(self.log["lr"][i])}
        row.update({f"train_{k}": float(v[i]) for k, v in self.train.items()})
        row.update({f"val_{k}": float(v[i]) for k, v in self.validation.items()})
        return row

    def message(self, epoch: int) -> str:
        """The progress message during ``epoch``: its number and the latest recorded losses."""
        if not self.train.get("total"):
            return f"epoch {epoch + 1}"
        text = f"epoch {epoch + 1} loss {self.train['total'][-1]:.3g}"
        if self.validation.get("total"):
            text += f" val {self.validation['total'][-1]:.3g}"
        return text

    def state(self) -> dict:
        """The log as a JSON-serialisable dict (``history.json``)."""
        return {"log": self.log, "train": self.train, "validation": self.validation}

    def restore(self, state: dict) -> None:
        """Continue the log saved by :meth:`state`."""
        self.log, self.train, self.validation = state["log"], state["train"], state["validation"]

    def history(self, *, best_epoch: int, best_loss: float, stopped_reason: str, traces: int, weights: dict) -> History:
        """The :class:`History` of the run."""
        return History(
            epoch=np.asarray(self.log["epoch"], dtype=np.int64),
            train={k: np.asarray(v, dtype=np.float64) for k, v in self.train.items()},
            validation={k: np.asarray(v, dtype=np.float64) for k, v in self.validation.items()},
            lr=np.asarray(self.log["lr"], dtype=np.float64),
            time=np.asarray(self.log["time"], dtype=np.float64),
            best_epoch=int(best_epoch),
            best_loss=float(best_loss),
            stopped_reason=stopped_reason,
            traces=traces,
            weights=dict(weights),
        )
