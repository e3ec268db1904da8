"""The trained model kept between commands: asked again with the same decisions, no training.

A `Trained` is what one training made of its inputs: the weights, the Hessian's steep
directions (where the next solve starts), every paper's score from the decisions and, once
asked for, the estimate of relevant papers left with the fold models it was made from (where
the next estimate starts: `estimate.Folds`). It is keyed by a digest of everything the
training read: the text features' generation, the papers in order, the engine's relevance,
the topic scores and every label (status, star, seed). Another key is another problem, which
the kept weights still start close to. Like the features, it is derived state in the features'
cache folder: a file that cannot be read is trained again.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from assistant.cache import read_pickle, write_pickle
from assistant.personal.arrays import locked
from assistant.personal.estimate import FOLD_VERSION, Estimate, Folds
from assistant.personal.lbfgs import Spectrum
from assistant.personal.model import Labels

STATE_VERSION = 2
STATE_FILE = "fit.pickle"
LOCK_FILE = "fit-save.lock"  # not fit.*: the save's clean-up would take it


def ids_digest(ids: Sequence[str]) -> bytes:
    """A digest of the papers, in order."""
    digest = hashlib.blake2b(f"{len(ids)}\x1f".encode(), digest_size=20)
    digest.update("\x1f".join(ids).encode("utf-8"))
    return digest.digest()


def problem_key(generation: str, papers: bytes, engine: np.ndarray, topics: np.ndarray) -> bytes:
    """A digest of what training reads but the labels (see `training_key`): the estimate's fold
    models are named by it and their own labels. Empty when the features are not on disk."""
    if not generation:
        return b""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{STATE_VERSION}\x1fproblem\x1f{generation}\x1f".encode())
    digest.update(papers)
    for array in (engine, topics):
        part = np.ascontiguousarray(array)
        digest.update(f"{part.dtype.str}{part.shape}".encode())
        digest.update(part.tobytes())
    return digest.digest()


def training_key(
    generation: str, papers: bytes, engine: np.ndarray, topics: np.ndarray, labels: Labels
) -> bytes:
    """A digest of everything training reads: the features' generation, the papers (their
    `ids_digest`), the engine's relevance, the topic scores and the labels. Empty when the
    features are not on disk: then the training cannot be named."""
    if not generation:
        return b""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{STATE_VERSION}\x1f{generation}\x1f".encode())
    digest.update(papers)
    for array in (engine, topics, labels.y, labels.weight, labels.seeded):
        part = np.ascontiguousarray(array)
        digest.update(f"{part.dtype.str}{part.shape}".encode())
        digest.update(part.tobytes())
    return digest.digest()


@dataclass
class Trained:
    """What a training made of its inputs (see the module's summary)."""

    key: bytes
    theta: np.ndarray | None  # intercept, engine weight, coefficients; None: no model
    scores: np.ndarray | None  # each paper's X @ coef
    spectrum: Spectrum | None = None
    estimate: Estimate | None = None
    estimated: bool = False  # the estimate was asked for (it may be None: too few decisions)
    # The papers' stable order (`model.stable_order`), for the papers of this digest.
    papers: bytes = b""
    order: np.ndarray | None = None
    # The estimate's fold models (of this training's estimate, or kept from an earlier one).
    folds: Folds | None = None

    @classmethod
    def load(cls, folder: Path) -> Trained | None:
        """The training kept in `folder`, or None when there is none that can be read."""
        try:
            data = read_pickle(folder / STATE_FILE)
            if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
                return None
            arrays = {name: np.load(folder / file, mmap_mode="r") for name, file in data["files"].items()}
            spectrum = None
            if "directions" in arrays:
                spectrum = Spectrum(
                    np.ascontiguousarray(arrays["directions"], dtype=np.float64),
                    np.asarray(arrays["curvatures"], dtype=np.float64),
                    float(data["flat"]),
                    int(data["learned_on"]),
                )
            # An estimate made another way (an older version) is made again.
            current = data.get("fold_version") == FOLD_VERSION
            return cls(
                key=bytes(data["key"]),
                theta=np.array(arrays["theta"]) if "theta" in arrays else None,
                scores=np.array(arrays["scores"]) if "scores" in arrays else None,
                spectrum=spectrum,
                estimate=data.get("estimate") if current else None,
                estimated=bool(data.get("estimated")) and current,
                papers=bytes(data.get("papers", b"")),
                order=np.array(arrays["order"]) if "order" in arrays else None,
                folds=_folds(data, arrays) if current else None,
            )
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError, ImportError):
            return None

    def save(self, folder: Path, previous: Trained | None = None, over_newer: bool = True) -> bool:
        """Write it to `folder` (arrays first, the pickle naming them last); the spectrum is
        written only when it is not the one `previous` holds. One process writes at a time (a
        lock beside it): each removes the arrays its pickle does not name, which would be
        another's half-written ones. Without `over_newer`, it is not written over a training
        another process kept since `previous` was read (a background estimate, finishing after
        a command trained on newer decisions): False then."""
        folder.mkdir(parents=True, exist_ok=True)
        # Not held only where the lock file cannot be made: the write below then fails itself.
        with locked(folder / LOCK_FILE):
            if not over_newer and _key(folder) not in (None, previous.key if previous is not None else b""):
                return False
            self._write(folder, previous)
            return True

    def _write(self, folder: Path, previous: Trained | None) -> None:
        token = secrets.token_hex(6)
        files: dict[str, str] = {}
        arrays: dict[str, Any] = {"theta": self.theta, "scores": self.scores, "order": self.order}
        if self.folds is not None:
            folds = self.folds
            arrays |= {
                "fold_thetas": folds.thetas,
                "fold_logits": folds.logits,
                "fold_labels": folds.labels,
                "fold_weights": folds.weights,
                "fold_anchor": folds.anchor,
                "fold_assigned": folds.assigned,
            }
        kept = previous is not None and self.spectrum is not None and self.spectrum is previous.spectrum
        if self.spectrum is not None and not kept:
            arrays["directions"] = self.spectrum.directions
            arrays["curvatures"] = self.spectrum.curvatures
        for name, array in arrays.items():
            if array is not None:
                files[name] = f"fit.{token}.{name}.npy"
                np.save(folder / files[name], np.asarray(array), allow_pickle=False)
        if kept and previous is not None:
            old = _files(folder)
            for name in ("directions", "curvatures"):
                if name in old:
                    files[name] = old[name]
        payload = {
            "version": STATE_VERSION,
            "key": self.key,
            "files": files,
            "flat": self.spectrum.flat if self.spectrum is not None else 1.0,
            "learned_on": self.spectrum.learned_on if self.spectrum is not None else 0,
            "estimate": self.estimate,
            "estimated": self.estimated,
            "papers": self.papers,
            "fold_version": FOLD_VERSION,
            "fold_keys": self.folds.keys if self.folds is not None else None,
            "fold_papers": self.folds.papers if self.folds is not None else b"",
        }
        write_pickle(folder / STATE_FILE, payload)
        named = set(files.values()) | {STATE_FILE}
        for file in folder.glob("fit.*"):
            if file.name not in named and not file.name.endswith(".tmp"):
                file.unlink(missing_ok=True)


