"""Declared settings (type, default, bounds, one changed signal) and key bindings. Imports only
`app.platform`."""
