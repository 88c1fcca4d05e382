"""What one window is looking at: the Qt-free `Document` (open trace, selection, memoised figure
data, the divergence source) and `InspectorState`, its changes as Qt signals; the Qt-free run
catalog of the run browser (`catalog.RunCatalog`) and its columns (`run_columns`). Below the views
and the app, which read them, and above the figure data they hold.
"""
