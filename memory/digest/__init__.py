"""What the group missed: the digest's marks, and the feeds a chat follows with the entries
already seen (models, types, store)."""
