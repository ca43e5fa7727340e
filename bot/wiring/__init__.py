"""The composition root: `app` builds every part from the settings and starts the
channels; `registry` says which platforms exist; the other modules set up one engine each
(media readers, reminders, the embedded model) so `app` stays a table of parts."""
