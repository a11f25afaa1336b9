"""Widgets and helpers with no document or assistant logic: keys, the editor and find bar, status, palette,
theme, contrast, menu-action helpers and the dialogs. Imports only `app.config` and `app.platform`."""
