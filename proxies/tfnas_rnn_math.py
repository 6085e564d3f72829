"""The scoring functions of the training-free NAS paper (Serianni & Kalita, ACL 2023), on
plain tensors: no model, no batch. `proxies.tfnas_rnn_forward` produces the tensors.

Every function returns a float where larger means "the rows are told apart better", which
the paper and the works it follows (Mellor et al.; Celotti et al.) read as a better model.
"""

from __future__ import annotations

import torch

# Mellor et al.'s shift, also the paper's k (section 3.5): keeps log and 1/x of
# zero eigenvalues finite.
EIGEN_SHIFT = 1e-5
# Celotti et al.'s exponent on |cosine| (section 3.1): flattens the similarities so that
# a few near-duplicates do not dominate.
COSINE_POWER = 1.0 / 20.0


def correlation(rows: torch.Tensor) -> torch.Tensor:
    """Pearson correlation matrix R of the rows of `rows` (float64): R_ij = C_ij /
    sqrt(C_ii C_jj), C = (H - M_H)(H - M_H)^T with M_H the row means (paper eq. 3.5).

    A constant row has no defined correlation; it gets an all-zero row and column (also on
    the diagonal), i.e. a zero eigenvalue: a unit that says nothing about the input counts
    as fully redundant instead of making the score NaN, as np.corrcoef would.
    """
    centered = rows.double() - rows.double().mean(dim=1, keepdim=True)
    cov = centered @ centered.T
    scale = cov.diagonal().sqrt()
    inverse = torch.where(scale > 0, 1.0 / scale, torch.zeros_like(scale))
    return cov * inverse[:, None] * inverse[None, :]


def eigen_kl_score(rows: torch.Tensor) -> float:
    """-sum_n (log(lambda_n + k) + 1/(lambda_n + k)) over the eigenvalues of the rows'
    correlation matrix, k = 1e-5: Mellor et al.'s Jacobian covariance score, reused by the
    paper's hidden covariance (section 3.5). Each term is smallest at lambda = 1, so the
    score is at most -(number of rows) and is largest when the rows are uncorrelated.
    """
    if rows.shape[0] < 2:
        raise ValueError(f"a correlation score needs at least two rows, got {rows.shape[0]}")
    eigenvalues = torch.linalg.eigvalsh(correlation(rows))
    shifted = eigenvalues + EIGEN_SHIFT
    return float(-(shifted.log() + shifted.reciprocal()).sum())


def cosine_score(rows: torch.Tensor) -> float:
    """Celotti et al.'s Jacobian cosine (paper section 3.1): 1 - mean over the N^2 - N
    off-diagonal pairs of |cos(row_i, row_j)|^(1/20). 1 for orthogonal rows, 0 for parallel.

    The authors' code also halves the sum; that maps the score to (1 + S) / 2, the same
    ranking, so the paper's formula is kept. A zero row (an input the network does not
    respond to) counts as parallel to every row: a dead network scores 0, not 1.
    """
    n = rows.shape[0]
    if n < 2:
        raise ValueError(f"a cosine score needs at least two rows, got {n}")
    flat = rows.reshape(n, -1).double()
    norms = flat.norm(dim=1, keepdim=True)
    alive = norms > 0
    unit = flat / torch.where(alive, norms, torch.ones_like(norms))
    cosines = torch.where(alive & alive.T, unit @ unit.T, torch.ones(n, n, dtype=flat.dtype))
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    similarity = cosines[off_diagonal].abs().pow(COSINE_POWER).sum()
    return float(1.0 - similarity / (n * n - n))


def hamming_kernel(codes: torch.Tensor) -> torch.Tensor:
    """K_ij = number of units on which the binary codes of examples i and j agree,
    i.e. N_A - Hamming(c_i, c_j) (Mellor et al. 2021); `codes` is (examples, units) of 0/1."""
    c = codes.double()
    return c @ c.T + (1 - c) @ (1 - c).T


def log_det(kernel: torch.Tensor) -> float:
    """log |det K|: the activation distance score of a kernel summed over the network."""
    return float(torch.linalg.slogdet(kernel).logabsdet)
