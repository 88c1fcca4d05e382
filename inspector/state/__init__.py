"""What one window is looking at: the Qt-free `Document` (open trace, selection, memoised figure
data, the divergence source) and `InspectorState`, its changes as Qt signals. Below the views, which
read it, and above the figure data it memoises.
"""
