"""Documents: open/save (atomic, links, line endings), external change, one editor per file, window switch,
recovery, the brief. Imports `app.ui`, `app.config` and `app.platform`, never `app.assist` or the window."""
