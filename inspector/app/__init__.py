"""The desktop app: main window, run browser, shared selection state, background loading."""
