"""Text pieces every engine shares: token counting (`tokens`, with the exact tokenizers
in `bpe`) and putting untrusted text inside our tags (`escaping`). They import nothing of
core, so the context engine, the tool loop, usage metering and media all stand above them."""
