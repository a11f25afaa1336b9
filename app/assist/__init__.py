"""The assistant: the controller (selection -> request, latest wins, accept/dismiss), the engine host thread
(the one bridge to the engine), the suggestion and its accept, ghost painter, presets and diffusion editing
(strength, pins, diff view, alternatives). Imports `app.ui`, `app.config` and `app.platform`, never
`app.documents` or the window."""
