"""fit's own per-epoch logs: a CSV file (``csv_log``) and TensorBoard scalars (``tensorboard_dir``).

Both write the rows of :meth:`lnn.train.History.as_rows` (columns ``epoch,
time, lr, train_<term>..., val_<term>...``), the format that
:func:`lnn.plot.history` reads. (Keras's own ``keras.callbacks.CSVLogger``
and ``TensorBoard`` may be passed to ``fit(callbacks=...)`` as well.)
"""

from __future__ import annotations

import csv
from pathlib import Path

import tensorflow as tf

from lnn import _runtime

__all__ = ["CsvLog", "EpochLogs", "TensorBoardLog"]


class CsvLog:
    """Per-epoch CSV rows; refuses to overwrite a file unless resuming (then appends).

    Parameters
    ----------
    path : str or Path
    resume : bool, keyword-only
        Append to an existing file (a resumed run) instead of refusing it.
    """

    def __init__(self, path, *, resume: bool) -> None:
        self.path = Path(path)
        if self.path.exists() and not resume:
            raise FileExistsError(
                f"refusing to overwrite existing csv_log {str(self.path)!r}; remove it or pass "
                "another path (--force on the command line)"
            )
        if not self.path.parent.exists():
            raise FileNotFoundError(f"directory {str(self.path.parent)!r} of csv_log does not exist")
        self.handle = self.path.open("a" if resume else "w", newline="")
        self.writer = None

    def write(self, row: dict) -> None:
        """Append one row (the header first, in a new file)."""
        if self.writer is None:
            self.writer = csv.DictWriter(self.handle, fieldnames=list(row))
            if self.handle.tell() == 0:
                self.writer.writeheader()
        self.writer.writerow(row)
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


class TensorBoardLog:
    """Per-epoch TensorBoard scalars (every column of a row but ``epoch``, at step ``epoch``)."""

    def __init__(self, directory) -> None:
        self.writer = tf.summary.create_file_writer(str(directory))

    def write(self, row: dict) -> None:
        with self.writer.as_default():
            for key, value in row.items():
                if key != "epoch":
                    _runtime.scalar_summary(key, value, row["epoch"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class EpochLogs:
    """fit's ``csv_log`` and ``tensorboard_dir`` writers (either may be None); a context manager.

    Parameters
    ----------
    csv_log : str or Path or None, keyword-only
    tensorboard_dir : str or Path or None, keyword-only
    resume : bool, keyword-only
        The run continues a checkpointed one (the CSV file is appended to).
    """

    def __init__(self, *, csv_log, tensorboard_dir, resume: bool) -> None:
        self.writers = []
        if csv_log is not None:
            self.writers.append(CsvLog(csv_log, resume=resume))
        if tensorboard_dir is not None:
            self.writers.append(TensorBoardLog(tensorboard_dir))

    def write(self, row: dict) -> None:
        """Write one epoch's row to every writer."""
        for writer in self.writers:
            writer.write(row)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()

    def __enter__(self) -> EpochLogs:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