def _folds(data: dict[str, Any], arrays: dict[str, np.ndarray]) -> Folds | None:
    """The fold models a kept training names, or None when it names none (or not all of them)."""
    names = ("fold_thetas", "fold_logits", "fold_labels", "fold_weights", "fold_anchor", "fold_assigned")
    keys = data.get("fold_keys")
    if keys is None or not all(name in arrays for name in names):
        return None
    return Folds(
        thetas=np.asarray(arrays["fold_thetas"], dtype=np.float64),
        keys=[bytes(k) for k in keys],
        logits=arrays["fold_logits"],  # mapped: read only for a fold used as it is
        labels=np.asarray(arrays["fold_labels"]),
        weights=np.asarray(arrays["fold_weights"]),
        anchor=np.asarray(arrays["fold_anchor"], dtype=np.float64),
        papers=bytes(data.get("fold_papers", b"")),
        assigned=np.asarray(arrays["fold_assigned"]),
    )


def _key(folder: Path) -> bytes | None:
    """The key of the training kept in `folder`, None when none can be read."""
    try:
        data = read_pickle(folder / STATE_FILE)
        return bytes(data["key"]) if isinstance(data, dict) and data.get("version") == STATE_VERSION else None
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError, ImportError):
        return None


def _files(folder: Path) -> dict[str, str]:
    """The arrays the kept pickle names (none when it cannot be read)."""
    try:
        data = read_pickle(folder / STATE_FILE)
        return dict(data.get("files", {}))
    except (OSError, ValueError, EOFError, TypeError, AttributeError):
        return {}
