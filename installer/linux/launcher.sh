#!/bin/sh
# Letterpress launcher installed on PATH by the .deb; the app itself lives in /opt/letterpress.
exec /opt/letterpress/letterpress "$@"
