"""Keeping a group in order: rules that cost no model call (welcome, keyword answers, flood,
newcomers' links), actions recorded before they are taken, and reported messages judged by
the model but acted on only after an admin's yes."""
