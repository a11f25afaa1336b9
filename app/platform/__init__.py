"""The machine underneath: user folders, atomic writes, locks, privacy (offline, redacted logs), the Qt
platform check. Imports nothing else from the app."""
