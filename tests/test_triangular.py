"""The gathered triangular and symmetric matrices equal their textbook assembly, value and gradient."""

import numpy as np
import pytest
import tensorflow as tf

from lnn.models.triangular import assemble_triangular, lower_triangular, symmetric_index, tril_index


@pytest.mark.parametrize("n", [1, 2, 5])
def test_assemble_triangular_places_the_diagonal_and_the_strictly_lower_entries(n):
    rng = np.random.default_rng(n)
    m = n * (n - 1) // 2
    diag, lower = rng.normal(size=(3, n)), rng.normal(size=(3, m))
    expected = np.zeros((3, n, n))
    expected[:, np.arange(n), np.arange(n)] = diag
    rows, cols = np.tril_indices(n, -1)
    expected[:, rows, cols] = lower
    got = assemble_triangular(tf.constant(diag), tf.constant(lower), tril_index(n)).numpy()
    np.testing.assert_array_equal(got, expected)
    one = assemble_triangular(tf.constant(diag[0]), tf.constant(lower[0]), tril_index(n)).numpy()
    np.testing.assert_array_equal(one, expected[0])


def test_lower_triangular_gradient_matches_the_dense_product():
    n, rng = 4, np.random.default_rng(0)
    diag = tf.Variable(rng.normal(size=(2, n)))
    lower = tf.Variable(rng.normal(size=(2, n * (n - 1) // 2)))
    weight = tf.constant(rng.normal(size=(2, n, n)))
    rows, cols = np.tril_indices(n, -1)
    scatter = np.zeros((len(rows), n * n))
    scatter[np.arange(len(rows)), rows * n + cols] = 1.0
    with tf.GradientTape(persistent=True) as tape:
        gathered = tf.reduce_sum(weight * lower_triangular(diag, lower, tril_index(n)))
        dense = tf.linalg.diag(tf.math.softplus(diag)) + tf.reshape(tf.matmul(lower, scatter), (-1, n, n))
        dense = tf.reduce_sum(weight * dense)
    np.testing.assert_allclose(gathered.numpy(), dense.numpy(), rtol=1e-14)
    for var in (diag, lower):
        np.testing.assert_allclose(tape.gradient(gathered, var).numpy(), tape.gradient(dense, var).numpy(), rtol=1e-14)


def test_symmetric_index_reads_each_upper_entry_on_both_sides():
    n = 4
    rows, cols = np.triu_indices(n)
    entries = np.arange(len(rows), dtype=float) + 1.0
    got = entries[symmetric_index(rows, cols, n)].reshape(n, n)
    expected = np.zeros((n, n))
    expected[rows, cols] = entries
    expected[cols, rows] = entries
    np.testing.assert_array_equal(got, expected)
